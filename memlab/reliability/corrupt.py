"""The corruption matrix: kinds of damage to a store file, each to be reported.

For every kind, a fresh store is written (several scopes, updates, touches,
archives, deletes and, for JSONL, a compaction followed by more appends), the
damage is applied to the closed file, and then the store is opened and read
whole (every scope listed with archived records, candidates, counts). A kind
passes when this raises ``StoreCorrupted`` naming the file, and the file's
bytes are unchanged afterwards. A torn last line of a JSONL log is not damage
(a crash mid-append) and is not in the matrix.
"""

from __future__ import annotations

import gzip
import json
import sqlite3
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memlab.errors import MemlabError, StoreCorrupted
from memlab.memory import JsonlStore, MemoryKind, MemoryRecord, SqliteStore
from memlab.memory.stores.base import MemoryStore
from memlab.memory.stores.logchain import crc_of, header, op_line, seal
from memlab.reliability import Row, make_record

DIMS = 8
Damage = Callable[[Path], object]


def _record(i: int, scope: str, content: str | None = None) -> MemoryRecord:
    rng = np.random.default_rng(i)
    return make_record(
        f"r{i}",
        content or f"fact number {i} for {scope}: " + "lorem ipsum " * (i % 40),
        scope,
        rng.standard_normal(DIMS),
        at=1.78e9 + i,
        kind=list(MemoryKind)[i % 3],
        provenance=(f"t{i}",),
        meta={"n": i},
    )


def _fill(store: MemoryStore, compact: bool = False) -> None:
    scopes = ["alice", "bob", "carol"]
    store.put_many([_record(i, scopes[i % 3]) for i in range(30)])
    for i in range(30, 60):
        store.put(_record(i, scopes[i % 3]))
    store.put(_record(3, "alice", "fact 3 was corrected"))
    store.touch("alice", ["r0", "r3"], 1.78e9 + 100)
    store.mark_archived("bob", ["r1", "r4"], 1.78e9 + 101)
    store.delete("carol", ["r2", "r5"])
    if compact and isinstance(store, JsonlStore):
        store.compact()
        for i in range(60, 70):
            store.put(_record(i, scopes[i % 3]))
        store.touch("bob", ["r7"], 1.78e9 + 102)


def read_everything(store: MemoryStore) -> None:
    for scope in store.scopes():
        records = store.list(scope, include_archived=True)
        store.candidates(scope, include_archived=True)
        store.get_many(scope, [r.id for r in records])
        store.count(scope, include_archived=True)
    store.count()


# -- JSONL damage -------------------------------------------------------------------
def _lines(p: Path) -> list[bytes]:
    return p.read_bytes().split(b"\n")[:-1]


def _put_lines(p: Path, lines: list[bytes]) -> None:
    p.write_bytes(b"".join(line + b"\n" for line in lines))


def _edit_lines(fn: Callable[[list[bytes]], list[bytes]]) -> Damage:
    return lambda p: _put_lines(p, fn(_lines(p)))


def _flip(offset_of: Callable[[bytes], int], bits: int = 0x01) -> Damage:
    def damage(p: Path) -> None:
        data = bytearray(p.read_bytes())
        i = offset_of(bytes(data))
        data[i] ^= bits
        p.write_bytes(bytes(data))

    return damage


def _resealed(
    fn: Callable[[dict[str, object]], dict[str, object]],
    at: int | Callable[[list[bytes]], int] = 5,
) -> Damage:
    """Rewrite line ``at`` (or the line ``at(lines)`` picks) with a new body, a valid
    CRC and its chain fields, and re-chain what follows, so only the body is wrong."""

    def damage(p: Path) -> None:
        lines = _lines(p)
        i = at(lines) if callable(at) else at
        obj = json.loads(lines[i])
        seq, prev = obj.pop("seq"), obj.pop("prev")
        obj.pop("crc")
        lines[i] = op_line(fn(obj), seq, prev)[:-1]
        for j in range(i + 1, len(lines)):
            nxt = json.loads(lines[j])
            nxt.pop("crc")
            nxt["prev"] = crc_of(lines[j - 1])
            lines[j] = seal(nxt)[:-1]
        _put_lines(p, lines)

    return damage


def _chained_append(op: dict[str, object]) -> Damage:
    def damage(p: Path) -> None:
        lines = _lines(p)
        seq = json.loads(lines[-1])["seq"]
        lines.append(op_line(op, seq + 2, crc_of(lines[-1]))[:-1])  # one seq skipped
        _put_lines(p, lines)

    return damage


def _foreign_line(p: Path) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        other = Path(tmp) / "other.jsonl"
        with JsonlStore(other) as s:
            s.put(_record(500, "alice"))
            s.put(_record(501, "alice"))
        foreign = _lines(other)[2]
    lines = _lines(p)
    lines[4] = foreign
    _put_lines(p, lines)


def _middle(data: bytes) -> int:
    return len(data) // 2


def _in_line(k: int, frac: float) -> Callable[[bytes], int]:
    def offset(data: bytes) -> int:
        starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10]
        return starts[k] + int((starts[k + 1] - starts[k] - 1) * frac)

    return offset


def _bad_put(
    change: Callable[[dict[str, object]], object],
) -> Callable[[dict[str, object]], dict[str, object]]:
    def fn(obj: dict[str, object]) -> dict[str, object]:
        rec = obj["records"][0]  # type: ignore[index]
        change(rec)
        return obj

    return fn


JSONL_DAMAGE: dict[str, Damage] = {
    "empty file (0 bytes)": lambda p: p.write_bytes(b""),
    "header only": _edit_lines(lambda ls: ls[:1]),
    "all zeros": lambda p: p.write_bytes(b"\x00" * len(p.read_bytes())),
    "binary, no newline": lambda p: p.write_bytes(bytes(b for b in range(256) if b != 10) * 40),
    "binary with newlines": lambda p: p.write_bytes(bytes(range(256)) * 40),
    "random bytes": lambda p: p.write_bytes(np.random.default_rng(1).bytes(len(p.read_bytes()))),
    "gzip-compressed copy": lambda p: p.write_bytes(gzip.compress(p.read_bytes())),
    "a SQLite database": lambda p: _sqlite_file(p),
    "bit flip in a content string": _flip(_in_line(8, 0.3)),
    "bit flip in an embedding": _flip(_in_line(9, 0.5)),
    "bit flip in a checksum": _flip(lambda d: d.index(b'"crc":"', len(d) // 2) + 8),
    "bit flip in the header": _flip(_in_line(0, 0.4)),
    "zeroed block in the middle": lambda p: _zero_block(p),
    "NUL byte inserted": lambda p: _insert(p, _middle, b"\x00"),
    "line deleted": _edit_lines(lambda ls: ls[:5] + ls[6:]),
    "last two lines deleted, then one appended": _edit_lines(lambda ls: ls[:-2] + ls[-1:]),
    "old line replayed at the end": _edit_lines(lambda ls: [*ls, ls[3]]),
    "line duplicated in place": _edit_lines(lambda ls: [*ls[:6], ls[5], *ls[6:]]),
    "two lines swapped": _edit_lines(lambda ls: [*ls[:4], ls[5], ls[4], *ls[6:]]),
    "last line moved to the middle": _edit_lines(lambda ls: [*ls[:3], ls[-1], *ls[3:-1]]),
    "line from another store": _foreign_line,
    "header deleted": _edit_lines(lambda ls: ls[1:]),
    "second header inserted": _edit_lines(lambda ls: [*ls[:5], header(1)[:-1], *ls[5:]]),
    "format from the future": _edit_lines(
        lambda ls: [seal({"format": "memlab.jsonl/9", "generation": 1, "seq": 0})[:-1], *ls[1:]]
    ),
    "not a memlab header": _edit_lines(lambda ls: [b'{"hello": "world"}', *ls[1:]]),
    "line truncated in the middle": _edit_lines(
        lambda ls: [*ls[:4], ls[4][: len(ls[4]) // 2], *ls[5:]]
    ),
    "two lines joined": _edit_lines(lambda ls: [*ls[:4], ls[4] + ls[5], *ls[6:]]),
    "newline inserted in a line": _edit_lines(
        lambda ls: [*ls[:4], ls[4][:30], ls[4][30:], *ls[5:]]
    ),
    "empty line inserted": _edit_lines(lambda ls: [*ls[:4], b"", *ls[4:]]),
    "CRLF line endings": lambda p: p.write_bytes(p.read_bytes().replace(b"\n", b"\r\n")),
    "invalid UTF-8 in a string": _edit_lines(
        lambda ls: [*ls[:6], ls[6].replace(b"fact", b"f\xff\xfet", 1), *ls[7:]]
    ),
    "a JSON array line": _edit_lines(lambda ls: [*ls[:4], b"[1, 2, 3]", *ls[4:]]),
    "valid checksum, unknown op": _resealed(lambda o: {**o, "op": "merge"}),
    "valid checksum, salience 7": _resealed(_bad_put(lambda r: r.__setitem__("salience", 7.0))),
    "valid checksum, wrong dimensions": _resealed(
        _bad_put(lambda r: r.__setitem__("e", "AACAPwAAgD8="))
    ),
    "valid checksum, NaN embedding": _resealed(
        _bad_put(lambda r: r.__setitem__("e", "AADAfwAAwH8AAMB/AADAfwAAwH8AAMB/AADAfwAAwH8="))
    ),
    "valid checksum, missing field": _resealed(_bad_put(lambda r: r.pop("content"))),
    "valid checksum, empty scope": _resealed(_bad_put(lambda r: r.__setitem__("scope", ""))),
    "valid checksum, seq skipped": _chained_append(
        {"op": "touch", "scope": "alice", "ids": ["r0"], "at": 1.0}
    ),
    "checkpoint count wrong": _resealed(
        lambda o: {**o, "live": int(str(o["live"])) + 1},
        at=lambda ls: next(j for j, line in enumerate(ls) if b'"op":"checkpoint"' in line),
    ),
}


def _sqlite_file(p: Path) -> None:
    p.unlink()
    db = sqlite3.connect(p)
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()


def _zero_block(p: Path) -> None:
    data = bytearray(p.read_bytes())
    mid = len(data) // 3
    data[mid : mid + 4096] = b"\x00" * len(data[mid : mid + 4096])
    p.write_bytes(bytes(data))


def _insert(p: Path, where: Callable[[bytes], int], what: bytes) -> None:
    data = p.read_bytes()
    i = where(data)
    p.write_bytes(data[:i] + what + data[i:])


# -- SQLite damage ------------------------------------------------------------------
PAGE = 4096


def _sql(statement: str) -> Damage:
    def damage(p: Path) -> None:
        db = sqlite3.connect(p, isolation_level=None)
        db.execute(statement)
        db.close()

    return damage


def _page_of(table: str, which: int = 0) -> Callable[[Path], int]:
    """The byte offset of a page of a table's or index's b-tree."""

    def offset(p: Path) -> int:
        db = sqlite3.connect(p)
        try:
            root = db.execute(
                "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)
            ).fetchone()[0]
        finally:
            db.close()
        return (root - 1 + which) * PAGE

    return offset


def _at_page(page: Callable[[Path], int], delta: int, value: bytes) -> Damage:
    def damage(p: Path) -> None:
        data = bytearray(p.read_bytes())
        i = page(p) + delta
        data[i : i + len(value)] = value
        p.write_bytes(bytes(data))

    return damage


def _leaf_page(p: Path) -> int:
    """The byte offset of some leaf page of the records table (page type 0x0d)."""
    data = p.read_bytes()
    for n in range(len(data) // PAGE - 1, 1, -1):
        if data[n * PAGE] == 0x0D:
            return n * PAGE
    raise RuntimeError("no table leaf page")


def _truncate(fraction: float) -> Damage:
    return lambda p: p.write_bytes(p.read_bytes()[: max(1, int(len(p.read_bytes()) * fraction))])


def _rows(statement: str) -> Damage:
    return _sql(
        statement.replace("{bad}", "(SELECT id FROM records WHERE scope = 'alice' LIMIT 1)")
    )


SQLITE_DAMAGE: dict[str, Damage] = {
    "empty file (0 bytes)": lambda p: p.write_bytes(b""),
    "all zeros": lambda p: p.write_bytes(b"\x00" * len(p.read_bytes())),
    "random bytes": lambda p: p.write_bytes(np.random.default_rng(1).bytes(len(p.read_bytes()))),
    "text file": lambda p: p.write_text("this is not a database at all\n" * 400),
    "truncated to half": _truncate(0.5),
    "truncated to 100 bytes": _truncate(100 / (64 * PAGE)),
    "header magic damaged": _at_page(lambda p: 0, 0, b"SQLite format 4"),
    "page size field damaged": _at_page(lambda p: 0, 16, b"\x00\x03"),
    "schema page damaged": _at_page(lambda p: 0, 100, b"\xff\xff\xff\xff"),
    "table leaf page type damaged": _at_page(_leaf_page, 0, b"\x07"),
    "table leaf cell pointers damaged": _at_page(_leaf_page, 8, b"\xff\xf0" * 4),
    "table leaf cell count too large": _at_page(_leaf_page, 3, b"\x7f\xff"),
    "table leaf page zeroed": _at_page(_leaf_page, 0, b"\x00" * PAGE),
    "index root page zeroed": _at_page(_page_of("records_scope_archived"), 0, b"\x00" * PAGE),
    "another program's database": _sqlite_file,
    "records table dropped": _sql("DROP TABLE records"),
    "meta table dropped": _sql("DROP TABLE meta"),
    "a column dropped": _sql("ALTER TABLE records DROP COLUMN provenance"),
    "a column renamed": _sql("ALTER TABLE records RENAME COLUMN content TO text"),
    "schema version reset, tables kept": _sql("PRAGMA user_version = 0"),
    "dimensions not a number": _sql("UPDATE meta SET value = 'many' WHERE key = 'dims'"),
    "dimensions missing": _sql("DELETE FROM meta WHERE key = 'dims'"),
    "row: unknown kind": _rows("UPDATE records SET kind = 'dream' WHERE id = {bad}"),
    "row: unknown source": _rows("UPDATE records SET source = 'oracle' WHERE id = {bad}"),
    "row: provenance not JSON": _rows("UPDATE records SET provenance = '[\"t1\"' WHERE id = {bad}"),
    "row: provenance not a list": _rows(
        "UPDATE records SET provenance = '{\"a\": 1}' WHERE id = {bad}"
    ),
    "row: meta not JSON": _rows("UPDATE records SET meta = 'not json' WHERE id = {bad}"),
    "row: meta not an object": _rows("UPDATE records SET meta = '[1]' WHERE id = {bad}"),
    "row: embedding of 3 bytes": _rows("UPDATE records SET embedding = x'000000' WHERE id = {bad}"),
    "row: embedding of other dims": _rows(
        "UPDATE records SET embedding = x'0000803f' WHERE id = {bad}"
    ),
    "row: embedding is text": _rows("UPDATE records SET embedding = 'text' WHERE id = {bad}"),
    "row: NaN embedding": _rows(
        "UPDATE records SET embedding = x'" + "0000c07f" * DIMS + "' WHERE id = {bad}"
    ),
    "row: salience is text": _rows("UPDATE records SET salience = 'high' WHERE id = {bad}"),
    "row: salience 7.5": _rows("UPDATE records SET salience = 7.5 WHERE id = {bad}"),
    "row: negative tokens": _rows("UPDATE records SET tokens = -3 WHERE id = {bad}"),
    "row: negative access count": _rows("UPDATE records SET access_count = -1 WHERE id = {bad}"),
    "row: empty content": _rows("UPDATE records SET content = '' WHERE id = {bad}"),
    "row: empty id": _rows("UPDATE records SET id = '' WHERE id = {bad}"),
    "row: empty scope": _rows("UPDATE records SET scope = '' WHERE id = 'r0'"),
    "row: created_at is text": _rows(
        "UPDATE records SET created_at = 'yesterday' WHERE id = {bad}"
    ),
    "row: archived_at is text": _rows("UPDATE records SET archived_at = 'later' WHERE id = {bad}"),
}


def make_store(kind: str, folder: Path) -> Path:
    """A store file with some history, closed; returns its path."""
    if kind == "jsonl":
        path = folder / "memory.jsonl"
        with JsonlStore(path) as s:
            _fill(s, compact=True)
    else:
        path = folder / "memory.db"
        with SqliteStore(path) as s:
            _fill(s)
        # Fold the WAL into the file and leave it in a state the damage can address.
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
    return path


def open_store(kind: str, path: Path) -> MemoryStore:
    return JsonlStore(path) if kind == "jsonl" else SqliteStore(path)


def check(kind: str, name: str, damage: Damage, folder: Path) -> str | None:
    """Apply one damage; None if it is reported as StoreCorrupted with the file left
    byte-identical, else what went wrong."""
    path = make_store(kind, folder)
    damage(path)
    before = path.read_bytes()
    outcome: str | None = "the damage went unnoticed"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            store = open_store(kind, path)
            try:
                read_everything(store)
                # A write must not be possible on a damaged store either.
                store.put(_record(999, "alice"))
                read_everything(store)
            finally:
                store.close()
    except StoreCorrupted as exc:
        outcome = None if str(path) in str(exc) else f"StoreCorrupted without the path: {exc}"
    except MemlabError as exc:
        outcome = f"{type(exc).__name__} instead of StoreCorrupted: {str(exc)[:100]}"
    except Exception as exc:
        outcome = f"raw {type(exc).__name__}: {str(exc)[:100]}"
    if path.read_bytes() != before:
        outcome = (outcome + "; " if outcome else "") + "the file was modified"
    return outcome


def run(folder: Path, stores: tuple[str, ...] = ("jsonl", "sqlite")) -> list[Row]:
    rows = []
    for kind in stores:
        matrix = JSONL_DAMAGE if kind == "jsonl" else SQLITE_DAMAGE
        t0 = time.perf_counter()
        failed = []
        for i, (name, damage) in enumerate(matrix.items()):
            case = folder / f"corrupt-{kind}-{i}"
            case.mkdir(parents=True, exist_ok=True)
            why = check(kind, name, damage, case)
            if why is not None:
                failed.append(f"{name}: {why}")
        rows.append(
            Row(
                "corruption matrix",
                kind,
                len(matrix),
                len(matrix),
                len(failed),
                "; ".join(failed[:3])
                if failed
                else "every kind reported as StoreCorrupted, file unchanged",
                time.perf_counter() - t0,
            )
        )
    return rows

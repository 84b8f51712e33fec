"""The line codec of the JSONL store's log: sealed lines, the header, and the chain.

Format 2 (``memlab.jsonl/2``), one JSON object per line, UTF-8, ``\\n``-terminated:

- Every line is compact JSON whose last key is ``"crc"``: the CRC-32 (8 lowercase
  hex digits) of the line's bytes before ``,"crc":"``. Damage anywhere in a line,
  inside a string too, breaks it.
- Line 1 is the header ``{"format":"memlab.jsonl/2","generation":G,"seq":0,"crc":...}``.
  ``generation`` starts at 1 when the file is created and grows by one at every
  compaction (which rewrites the file under a new name and renames it over the
  old one), so a reader can tell two versions of the file apart whatever their
  inode numbers are.
- Every later line is an operation with two more keys before ``crc``:
  ``"seq"``, one more than the previous line's, and ``"prev"``, the previous
  line's ``crc``. A replayed, missing, reordered or foreign line breaks the chain.
- A compaction ends with ``{"op":"checkpoint","live":N,...}``: the number of
  records the lines before it hold, so a compacted file that lost whole lines is
  detected too, and ``"dims"``, the store's embedding dimensions once a record
  has fixed them (kept when every record is deleted; older files lack it). A
  file of format 2 has at least two lines (it is created with its first
  operation, never empty).

Format 1 (``memlab.jsonl/1``: a header without ``crc``, operation lines with
``crc`` but without ``seq`` and ``prev``) is still read; the store rewrites it
in format 2 on its first write. Record fields live in the ``put`` operations'
``records`` (``memlab.memory.stores.codec``), so a new record field needs no
change here.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

FORMAT_V1 = "memlab.jsonl/1"
FORMAT = "memlab.jsonl/2"
FORMATS = (FORMAT_V1, FORMAT)
_CRC_KEY = b',"crc":"'
_CRC_END = b'"}\n'
NO_CRC = "00000000"


def seal(obj: dict[str, Any]) -> bytes:
    """One line: compact JSON of ``obj`` whose last key is the CRC-32 of what
    precedes it.

    Raises:
        TypeError, ValueError: ``obj`` holds something JSON cannot encode
            (records are validated before they get here).
    """
    body = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
    head = body[:-1]
    return head + _CRC_KEY + b"%08x" % zlib.crc32(head) + _CRC_END


def crc_ok(raw: bytes) -> bool:
    """True if a line (without its newline) ends with the CRC of its bytes."""
    cut = raw.rfind(_CRC_KEY)
    if cut < 0 or len(raw) != cut + len(_CRC_KEY) + 10:
        return False
    return raw[cut + len(_CRC_KEY) : cut + len(_CRC_KEY) + 8] == b"%08x" % zlib.crc32(raw[:cut])


def crc_of(line: bytes) -> str:
    """The ``crc`` of a sealed line (with or without its newline)."""
    end = len(line) - (3 if line.endswith(b"\n") else 2)
    return line[end - 8 : end].decode("ascii")


def header(generation: int) -> bytes:
    """The first line of a format-2 log."""
    return seal({"format": FORMAT, "generation": generation, "seq": 0})


def op_line(op: dict[str, Any], seq: int, prev: str) -> bytes:
    """An operation line chained after the line whose crc is ``prev``."""
    return seal({**op, "seq": seq, "prev": prev})


class ChainBroken(ValueError):
    """A line does not belong where it is; ``detail`` says why."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


@dataclass
class Chain:
    """The state of a log read so far: its format, generation, the last line's
    ``seq`` and ``crc``, and the line count (header included)."""

    version: int = 0  # 0: no header read yet
    generation: int = 0
    seq: int = 0
    last_crc: str = NO_CRC
    lines: int = 0

    def next_line(self, op: dict[str, Any]) -> bytes:
        """Encode ``op`` as the line after the last one (format 2)."""
        return op_line(op, self.seq + 1, self.last_crc)

    def advance(self, line: bytes) -> None:
        """Account for a line this process appended (encoded by ``next_line``)."""
        self.seq += 1
        self.last_crc = crc_of(line)
        self.lines += 1

    def read(self, raw: bytes) -> dict[str, Any] | None:
        """Check the next line (without its newline) and decode it.

        Returns:
            The operation, or None for the header.

        Raises:
            ChainBroken: the line is not valid JSON, fails its CRC, is not a
                memlab header where one is due, or breaks the chain.
        """
        try:
            obj = json.loads(raw)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ChainBroken(f"not valid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise ChainBroken("a line is not a JSON object")
        if self.lines == 0:
            self._read_header(obj, raw)
            return None
        if not crc_ok(raw):
            raise ChainBroken("checksum mismatch (the line was altered)")
        if self.version >= 2:
            seq, prev = obj.pop("seq", None), obj.pop("prev", None)
            if seq != self.seq + 1 or prev != self.last_crc:
                raise ChainBroken(_chain_detail(seq, prev, self.seq + 1, self.last_crc))
            self.seq = seq
            self.last_crc = crc_of(raw)
        if "format" in obj:
            raise ChainBroken("a second header in the middle of the log")
        self.lines += 1
        return obj

    def _read_header(self, obj: dict[str, Any], raw: bytes) -> None:
        fmt = obj.get("format")
        if fmt == FORMAT_V1:
            self.version = 1
        elif fmt == FORMAT:
            if not crc_ok(raw):
                raise ChainBroken("checksum mismatch in the header (the line was altered)")
            generation = obj.get("generation")
            if type(generation) is not int or generation < 1 or obj.get("seq") != 0:
                raise ChainBroken(f"bad header (generation {generation!r})")
            self.version = 2
            self.generation = generation
            self.last_crc = crc_of(raw)
        elif isinstance(fmt, str) and fmt.startswith("memlab.jsonl/"):
            raise ChainBroken(
                f"format {fmt!r} is newer than this memlab understands ({FORMAT}); upgrade memlab"
            )
        else:
            raise ChainBroken(f"not a memlab JSONL store (no '{FORMAT}' header)")
        self.lines = 1


def _chain_detail(seq: object, prev: object, want_seq: int, want_prev: str) -> str:
    if not isinstance(seq, int) or isinstance(seq, bool):
        return "the line has no sequence number (it does not belong to this log)"
    if seq < want_seq:
        return (
            f"line sequence {seq} repeats an earlier line (expected {want_seq}): "
            "an old line was replayed or lines were reordered"
        )
    if seq > want_seq:
        return (
            f"line sequence jumps from {want_seq - 1} to {seq}: "
            f"{seq - want_seq} line(s) are missing or lines were reordered"
        )
    return (
        f"the line does not follow the previous one (prev {prev!r}, expected {want_prev!r}): "
        "a line was replaced or comes from another file"
    )

"""What the benchmark adapters share: streaming a large JSON array, selecting
items early, and reporting a file's quirks once.

``locomo`` and ``longmemeval`` stream the file's top-level array one item at a
time (``iter_json_array``), so the 250 MB LongMemEval_S file is never held as
one parsed document, and both report the data's known quirks (malformed
evidence, out-of-order dates...) in one ``DatasetWarning`` per file instead of
failing.
"""

from __future__ import annotations

import codecs
import json
import os
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memlab.errors import TranscriptError
from memlab.progress import bar as progress_bar

CHUNK_CHARS = 1 << 20
MAX_EXAMPLES = 3
# Dates the adapters accept. A transcript's timestamps are four-digit years, and
# the turns and probes after a session's date need room before year 10000.
MIN_YEAR, MAX_YEAR = 1000, 9998


def usable_year(year: int) -> bool:
    """Whether a benchmark date in ``year`` can be used (else it counts as
    unreadable and the adapter's fallback places the session)."""
    return MIN_YEAR <= year <= MAX_YEAR


class DatasetWarning(UserWarning):
    """A benchmark file holds data the adapter had to repair or skip."""


@dataclass
class Quirks:
    """Counts (and a few examples) of what an adapter repaired or skipped in one
    file, reported as a single warning."""

    source: str
    counts: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)

    def add(self, what: str, example: str | None = None, n: int = 1) -> None:
        self.counts[what] += n
        if example is not None:
            shown = self.examples.setdefault(what, [])
            if len(shown) < MAX_EXAMPLES:
                shown.append(example)

    def message(self) -> str | None:
        if not self.counts:
            return None
        parts = []
        for what, n in self.counts.items():
            ex = self.examples.get(what)
            parts.append(f"{n} {what}" + (f" (e.g. {'; '.join(ex)})" if ex else ""))
        return f"{self.source}: " + ", ".join(parts)

    def warn(self) -> None:
        msg = self.message()
        if msg is not None:
            warnings.warn(msg, DatasetWarning, stacklevel=3)


def check_path(path: str | os.PathLike[str] | None, dataset: str) -> Path:
    """The benchmark file, or a TranscriptError saying what to pass."""
    if path is None or str(path) == "":
        raise TranscriptError(
            f"transcripts={dataset} needs the upstream file: add transcripts.path=FILE"
        )
    p = Path(path)
    if p.is_dir():
        raise TranscriptError(f"{p} is a folder; transcripts={dataset} reads one JSON file")
    if not p.exists():
        raise TranscriptError(f"{p}: no such file")
    return p


def iter_json_array(
    path: str | os.PathLike[str],
    *,
    progress: bool | None = None,
    desc: str | None = None,
    chunk_chars: int = CHUNK_CHARS,
) -> Iterator[Any]:
    """Yield the items of a file whose top level is a JSON array, one at a time.

    Only the item being parsed (plus one read chunk) is held in memory, and the
    C JSON decoder does the parsing, so a 250 MB file streams at the decoder's
    speed. ``NaN``, ``Infinity`` and ``-Infinity`` (not JSON, but written by
    pandas-style exports for missing cells) are read as ``None``. A progress bar
    counts the bytes read (``progress=None``: only on a terminal).

    Raises:
        TranscriptError: the file cannot be read, is not UTF-8, is not a JSON
            array, or an item is not valid JSON, nests too deeply or holds an
            integer too long to read (naming the item and character).
    """
    p = Path(path)
    # NaN and Infinity are not JSON, but pandas-style exports of benchmark files
    # write them for missing cells: read them as null, which the adapters already
    # handle as a missing value (and report as a quirk), rather than as a float
    # that reaches a string or date field.
    decoder = json.JSONDecoder(parse_constant=lambda _name: None)
    utf8 = codecs.getincrementaldecoder("utf-8-sig")()
    try:
        f = p.open("rb")
    except OSError as exc:
        raise TranscriptError(f"{p}: cannot read ({exc.strerror})") from None
    size = p.stat().st_size
    bar = progress_bar(
        total=size, unit="B", unit_scale=True, desc=desc or p.name, progress=progress, leave=False
    )
    buf = ""
    pos = 0  # next unread character of buf
    base = 0  # characters of the file before buf[0]
    eof = False

    def fill(want: int) -> None:
        nonlocal buf, pos, base, eof
        data = f.read(want)
        bar.update(len(data))
        if not data:
            eof = True
        try:
            text = utf8.decode(data, final=eof)
        except UnicodeDecodeError as exc:
            raise TranscriptError(f"{p}: not UTF-8 text ({exc.reason})") from None
        base += pos
        buf = buf[pos:] + text
        pos = 0

    def skip_ws() -> str:
        nonlocal pos
        while True:
            while pos < len(buf) and buf[pos] in " \t\r\n":
                pos += 1
            if pos < len(buf) or eof:
                return buf[pos] if pos < len(buf) else ""
            fill(chunk_chars)

    try:
        first = skip_ws()
        if first != "[":
            what = "is empty" if first == "" else f"starts with {first!r}"
            raise TranscriptError(
                f"{p}: expected a JSON array of benchmark items ('[...]'), but the file {what}"
            )
        pos += 1
        index = 0
        while True:
            c = skip_ws()
            if c == "]":
                pos += 1
                if skip_ws() != "":
                    raise TranscriptError(f"{p}: unexpected data after the closing ']'")
                return
            if c == "":
                raise TranscriptError(f"{p}: the file ends inside the top-level array (truncated?)")
            if index > 0:
                if c != ",":
                    raise TranscriptError(
                        f"{p}: expected ',' or ']' after item #{index - 1} (character {base + pos})"
                    )
                pos += 1
                if skip_ws() == "":
                    raise TranscriptError(f"{p}: the file ends after a ',' (truncated?)")
            want = chunk_chars
            while True:
                try:
                    item, end = decoder.raw_decode(buf, pos)
                except json.JSONDecodeError as exc:
                    if eof:
                        raise TranscriptError(
                            f"{p}: item #{index} is not valid JSON at character "
                            f"{base + exc.pos}: {exc.msg}"
                        ) from None
                    # Probably cut off by the chunk boundary: read more and retry,
                    # doubling the read so a huge item costs amortized linear time.
                    fill(want)
                    want *= 2
                    continue
                except RecursionError:
                    # The C decoder recurses per nesting level; no benchmark item
                    # nests this deep, so this is a broken or hostile file.
                    raise TranscriptError(
                        f"{p}: item #{index} nests arrays or objects too deeply to read "
                        f"(from character {base + pos}); is this a benchmark file?"
                    ) from None
                except ValueError as exc:
                    # Not a syntax error (those are JSONDecodeError, above) but a
                    # value Python refuses: an integer longer than 4300 digits.
                    # More data cannot make it shorter, so it fails at once.
                    raise TranscriptError(
                        f"{p}: item #{index} holds a value that cannot be read (from "
                        f"character {base + pos}): {exc}"
                    ) from None
                if (
                    not eof
                    and not isinstance(item, dict | list)
                    and (end == len(buf) or buf[end] not in " \t\r\n,]")
                ):
                    fill(want)  # a bare number ("3.25e" + "10") may go on in the next chunk
                    want *= 2
                    continue
                break
            pos = end
            yield item
            index += 1
    finally:
        bar.close()
        f.close()


def select(
    items: Iterable[tuple[str, Any]], ids: Iterable[str] | None, limit: int | None
) -> Iterator[tuple[str, Any]]:
    """Keep the (id, item) pairs whose id is in ``ids`` (all when None), stopping
    after ``limit`` kept items or once every wanted id was seen, so a small
    selection does not read the rest of a large file."""
    wanted = set(ids) if ids is not None else None
    kept = 0
    for item_id, item in items:
        if limit is not None and kept >= limit:
            return
        if wanted is not None and item_id not in wanted:
            continue
        yield item_id, item
        kept += 1
        if wanted is not None:
            wanted.discard(item_id)
            if not wanted:
                return


def answer_text(value: Any) -> str | None:
    """An upstream answer as text: integers (some answers are) become strings, a
    list is joined with commas, empty values are None."""
    if value is None:
        return None
    if isinstance(value, list):
        return ", ".join(str(v) for v in value) or None
    text = str(value).strip()
    return text or None


def dedupe_id(candidate: str, taken: set[str]) -> str:
    """``candidate``, or ``candidate#2``, ``#3``... if it is already taken."""
    if candidate not in taken:
        return candidate
    n = 2
    while f"{candidate}#{n}" in taken:
        n += 1
    return f"{candidate}#{n}"

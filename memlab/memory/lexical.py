"""A lexical signal: BM25 over each scope's records, kept incrementally.

Why not ``bm25s`` or another library: they build an index over a fixed corpus in
one batch, while a memory store changes on every turn (records are written,
archived, evicted, upserted). Rebuilding per write would cost O(corpus) each
time. This small inverted index adds or removes one record in O(its terms) and
scores a query with numpy over the postings of the query's terms only.

Scoring is Okapi BM25 (k1 = 1.2, b = 0.75) with the Lucene idf
``ln(1 + (N - df + 0.5) / (df + 0.5))``, where N, df and the average length count
only the active (live, not archived) records of the scope.
"""

from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

import numpy as np

from memlab.memory.text import content_words

_SUFFIXES = ("ingly", "edly", "ing", "ed", "es", "s", "ly")


@lru_cache(maxsize=1 << 16)  # every write and query stems its words; vocabularies repeat
def stem(word: str) -> str:
    """A light English suffix stripper ("running" -> "runn", "runs" -> "run").

    Crude on purpose: it only has to map a word and its inflections to the same
    key, and it is deterministic and dependency-free.
    """
    for suffix in _SUFFIXES:
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def terms(text: str) -> list[str]:
    """Index terms of a text: lower-cased words, stopwords dropped, lightly stemmed."""
    return list(_terms(text))


@lru_cache(maxsize=1 << 14)  # a replay indexes the same turn once per strategy
def _terms(text: str) -> tuple[str, ...]:
    return tuple(stem(w) for w in content_words(text))


@lru_cache(maxsize=1 << 14)
def _counts(text: str) -> tuple[tuple[str, ...], tuple[int, ...], int]:
    """A text's distinct terms in first-seen order, their counts, and its length
    in terms (shared by every index that holds the text: never mutated)."""
    counts = Counter(_terms(text))
    return tuple(counts), tuple(counts.values()), sum(counts.values())


def _grow(arr: np.ndarray, size: int) -> np.ndarray:
    """A copy of ``arr`` zero-padded (or cut) to ``size``."""
    out = np.zeros(size, dtype=arr.dtype)
    n = min(size, len(arr))
    out[:n] = arr[:n]
    return out


class _Postings:
    """Growable parallel arrays of (row, term frequency) for one term.

    New postings wait in two Python lists and are copied into the arrays when the
    term is next read (``view``): a write appends to lists (a numpy scalar store
    per posting, and a resize for nearly every new term, cost more than
    tokenizing the text), and a read copies each posting once.
    """

    __slots__ = ("n", "pending_rows", "pending_tfs", "rows", "tfs")

    def __init__(self) -> None:
        self.rows = _EMPTY_ROWS
        self.tfs = _EMPTY_TFS
        self.n = 0
        self.pending_rows: list[int] = []
        self.pending_tfs: list[int] = []

    def view(self) -> tuple[np.ndarray, np.ndarray]:
        """The term's (rows, tfs), in the order they were added."""
        if self.pending_rows:
            k = len(self.pending_rows)
            need = self.n + k
            if need > len(self.rows):
                size = max(4, 2 * len(self.rows), need)
                self.rows = _grow(self.rows, size)
                self.tfs = _grow(self.tfs, size)
            self.rows[self.n : need] = self.pending_rows
            self.tfs[self.n : need] = self.pending_tfs
            self.n = need
            self.pending_rows = []
            self.pending_tfs = []
        return self.rows[: self.n], self.tfs[: self.n]

    def keep(self, ok: np.ndarray, rows: np.ndarray) -> None:
        """Keep only the postings where ``ok`` holds, with row numbers ``rows``
        (one per posting of ``view``)."""
        n = int(ok.sum())
        self.rows[:n] = rows[ok]
        self.tfs[:n] = self.tfs[: self.n][ok]
        self.n = n


_EMPTY_ROWS = np.zeros(0, dtype=np.int64)
_EMPTY_TFS = np.zeros(0, dtype=np.float32)


class LexicalIndex:
    """BM25 over rows of a scope, aligned with the rows of a ScopeIndex.

    Rows are added with their text and switched on and off (``set_active``) as
    records are archived, deleted or come back; ``renumber`` follows a
    compaction of the owning index. Postings of inactive rows stay until the
    next renumber, and are ignored when scoring.
    """

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self.postings: dict[str, _Postings] = {}
        self.row_terms: list[tuple[str, ...] | None] = []  # a row's distinct terms
        self.df: Counter[str] = Counter()
        self.active = np.zeros(16, dtype=bool)
        self.length = np.zeros(16, dtype=np.float32)
        self.n_active = 0
        self.total_length = 0.0

    def _ensure(self, row: int) -> None:
        while len(self.row_terms) <= row:
            self.row_terms.append(None)
        if row >= len(self.length):
            size = max(2 * len(self.length), row + 1)
            self.length = _grow(self.length, size)
            self.active = _grow(self.active, size)

    def set_text(self, row: int, text: str, active: bool) -> None:
        """(Re)index a row's text; an existing row's old postings are dropped."""
        self._ensure(row)
        if self.row_terms[row] is not None:
            self.set_active(row, False)
            self._drop_postings(row)
        row_terms, tfs, length = _counts(text)
        self.row_terms[row] = row_terms
        self.length[row] = length
        postings = self.postings
        for term, tf in zip(row_terms, tfs, strict=True):
            p = postings.get(term)
            if p is None:
                p = postings[term] = _Postings()
            # appended here, not by a method: a write adds some 50 postings
            p.pending_rows.append(row)
            p.pending_tfs.append(tf)
        self.set_active(row, active)

    def _drop_postings(self, row: int) -> None:
        counts = self.row_terms[row]
        assert counts is not None
        for term in counts:
            p = self.postings[term]
            rows, _ = p.view()
            p.keep(rows != row, rows)

    def set_active(self, row: int, active: bool) -> None:
        """Count a row in (or out of) N, df and the average length."""
        if row >= len(self.row_terms) or self.row_terms[row] is None or self.active[row] == active:
            return
        counts = self.row_terms[row]
        assert counts is not None
        sign = 1 if active else -1
        self.active[row] = active
        self.n_active += sign
        self.total_length += sign * float(self.length[row])
        df = self.df
        if active:
            get = df.get
            for term in counts:
                df[term] = get(term, 0) + 1
        else:
            for term in counts:
                left = df[term] - 1
                if left > 0:
                    df[term] = left
                else:
                    del df[term]

    def renumber(self, keep: np.ndarray) -> None:
        """Follow a compaction: old row ``keep[i]`` becomes row ``i``; others vanish."""
        new_of_old = np.full(len(self.row_terms), -1, dtype=np.int64)
        new_of_old[keep] = np.arange(len(keep))
        self.row_terms = [self.row_terms[i] for i in keep]
        size = max(16, len(keep))
        self.active = _grow(self.active[keep], size)
        self.length = _grow(self.length[keep], size)
        for term in list(self.postings):
            p = self.postings[term]
            rows, _ = p.view()
            mapped = new_of_old[rows]
            ok = mapped >= 0
            if not ok.any():
                del self.postings[term]
                continue
            p.keep(ok, mapped)

    def scores(self, query: str, n_rows: int) -> np.ndarray:
        """BM25 of every row for a query (0 for inactive rows and no match)."""
        out = np.zeros(n_rows, dtype=np.float64)
        if self.n_active == 0:
            return out
        avg = self.total_length / self.n_active if self.total_length > 0 else 1.0
        # every matching term's postings side by side, scored in one pass and summed
        # per row by bincount, which adds a row's terms in this same order (as one
        # ``out[rows] +=`` per term did: the same float64 sums)
        parts_rows, parts_tfs, idfs, counts = [], [], [], []
        # distinct terms in the query's order: a set's order follows the process's
        # string hashing, and with it the last bits of each row's float64 sum
        for term in dict.fromkeys(_terms(query)):
            p = self.postings.get(term)
            df = self.df.get(term, 0)
            if p is None or df <= 0:
                continue
            rows, tfs = p.view()
            parts_rows.append(rows)
            parts_tfs.append(tfs)
            idfs.append(math.log(1.0 + (self.n_active - df + 0.5) / (df + 0.5)))
            counts.append(len(rows))
        if not parts_rows:
            return out
        rows = np.concatenate(parts_rows)
        tf = np.concatenate(parts_tfs).astype(np.float64)
        idf = np.repeat(np.asarray(idfs, dtype=np.float64), counts)
        norm = self.k1 * (1.0 - self.b + self.b * self.length[rows] / avg)
        weight = idf * tf * (self.k1 + 1.0) / (tf + norm)
        # an inactive row's postings add 0.0 (a float sum plus 0.0 is the same sum,
        # so every row's score is what filtering them out gave, for less work; every
        # posting's row has a length and an active flag, see _ensure); rows past
        # n_rows are cut off the end
        weight[~self.active[rows]] = 0.0
        return np.bincount(rows, weight, minlength=n_rows)[:n_rows]

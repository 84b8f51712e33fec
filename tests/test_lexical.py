"""The incremental BM25 index."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from memlab.memory.lexical import LexicalIndex, stem, terms


def test_terms_drop_stopwords_and_stem() -> None:
    assert terms("We deployed the services on Kubernetes!") == ["deploy", "servic", "kubernet"]
    assert stem("runs") == "run" and stem("is") == "is" and stem("deploying") == "deploy"
    assert stem("going") == "going"  # stems keep at least three letters


def reference_bm25(
    docs: dict[int, str], query: str, k1: float = 1.2, b: float = 0.75
) -> dict[int, float]:
    """BM25 computed from scratch over the active documents."""
    toks = {i: terms(t) for i, t in docs.items()}
    n = len(toks)
    avg = sum(len(t) for t in toks.values()) / n if n else 0
    out = {}
    for i, t in toks.items():
        c = Counter(t)
        s = 0.0
        for q in set(terms(query)):
            df = sum(1 for x in toks.values() if q in x)
            if not df or q not in c:
                continue
            idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
            s += idf * c[q] * (k1 + 1) / (c[q] + k1 * (1 - b + b * len(t) / (avg or 1)))
        out[i] = s
    return out


def test_scores_match_a_from_scratch_bm25() -> None:
    docs = {
        0: "we deploy on GKE in europe",
        1: "our billing email is finance",
        2: "deploy deploy deploy to EKS",
        3: "coffee is a flat white",
    }
    idx = LexicalIndex()
    for i, t in docs.items():
        idx.set_text(i, t, True)
    got = idx.scores("where do we deploy", 4)
    ref = reference_bm25(docs, "where do we deploy")
    np.testing.assert_allclose(got, [ref[i] for i in range(4)], rtol=1e-6)
    assert got[2] > got[0] > 0 and got[1] == got[3] == 0


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["add", "archive", "unarchive", "retext", "compact", "score"]),
            st.integers(0, 11),
            st.lists(
                st.sampled_from(
                    ["deploy", "region", "billing", "coffee", "pager", "gke", "eks", "team"]
                ),
                min_size=1,
                max_size=6,
            ),
        ),
        max_size=40,
    ),
    st.lists(
        st.sampled_from(["deploy", "region", "billing", "coffee", "gke", "nothing"]),
        min_size=1,
        max_size=3,
    ),
)
def test_incremental_index_equals_a_rebuild(
    ops: list[tuple[str, int, list[str]]], query_words: list[str]
) -> None:
    """Whatever sequence of writes, archives, compactions and reads in between (a
    read moves a term's pending postings into its arrays): the same scores as a
    from-scratch BM25 over the active rows."""
    idx = LexicalIndex()
    text: dict[int, str] = {}
    active: dict[int, bool] = {}
    rows = 0

    def check(query: str) -> None:
        got = idx.scores(query, rows)
        ref = reference_bm25({r: t for r, t in text.items() if active[r]}, query)
        expected = [ref.get(r, 0.0) for r in range(rows)]
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-9)
        # bit for bit what summing only the active rows' postings gives, also for a
        # view that ends before the last rows
        for n_rows in {rows, max(0, rows - 1), max(0, rows - 3)}:
            np.testing.assert_array_equal(idx.scores(query, n_rows), _filtered(idx, query, n_rows))

    for op, key, words in ops:
        if op == "score":
            check(" ".join(words))
            continue
        if op == "add" or not text:
            text[rows] = " ".join(words)
            active[rows] = True
            idx.set_text(rows, text[rows], True)
            rows += 1
            continue
        row = sorted(text)[key % len(text)]
        if op == "archive":
            idx.set_active(row, False)
            active[row] = False
        elif op == "unarchive":
            idx.set_active(row, True)
            active[row] = True
        elif op == "retext":
            text[row] = " ".join(words)
            idx.set_text(row, text[row], active[row])
        else:  # compact: drop inactive rows and renumber
            keep = np.array([r for r in range(rows) if active.get(r, False)], dtype=np.int64)
            idx.renumber(keep)
            text = {new: text[int(old)] for new, old in enumerate(keep)}
            active = dict.fromkeys(text, True)
            rows = len(keep)
    check(" ".join(query_words))


def _filtered(idx: LexicalIndex, query: str, n_rows: int) -> np.ndarray:
    """BM25 summed over the postings of active rows below ``n_rows`` only, in the
    index's order (what ``scores`` computed before inactive postings added 0.0)."""
    out = np.zeros(n_rows, dtype=np.float64)
    if idx.n_active == 0:
        return out
    avg = idx.total_length / idx.n_active if idx.total_length > 0 else 1.0
    for term in dict.fromkeys(terms(query)):
        p = idx.postings.get(term)
        df = idx.df.get(term, 0)
        if p is None or df <= 0:
            continue
        idf = math.log(1.0 + (idx.n_active - df + 0.5) / (df + 0.5))
        rows, tfs = p.view()
        keep = (rows < n_rows) & idx.active[rows]
        rows, tf = rows[keep], tfs[keep].astype(np.float64)
        norm = idx.k1 * (1.0 - idx.b + idx.b * idx.length[rows] / avg)
        out[rows] += idf * tf * (idx.k1 + 1.0) / (tf + norm)  # a term's rows are distinct
    return out


def test_inactive_and_unseen_rows_add_nothing() -> None:
    idx = LexicalIndex()
    for row, text in enumerate(["deploy on gke", "deploy on eks", "billing deploy", "deploy"]):
        idx.set_text(row, text, True)
    idx.set_active(1, False)
    got = idx.scores("deploy eks", 3)  # a view of the first three rows
    assert len(got) == 3 and got[1] == 0.0 and got[0] > 0 and got[2] > 0
    np.testing.assert_array_equal(got, _filtered(idx, "deploy eks", 3))


def test_empty_index_and_query_without_terms() -> None:
    assert LexicalIndex().scores("anything", 3).tolist() == [0.0, 0.0, 0.0]
    idx = LexicalIndex()
    idx.set_text(0, "we deploy on gke", True)
    assert idx.scores("the and of", 1).tolist() == [0.0]  # only stopwords


_SCORES_SCRIPT = """
import random, sys
from memlab.memory.lexical import LexicalIndex
rng = random.Random(5)
words = [f"w{i}x" for i in range(40)]
idx = LexicalIndex()
for row in range(300):
    idx.set_text(row, " ".join(rng.choice(words) for _ in range(rng.randint(3, 30))), True)
query = " ".join(words)
sys.stdout.write(idx.scores(query, 300).tobytes().hex())
"""


def test_scores_do_not_depend_on_string_hashing() -> None:
    """A row's BM25 sums its terms in the query's order, not a set's (whose order
    follows PYTHONHASHSEED): the same scores, to the bit, in every process."""
    import os
    import subprocess
    import sys

    out = set()
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        run = subprocess.run(
            [sys.executable, "-c", _SCORES_SCRIPT], env=env, capture_output=True, text=True,
            check=True,
        )  # fmt: skip
        out.add(run.stdout)
    assert len(out) == 1 and next(iter(out))

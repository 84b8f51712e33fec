"""THE seeded workload generator of memlab's benchmarks: records, queries and their
vectors, for `memlab bench store` and for the scripts in benchmarks/ (``make bench``
uses ``flat_lines`` and ``flat_records``).

Three corpora, all with the same support-chat text lines (pseudo-words, see
``Corpus``), differ in where the vectors come from:

- ``clustered`` (the default): vectors from ``ClusteredVectors``, a seeded
  generator whose neighbourhood structure was fitted to all-MiniLM-L6-v2
  embeddings of real chat turns (the LoCoMo and LongMemEval slices; see
  ``MINILM_STATS`` and ``benchmarks/calibrate_workload.py``). Queries are
  embedded by table lookup (``LookupEmbedder``).
- ``topics``: the text lines embedded with the offline ``HashEmbedder``. Its
  vectors of short texts are nearly random in 384 dims (local intrinsic
  dimensionality ~33 against MiniLM's ~10; a record's nearest neighbour is hardly
  nearer than its 100th): the worst case for a graph index such as HNSW.
- ``flat``: ``make bench``'s vocabulary under the hash embedder, where any two
  lines are ~0.5 similar and salience decides the ranking.

Salience is ``estimated`` (drawn from the distribution memlab's own
``estimate_salience`` gives real chat turns, ``SALIENCE_LEVELS``) or ``uniform``
on [0, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memlab.errors import ConfigError, InputError

START = 1_780_000_000.0
DIMS = 384
SCOPE = "alice:support"
OTHER_SCOPES = ("bob:support", "carol:sales", "dave:ops")
CORPORA = ("clustered", "topics", "flat")
VECTORS = {
    "clustered": "MiniLM-calibrated clustered vectors",
    "topics": "hash embedder",
    "flat": "hash embedder",
}  # where each corpus's vectors come from, for labels
SALIENCE = ("estimated", "uniform")

_SUBJECTS = ["we", "our team", "the client", "my manager", "the on-call engineer", "billing"]
_VERBS = ["deploys to", "prefers", "moved to", "asked about", "switched to", "runs", "pays for"]
_ASK = ["where does", "what about", "remind me about", "which", "how do we handle", "any news on"]
_CONS = "bcdfghjklmnprstvwz"
_VOWELS = "aeiou"
VOCAB_SIZE = 6000
TOPIC_SIZE = 200  # records per topic, at every N
TOPIC_WORDS = 12
THREAD_SIZE = 8  # mean records per thread (one conversation about one thing)

# estimate_salience() over the 4,591 distinct turns of the LoCoMo and LongMemEval
# slices in ../shared/datasets: (value, share). Most turns get the base 0.3-0.4 or
# one cue (0.65); 7.7% trip several cues and reach 1.0.
SALIENCE_LEVELS: tuple[tuple[float, float], ...] = (
    (0.05, 0.0004), (0.15, 0.0601), (0.25, 0.0876), (0.30, 0.0793), (0.40, 0.2468),
    (0.50, 0.0961), (0.55, 0.0599), (0.65, 0.1993), (0.70, 0.0037), (0.75, 0.0087),
    (0.80, 0.0351), (0.90, 0.0333), (0.95, 0.0131), (1.00, 0.0767),
)  # fmt: skip

# Neighbourhood statistics (see ``vector_stats``) of all-MiniLM-L6-v2 embeddings
# of those 4,591 turns and of the 351 questions asked about them, measured by
# benchmarks/calibrate_workload.py. ``ClusterShape``'s defaults were fitted to them.
MINILM_STATS: dict[str, float] = {
    "pair_mean": 0.068, "pair_std": 0.104, "nn1": 0.759, "nn10": 0.482, "nn100": 0.293,
    "participation": 105.1, "lid": 9.87, "q1": 0.575, "q10": 0.433, "q100": 0.266,
}  # fmt: skip
CALIBRATION_RECORDS = 4591
CALIBRATION_QUERIES = 351


def _vocabulary(rng: np.random.Generator) -> list[str]:
    """Pronounceable pseudo-words (CV syllables + a consonant): unrelated words
    share few character trigrams, as in real text."""
    seen: dict[str, None] = {}
    while len(seen) < VOCAB_SIZE:
        k = int(rng.integers(2, 4))
        w = "".join(_CONS[rng.integers(len(_CONS))] + _VOWELS[rng.integers(5)] for _ in range(k))
        seen[w + _CONS[rng.integers(len(_CONS))]] = None
    return list(seen)


class Corpus:
    """Seeded support-chat lines about topics.

    Each line is a subject, a verb, 3 of its topic's 12 words and 4 words drawn
    from a Zipf(1.05) distribution over a 6,000-word vocabulary. There is one
    topic per ``TOPIC_SIZE`` records, so a query (2 words of one topic) has a few
    hundred related records at every N, and unrelated lines have low cosine
    similarity under the hash embedder.
    """

    def __init__(self, n_topics: int, seed: int) -> None:
        rng = np.random.default_rng(seed)
        self.vocab = _vocabulary(rng)
        zipf = 1.0 / np.arange(1, VOCAB_SIZE + 1) ** 1.05
        self.p = zipf / zipf.sum()
        self.topics = np.stack(
            [rng.choice(VOCAB_SIZE, TOPIC_WORDS, replace=False) for _ in range(n_topics)]
        )

    def lines(self, n: int, seed: int) -> list[str]:
        return self.draw(n, seed)[0]

    def draw(self, n: int, seed: int) -> tuple[list[str], np.ndarray]:
        """n lines and the topic index of each."""
        rng = np.random.default_rng(seed)
        t = rng.integers(len(self.topics), size=n)
        return self.about(t, rng), t

    def about(self, topics: np.ndarray, rng: np.random.Generator) -> list[str]:
        """One line about each of the given topic indexes."""
        n = len(topics)
        pick = np.argsort(rng.random((n, TOPIC_WORDS)), axis=1)[:, :3]
        topical = self.topics[topics[:, None], pick]
        common = rng.choice(VOCAB_SIZE, size=(n, 4), p=self.p)
        words = np.concatenate([topical, common], axis=1)
        words = np.take_along_axis(words, np.argsort(rng.random(words.shape), axis=1), axis=1)
        s = rng.integers(len(_SUBJECTS), size=n)
        v = rng.integers(len(_VERBS), size=n)
        vocab = self.vocab
        return [
            f"{_SUBJECTS[s[i]]} {_VERBS[v[i]]} " + " ".join(vocab[j] for j in words[i])
            for i in range(n)
        ]

    def queries(self, n: int, seed: int) -> list[str]:
        rng = np.random.default_rng(seed)
        return self.questions(rng.integers(len(self.topics), size=n), rng)

    def questions(self, topics: np.ndarray, rng: np.random.Generator) -> list[str]:
        """One question (two of the topic's words) about each given topic."""
        out = []
        for t in topics:
            a, b = rng.choice(self.topics[int(t)], 2, replace=False)
            out.append(f"{_ASK[rng.integers(len(_ASK))]} {self.vocab[a]} {self.vocab[b]}?")
        return out


_OBJECTS = [
    f"{a}-{b}"
    for a in ["gke", "eks", "aks", "nomad", "heroku", "fly", "render", "k3s"]
    for b in ["europe", "us-east", "asia", "canary", "prod", "staging", "edge", "lab"]
]
_TOKENS = [f"token{i}" for i in range(4000)]


def flat_lines(n: int, seed: int = 0) -> list[str]:
    """``make bench``'s vocabulary: template lines + 6 of 4,000 "tokenNNN" words.

    Every "tokenNNN" shares the trigrams of "token", so any two lines are ~0.5
    similar under the hash embedder: the similarity signal is nearly flat and
    salience decides the hybrid top-k (a hard case for any candidate pool).
    """
    rng = np.random.default_rng(seed)
    s = rng.integers(len(_SUBJECTS), size=n)
    v = rng.integers(len(_VERBS), size=n)
    o = rng.integers(len(_OBJECTS), size=n)
    w = rng.integers(len(_TOKENS), size=(n, 6))
    return [
        f"{_SUBJECTS[s[i]]} {_VERBS[v[i]]} {_OBJECTS[o[i]]} " + " ".join(_TOKENS[j] for j in w[i])
        for i in range(n)
    ]


def flat_records(
    n: int, scope: str, embedder: Any, *, seed: int = 0, batch: int = 4096
) -> list[Any]:
    """``make bench``'s records: n ``flat_lines`` embedded by ``embedder``, episodic,
    in one scope, one minute apart from ``START``, salience uniform on [0, 1]."""
    from memlab.memory import MemoryKind, MemoryRecord
    from memlab.memory.text import estimate_tokens

    texts = flat_lines(n, seed)
    vecs = np.concatenate(
        [embedder.embed(texts[i : i + batch]) for i in range(0, n, batch)]
        or [np.zeros((0, embedder.dims), dtype=np.float32)]
    )
    sal = np.random.default_rng(seed + 1).uniform(0.0, 1.0, n)
    return [
        MemoryRecord(
            id=f"{scope}-{seed}-{i}",
            content=texts[i],
            embedding=vecs[i],
            kind=MemoryKind.EPISODIC,
            scope=scope,
            salience=float(sal[i]),
            tokens=estimate_tokens(texts[i]),
            created_at=START + 60.0 * i,
            last_accessed_at=START + 60.0 * i,
        )
        for i in range(n)
    ]


# -- vectors with the structure of sentence embeddings ---------------------------------
@dataclass(frozen=True)
class ClusterShape:
    """The parameters of ``ClusteredVectors`` (spreads are the expected norms of
    each level's offset; ``decay`` shapes the record and query offsets).

    The defaults except ``popularity`` were fitted (Nelder-Mead on
    ``vector_stats``, by benchmarks/calibrate_workload.py) to ``MINILM_STATS``.
    """

    common: float = 0.2936  # weight of one direction all texts share
    topic: float = 0.6503  # topic centres around it (isotropic)
    thread: float = 0.789  # thread centres around their topic (isotropic)
    record: float = 0.8135  # records around their thread
    query: float = 1.357  # queries around the thread they ask about
    decay: float = 0.9024  # variance of the i-th of 384 random axes ~ i^-decay
    # Threads pick topic k with probability ~ 1/k^popularity (Zipf). Fixed, not
    # fitted: the statistics alone fit a little better with uniform topics, but
    # then HNSW finds neighbours more easily than in real MiniLM vectors; with
    # Zipf's law its recall matches theirs (benchmarks/calibrate_workload.py --hnsw).
    popularity: float = 1.0


class ClusteredVectors:
    """Seeded unit vectors shaped like sentence embeddings of chat turns.

    Three levels, as in a long chat history: topics (one per ``TOPIC_SIZE``
    records on average; a few are far more popular, see ``topic_choice``), threads
    within a topic (a conversation about one thing, about ``THREAD_SIZE``
    records) and records within a thread. A vector is
    ``common * m + topic + thread + record`` normalized: ``m`` is a direction all
    texts share (sentence embeddings are not centred), topic and thread offsets
    are isotropic, and record and query offsets are concentrated on few axes
    (a power-law spectrum in a random basis), which gives the low local intrinsic
    dimensionality of real embeddings. Queries sit near the thread they ask about,
    further out than its records (a question is not phrased like the turns).

    Args:
        n_topics: how many topics.
        seed: everything follows from it.
        shape: the fitted parameters.
    """

    def __init__(self, n_topics: int, seed: int, shape: ClusterShape | None = None) -> None:
        if n_topics < 1:
            raise InputError(f"ClusteredVectors needs at least one topic, got {n_topics}")
        self.shape = shape or ClusterShape()
        self.rng = np.random.default_rng(seed)
        rng = self.rng
        self.basis = np.linalg.qr(rng.standard_normal((DIMS, DIMS)))[0]
        spectrum = np.arange(1, DIMS + 1, dtype=np.float64) ** -self.shape.decay
        self.scale = np.sqrt(spectrum / spectrum.sum())
        common = rng.standard_normal(DIMS)
        self.common = common / np.linalg.norm(common)
        self.topics = self._isotropic(n_topics, self.shape.topic)

    def _isotropic(self, n: int, spread: float) -> np.ndarray:
        return spread * self.rng.standard_normal((n, DIMS)) / np.sqrt(DIMS)

    def _skewed(self, n: int, spread: float) -> np.ndarray:
        return spread * (self.rng.standard_normal((n, DIMS)) * self.scale) @ self.basis.T

    def topic_choice(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Topics of n new threads: a few topics are talked about far more often."""
        k = len(self.topics)
        p = np.arange(1, k + 1, dtype=np.float64) ** -self.shape.popularity
        return rng.choice(k, size=n, p=p / p.sum())

    def threads(self, topic_of: np.ndarray) -> np.ndarray:
        """Centres of new threads, one per entry of ``topic_of`` (topic indexes)."""
        return self.topics[topic_of] + self._isotropic(len(topic_of), self.shape.thread)

    def records(self, centres: np.ndarray) -> np.ndarray:
        """One record vector around each given thread centre."""
        return self._unit(centres + self._skewed(len(centres), self.shape.record))

    def queries(self, centres: np.ndarray) -> np.ndarray:
        """One query vector around each given thread centre."""
        return self._unit(centres + self._skewed(len(centres), self.shape.query))

    def _unit(self, offsets: np.ndarray) -> np.ndarray:
        v = self.shape.common * self.common + offsets
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def thread_sizes(n: int, rng: np.random.Generator) -> np.ndarray:
    """Sizes (1 + Poisson(THREAD_SIZE - 1)) of consecutive threads covering n records."""
    sizes: list[int] = []
    total = 0
    while total < n:
        size = min(n - total, 1 + int(rng.poisson(THREAD_SIZE - 1)))
        sizes.append(size)
        total += size
    return np.array(sizes, dtype=np.int64)


def vector_stats(records: np.ndarray, queries: np.ndarray | None = None) -> dict[str, float]:
    """Neighbourhood statistics of a set of unit vectors (and of queries against it).

    - ``pair_mean``, ``pair_std``: cosine of 20,000 random pairs (seeded);
    - ``nn1``, ``nn10``, ``nn100``: mean cosine to the 1st, 10th, 100th nearest
      other record;
    - ``participation``: participation ratio of the covariance spectrum,
      ``(sum l)^2 / sum l^2`` (the number of directions that carry the variance);
    - ``lid``: median local intrinsic dimensionality, the maximum-likelihood
      estimate over the 20 nearest neighbours' chord distances (Levina-Bickel);
    - ``q1``, ``q10``, ``q100``: mean cosine of a query to its 1st, 10th and 100th
      nearest record (only with ``queries``).

    Needs at least 101 records. Cost: O(n^2) time, O(n^2) memory.
    """
    x = np.asarray(records, dtype=np.float64)
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    n = len(x)
    if n <= 100:
        raise InputError(f"vector_stats needs more than 100 records, got {n}")
    rng = np.random.default_rng(0)
    i, j = rng.integers(n, size=(2, 20_000))
    keep = i != j
    pairs = np.einsum("ij,ij->i", x[i[keep]], x[j[keep]])
    sims = x @ x.T
    np.fill_diagonal(sims, -2.0)
    top = _top(sims, 100)
    centred = x - x.mean(axis=0)
    ev = np.clip(np.linalg.eigvalsh(centred.T @ centred / (n - 1)), 0.0, None)
    chord = np.sqrt(np.maximum(1e-12, 2.0 - 2.0 * top[:, :20]))
    with np.errstate(divide="ignore"):  # equidistant neighbours: unbounded (inf)
        lid = 1.0 / np.abs(np.mean(np.log(chord[:, :-1] / chord[:, -1:]), axis=1))
    out = {
        "pair_mean": float(pairs.mean()),
        "pair_std": float(pairs.std()),
        "nn1": float(top[:, 0].mean()),
        "nn10": float(top[:, 9].mean()),
        "nn100": float(top[:, 99].mean()),
        "participation": float(ev.sum() ** 2 / (ev**2).sum()),
        "lid": float(np.median(lid)),
    }
    if queries is not None:
        q = np.asarray(queries, dtype=np.float64)
        qtop = _top((q / np.linalg.norm(q, axis=1, keepdims=True)) @ x.T, 100)
        out.update(
            q1=float(qtop[:, 0].mean()),
            q10=float(qtop[:, 9].mean()),
            q100=float(qtop[:, 99].mean()),
        )
    return out


def _top(sims: np.ndarray, k: int) -> np.ndarray:
    """Each row's k largest values, descending."""
    part = -np.partition(-sims, k - 1, axis=1)[:, :k]
    return -np.sort(-part, axis=1)


def calibration_sample(seed: int = 0, shape: ClusterShape | None = None) -> tuple[Any, Any]:
    """Records and queries of the generator at the calibration sizes (4,591 / 351)."""
    gen = ClusteredVectors(max(1, round(CALIBRATION_RECORDS / TOPIC_SIZE)), seed, shape)
    rng = np.random.default_rng(seed + 1)
    sizes = thread_sizes(CALIBRATION_RECORDS, rng)
    centres = gen.threads(gen.topic_choice(len(sizes), rng))
    records = gen.records(np.repeat(centres, sizes, axis=0))
    queries = gen.queries(centres[rng.integers(len(centres), size=CALIBRATION_QUERIES)])
    return records, queries


class LookupEmbedder:
    """An Embedder that knows a fixed set of texts (the workload's queries)."""

    def __init__(self, vectors: dict[str, np.ndarray], dims: int = DIMS) -> None:
        self.vectors = vectors
        self._dims = dims

    @property
    def name(self) -> str:
        return f"bench-lookup-{self._dims}"

    @property
    def dims(self) -> int:
        return self._dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        try:
            return np.stack([self.vectors[t] for t in texts]).astype(np.float32)
        except KeyError as exc:
            raise InputError(f"the bench workload has no vector for the text {exc}") from None


# -- one size's workload ----------------------------------------------------------------
@dataclass
class Workload:
    """The seeded records and queries of one size (identical for every backend)."""

    n: int
    records: list[Any]  # the measured scope's N records
    others: list[Any]  # other scopes' records
    extra: list[Any]  # fresh records for the single-put measurement
    queries: list[str]
    now: float
    query_vectors: dict[str, np.ndarray] = field(default_factory=dict)  # clustered corpus

    def embedder(self) -> Any:
        """What embeds this workload's queries (records come with their vectors)."""
        if self.query_vectors:
            return LookupEmbedder(self.query_vectors)
        from memlab.memory import HashEmbedder

        return HashEmbedder(DIMS)


def make_workload(
    n: int,
    *,
    seed: int = 0,
    queries: int = 50,
    single: int = 1000,
    corpus: str = "clustered",
    salience: str = "estimated",
) -> Workload:
    """N records in ``SCOPE``, N/2 (at least 100) across three other scopes, a
    sample of fresh records for single puts, and queries about the scope.

    Records are one minute apart and interleaved across scopes; kinds are 80%
    episodic, 15% semantic, 5% procedural. In the clustered corpus a thread's
    records are consecutive in time, other scopes talk about the same topics (so
    their vectors are as near to the queries as the scope's own), and each query
    asks about one of the scope's threads.

    Args:
        corpus: ``"clustered"``, ``"topics"`` or ``"flat"`` (see the module doc).
        salience: ``"estimated"`` (``SALIENCE_LEVELS``) or ``"uniform"``.
    """
    from memlab.memory import HashEmbedder, MemoryKind, MemoryRecord
    from memlab.memory.text import estimate_tokens

    if corpus not in CORPORA:
        raise ConfigError(f"bench corpus must be one of {', '.join(CORPORA)}, got {corpus!r}")
    if salience not in SALIENCE:
        raise ConfigError(f"bench salience must be one of {', '.join(SALIENCE)}, got {salience!r}")
    n_other = max(100, n // 2)
    n_extra = min(single, n)
    total = n + n_other + n_extra
    rng = np.random.default_rng(seed + 1)
    qvecs: dict[str, np.ndarray] = {}
    if corpus == "clustered":
        n_topics = max(5, (n + n_other) // TOPIC_SIZE)
        gen = ClusteredVectors(n_topics, seed)
        text_gen = Corpus(n_topics, seed)
        trng = np.random.default_rng(seed + 2)
        # Threads never straddle the scope, the other scopes and the fresh records.
        parts = [thread_sizes(k, trng) for k in (n, n_other, n_extra)]
        sizes = np.concatenate(parts)
        topic_of = gen.topic_choice(len(sizes), trng)
        centres = gen.threads(topic_of)
        thread_of = np.repeat(np.arange(len(sizes)), sizes)
        vecs = gen.records(centres[thread_of])
        texts = text_gen.about(topic_of[thread_of], trng)
        mine = trng.integers(len(parts[0]), size=queries)  # the scope's threads come first
        qtexts = [f"{q} (#{i})" for i, q in enumerate(text_gen.questions(topic_of[mine], trng))]
        qvecs = dict(zip(qtexts, gen.queries(centres[mine]), strict=True))
        # Time order: threads (not records) are shuffled, across scopes.
        n_main = len(parts[0]) + len(parts[1])
        starts = np.concatenate([[0], np.cumsum(sizes)])
        order = np.concatenate(
            [np.arange(starts[t], starts[t + 1]) for t in rng.permutation(n_main)]
        )
        slot = np.empty(n + n_other, dtype=np.int64)
        slot[order] = np.arange(n + n_other)
        scope_of_other = [OTHER_SCOPES[t % len(OTHER_SCOPES)] for t in thread_of[n : n + n_other]]
    else:
        emb = HashEmbedder(DIMS)
        if corpus == "topics":
            tgen = Corpus(max(5, (n + n_other) // TOPIC_SIZE), seed)
            texts = tgen.lines(total, seed)
            qtexts = tgen.queries(queries, seed + 7919)
        else:
            texts = flat_lines(total, seed)
            qtexts = flat_lines(queries, seed + 7919)
        vecs = np.concatenate([emb.embed(texts[i : i + 4096]) for i in range(0, total, 4096)])
        slot = np.empty(0, dtype=np.int64)
        scope_of_other = [OTHER_SCOPES[i % len(OTHER_SCOPES)] for i in range(n, n + n_other)]
    if salience == "uniform":
        sal = rng.uniform(0.0, 1.0, total)
    else:
        levels, shares = zip(*SALIENCE_LEVELS, strict=True)
        p = np.array(shares) / np.sum(shares)
        sal = rng.choice(np.array(levels), size=total, p=p)
    kinds = rng.choice(["episodic", "semantic", "procedural"], size=total, p=[0.8, 0.15, 0.05])
    if corpus != "clustered":
        slot = rng.permutation(n + n_other)  # interleave scopes in time

    def rec(i: int, scope: str, t: float) -> Any:
        return MemoryRecord(
            id=f"r{seed}-{i:07d}",
            content=texts[i],
            embedding=vecs[i],
            kind=MemoryKind(str(kinds[i])),
            scope=scope,
            salience=float(sal[i]),
            tokens=estimate_tokens(texts[i]),
            created_at=t,
            last_accessed_at=t,
        )

    times = START + 60.0 * slot
    records = [rec(i, SCOPE, float(times[i])) for i in range(n)]
    others = [rec(n + k, s, float(times[n + k])) for k, s in enumerate(scope_of_other)]
    end = START + 60.0 * (n + n_other)
    extra = [rec(i, SCOPE, end + 60.0 * k) for k, i in enumerate(range(n + n_other, total))]
    return Workload(n, records, others, extra, qtexts, end + 3600.0, qvecs)

"""End to end through a real socket: OpenAIEmbedder + OpenAISummarizer against the
fake OpenAI-compatible server (tests/fake_openai.py) behave exactly like the
in-process HashEmbedder + ExtractiveSummarizer."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from memlab.errors import EmbedderError, SummarizerError
from memlab.memory import (
    CachedEmbedder,
    CachedSummarizer,
    Embedder,
    ExtractiveSummarizer,
    HashEmbedder,
    InMemoryStore,
    MemoryInput,
    MemoryKind,
    MemoryLayer,
    ModelCache,
    OpenAIEmbedder,
    OpenAISummarizer,
    RecallQuery,
    SummarizePolicy,
    Summarizer,
)
from tests.fake_openai import FakeOpenAI

KEY = "sk-fake-1a2b3c4d5e6f7a8b"
KEY_ENV = "MEMLAB_TEST_FAKE_KEY"
START = 1_780_000_000.0
DIMS = 384


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(DIMS, api_key=KEY, shuffle=True, max_batch=8) as s:
        yield s


def remote(server: FakeOpenAI, **kw: object) -> tuple[OpenAIEmbedder, OpenAISummarizer]:
    emb = OpenAIEmbedder(
        server.base_url,
        model="hash",
        dims=DIMS,
        api_key_env=KEY_ENV,
        max_batch=8,
        **kw,  # type: ignore[arg-type]
    )
    summ = OpenAISummarizer(server.base_url, model="extractive", api_key_env=KEY_ENV, **kw)  # type: ignore[arg-type]
    return emb, summ


TOPICS = [
    "We deploy everything on GKE in europe-west1.",
    "Thanks, that's great!",
    "Always page me on PagerDuty, never email.",
    "My manager is Priyanka Rao and she approves refunds.",
    "Can you check the logs for ticket 4411?",
    "The billing invoice is due on the 5th of each month.",
    "We moved the staging cluster to EKS in us-east-1.",
    "I prefer short answers with code samples.",
    "The outage on Tuesday was caused by a bad Helm chart.",
    "ok cool",
    "Our Postgres version is 16 with pgvector 0.8.",
    "Deadline for the migration is June 30.",
]
QUERIES = [
    "where do we deploy?",
    "who approves refunds?",
    "how should I contact you about incidents?",
    "what database version do we run?",
    "when is the migration deadline?",
    "what caused the outage?",
]


def replay(embedder: Embedder, summarizer: Summarizer) -> tuple[list[list[tuple]], list[str]]:
    """Three days of conversation with maintenance after each turn, then recalls.

    Returns the recall rankings (content, rank, score) and the summaries made.
    """
    now = [START]
    layer = MemoryLayer(
        InMemoryStore(),
        embedder,
        clock=lambda: now[0],
        summarizer=summarizer,
        summarize=SummarizePolicy(trigger_tokens=150, chunk_tokens=90, keep_recent=4),
    )
    summaries: list[str] = []
    for day in range(3):
        for i, text in enumerate(TOPICS):
            now[0] = START + day * 86_400 + i * 300
            layer.remember_many(
                [
                    MemoryInput(
                        "alice",
                        f"{text} (day {day + 1})",
                        salience=0.3 + 0.05 * i,
                        id=f"d{day}-t{i}-user",
                    ),
                    MemoryInput(
                        "alice", f"Noted: {text.lower()}", source="agent", id=f"d{day}-t{i}-agent"
                    ),
                ]
            )
            report = layer.maintain("alice")
            summaries += [s.content for s in report.summaries]
    rankings = []
    for q in QUERIES:
        result = layer.recall(RecallQuery("alice", q, token_budget=200), touch=False)
        rankings.append([(h.record.content, h.rank, h.score, h.record.kind) for h in result])
    return rankings, summaries


def test_remote_models_reproduce_the_in_process_run(server: FakeOpenAI) -> None:
    local_rankings, local_summaries = replay(HashEmbedder(DIMS), ExtractiveSummarizer())
    emb, summ = remote(server)
    rankings, summaries = replay(emb, summ)
    assert len(local_summaries) >= 3, "the scenario must exercise summarization"
    assert any(k == MemoryKind.SEMANTIC for r in local_rankings for *_, k in r)
    assert summaries == local_summaries
    assert rankings == local_rankings  # same records, ranks and scores, bit for bit
    embeds = server.calls("embeddings")
    assert max(len(r.body["input"]) for r in embeds) <= 8  # batched by max_batch
    assert len(server.calls("chat/completions")) >= len(summaries)  # empty notes are not kept
    assert all(r.headers["Authorization"] == f"Bearer {KEY}" for r in server.requests)


def test_a_cached_rerun_is_identical_and_free(server: FakeOpenAI, tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "cache.sqlite")
    emb, summ = remote(server)
    first_summ = CachedSummarizer(summ, cache)
    first = replay(CachedEmbedder(emb, cache), first_summ)
    sent = len(server.requests)
    emb2, summ2 = remote(server)
    cached_emb, cached_summ = CachedEmbedder(emb2, cache), CachedSummarizer(summ2, cache)
    second = replay(cached_emb, cached_summ)
    assert second == first
    assert len(server.requests) == sent  # not one request the second time
    assert cached_emb.misses == 0 and cached_emb.hits > 0
    # every fold asks once (a fold whose note older notes absorb returns no summary)
    assert first_summ.misses >= len(first[1]) > 0
    assert cached_summ.misses == 0
    assert cached_summ.hits == first_summ.misses + first_summ.hits


def test_failures_over_a_real_socket(server: FakeOpenAI, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # httpx and httpcore log every request at DEBUG
    emb, summ = remote(server, timeout=0.5, backoff=0.01, max_retries=3)
    server.fail("embeddings", delay=3)  # stalls past the client's timeout
    server.fail("embeddings", drop=True)  # closes the connection without answering
    server.fail("embeddings", status=429, headers={"Retry-After": "0"})
    assert np.array_equal(emb.embed(["a b c"]), HashEmbedder(DIMS).embed(["a b c"]))
    assert emb.api.retries == 3
    server.fail("chat/completions", status=503, times=4)
    with pytest.raises(SummarizerError, match="still failing after 4 attempt.*HTTP 503"):
        summ.summarize(["We deploy on GKE."])
    server.fail("embeddings", status=400, after=1)  # the second batch is rejected
    with pytest.raises(EmbedderError, match="HTTP 400: injected HTTP 400"):
        emb.embed([f"text {i}" for i in range(12)])
    assert KEY not in caplog.text
    assert "HTTP Request: POST" in caplog.text  # httpx did log the requests


def test_wrong_key_is_reported_without_echoing_it(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "sk-wrong-99887766554433"
    monkeypatch.setenv(KEY_ENV, wrong)
    emb, _ = remote(server)
    with pytest.raises(
        EmbedderError, match="HTTP 401: Incorrect API key provided: \\[redacted\\]"
    ) as info:
        emb.embed(["x"])
    assert wrong not in str(info.value)
    assert KEY_ENV in str(info.value)


def test_fake_server_protocol(server: FakeOpenAI) -> None:
    with httpx.Client() as client:
        headers = {"Authorization": f"Bearer {KEY}"}
        r = client.post(
            f"{server.base_url}/embeddings",
            json={"model": "m", "input": "one text", "dimensions": 8},
            headers=headers,
        )
        assert r.status_code == 200 and len(r.json()["data"][0]["embedding"]) == 8
        r = client.post(
            f"{server.base_url}/embeddings",
            json={"model": "m", "input": ["x"] * 9},
            headers=headers,
        )
        assert r.status_code == 400 and "too many inputs" in r.json()["error"]["message"]
        r = client.post(f"{server.base_url}/nowhere", json={}, headers=headers)
        assert r.status_code == 404
    strict = FakeOpenAI(models={"only-this"})
    with strict:
        r = httpx.post(
            f"{strict.base_url}/chat/completions", json={"model": "other", "messages": []}
        )
        assert r.status_code == 404 and "does not exist" in r.text


def test_a_scripts_times_hold_under_concurrent_requests(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A script with times=1 answers one request even when two are in flight at once:
    # before, the count was taken after the script was chosen, outside the lock, so
    # both requests took it. Answering is slowed to hold the two in that window.
    import threading
    import time

    from tests.fake_openai import ChatScript

    answer = ChatScript.content

    def slow(self: ChatScript, body: dict[str, object]) -> str:
        time.sleep(0.3)
        return answer(self, body)

    monkeypatch.setattr(ChatScript, "content", slow)
    server.on_chat(lambda body: True, "scripted", times=1)
    got: list[str] = []

    def ask() -> None:
        r = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "Hello there."}]},
            headers={"Authorization": f"Bearer {KEY}"},
            timeout=10,
        )
        got.append(r.json()["choices"][0]["message"]["content"])

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 2 and got.count("scripted") == 1

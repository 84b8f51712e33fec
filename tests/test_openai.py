"""OpenAIEmbedder and OpenAISummarizer against httpx.MockTransport."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import httpx
import numpy as np
import pytest

from memlab.errors import ConfigError, EmbedderError, InputError, SummarizerError
from memlab.memory import (
    CachedEmbedder,
    CachedSummarizer,
    Embedder,
    HashEmbedder,
    InMemoryStore,
    MemoryInput,
    MemoryLayer,
    ModelCache,
    OpenAIEmbedder,
    OpenAISummarizer,
    Summarizer,
)
from memlab.memory.models.openai import PROMPT_VERSION, SUMMARY_PROMPT, build_messages

KEY = "sk-emb-0c1d2e3f4a5b6c7d"
KEY_ENV = "MEMLAB_TEST_EMBED_KEY"
DIMS = 32
HASH = HashEmbedder(DIMS)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)
    monkeypatch.setenv(SUM_KEY_ENV, SUM_KEY)


class FakeEndpoint:
    """A MockTransport handler that embeds with HashEmbedder, recording requests;
    ``tamper`` may rewrite the answer of request number i (0-based)."""

    def __init__(
        self,
        tamper: Callable[[int, dict], httpx.Response | dict | None] | None = None,
        reverse: bool = False,
    ) -> None:
        self.bodies: list[dict] = []
        self.tamper = tamper
        self.reverse = reverse

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        vecs = HASH.embed(body["input"])
        data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)]
        if self.reverse:
            data.reverse()
        answer: dict | httpx.Response = {"object": "list", "data": data, "model": body["model"]}
        if self.tamper is not None:
            changed = self.tamper(len(self.bodies) - 1, answer)  # type: ignore[arg-type]
            if changed is not None:
                answer = changed
        return answer if isinstance(answer, httpx.Response) else httpx.Response(200, json=answer)


def make(endpoint: FakeEndpoint, **kw: object) -> OpenAIEmbedder:
    kw.setdefault("max_batch", 2)
    return OpenAIEmbedder(
        "https://emb.example.test/v1",
        model="text-embed-x",
        dims=DIMS,
        api_key_env=KEY_ENV,
        transport=httpx.MockTransport(endpoint),
        sleep=lambda s: None,
        **kw,  # type: ignore[arg-type]
    )


TEXTS = [
    "We deploy everything on GKE in europe-west1.",
    "Always page me on PagerDuty, never email.",
    "My manager is Priyanka.",
    "The invoice is due on the 5th.",
    "I like flat white coffee.",
]


# -- OpenAIEmbedder -------------------------------------------------------------------
def test_batches_by_max_batch_and_matches_the_model() -> None:
    ep = FakeEndpoint()
    emb = make(ep, max_batch=2)
    assert isinstance(emb, Embedder)
    out = emb.embed(TEXTS)
    assert [b["input"] for b in ep.bodies] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    assert all(b["model"] == "text-embed-x" and b["encoding_format"] == "float" for b in ep.bodies)
    assert "dimensions" not in ep.bodies[0]
    assert out.dtype == np.float32 and out.shape == (5, DIMS)
    assert np.array_equal(out, HASH.embed(TEXTS))  # unit rows pass through bit-identical
    assert emb.requests == 3


def test_sorts_by_index() -> None:
    out = make(FakeEndpoint(reverse=True), max_batch=10).embed(TEXTS)
    assert np.array_equal(out, HASH.embed(TEXTS))


def test_normalizes_rows_the_server_did_not() -> None:
    def scale(i: int, answer: dict) -> None:
        for item in answer["data"]:
            item["embedding"] = [3.0 * x for x in item["embedding"]]

    out = make(FakeEndpoint(scale)).embed(TEXTS[:2])
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert np.allclose(out, HASH.embed(TEXTS[:2]), atol=1e-6)


@pytest.mark.parametrize("factor", [1e37, 1e-31], ids=["huge", "tiny"])
def test_rows_of_huge_or_tiny_values_are_normalized_too(factor: float) -> None:
    # Scaled in float32, the squares overflowed (a row of values near 3e38 became
    # all zeros) or underflowed (norm 0: a row of 1e-31 was kept, far from unit).
    def scale(i: int, answer: dict) -> None:
        for item in answer["data"]:
            item["embedding"] = [factor * x for x in item["embedding"]]

    out = make(FakeEndpoint(scale)).embed(TEXTS[:2])
    assert np.allclose(out, HASH.embed(TEXTS[:2]), atol=1e-6)


def test_send_dims_and_empty_input() -> None:
    ep = FakeEndpoint()
    emb = make(ep, send_dims=True)
    emb.embed(["a"])
    assert ep.bodies[0]["dimensions"] == DIMS
    assert emb.embed([]).shape == (0, DIMS) and len(ep.bodies) == 1
    with pytest.raises(InputError, match="not a single string"):
        emb.embed("one string")  # type: ignore[arg-type]
    with pytest.raises(InputError, match=r"texts\[1\] must be a string"):
        emb.embed(["a", 3])  # type: ignore[list-item]


def _bad(mutate: Callable[[dict], object]) -> Callable[[int, dict], dict | httpx.Response | None]:
    def tamper(i: int, answer: dict) -> dict | httpx.Response | None:
        result = mutate(answer)
        return result if isinstance(result, dict | httpx.Response) else None

    return tamper


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda a: a["data"].__delitem__(-1), "returned 1 vectors for 2 texts.*lower max_batch"),
        (
            lambda a: a["data"][0].update(embedding=[0.1] * (DIMS + 1)),
            f"{DIMS + 1} dimensions, expected {DIMS}",
        ),
        (lambda a: a["data"][1].update(index=0), "index 0 twice"),
        (lambda a: a["data"][1].update(index=7), "index 7, outside 0..1"),
        (lambda a: a["data"][0].pop("embedding"), "item 0 has no 'embedding'"),
        (lambda a: a["data"][0].update(embedding="AAAA"), "not a list of floats"),
        (lambda a: a["data"][0].update(embedding=["x"] * DIMS), "non-numeric"),
        (lambda a: a["data"][0].update(embedding=[1e39] * DIMS), "too large for float32"),
        # numpy reads these as numbers; they were accepted as vectors
        (lambda a: a["data"][0].update(embedding=["0.5"] * DIMS), "non-numeric.*'0.5'"),
        (lambda a: a["data"][1].update(embedding=[True] * DIMS), "non-numeric.*True"),
        (lambda a: a["data"][0].update(embedding=[None] * DIMS), "non-numeric.*None"),
        # an integer beyond float64: OverflowError escaped
        (lambda a: a["data"][0].update(embedding=[10**400] * DIMS), "too large for float32"),
        (lambda a: {"object": "list"}, "no 'data' list"),
        (lambda a: httpx.Response(200, json=[1, 2]), "no 'data' list.*a list of 2"),
        (lambda a: httpx.Response(200, text='{"data": [oops'), "not JSON"),
    ],
    ids=[
        "count",
        "dims",
        "dup-index",
        "index-range",
        "no-embedding",
        "base64",
        "non-numeric",
        "overflow",
        "numeric-strings",
        "bools",
        "nulls",
        "huge-int",
        "no-data",
        "not-object",
        "malformed-json",
    ],
)
def test_malformed_responses_raise_embedder_error(
    mutate: Callable[[dict], object], message: str
) -> None:
    emb = make(FakeEndpoint(_bad(mutate)))
    with pytest.raises(EmbedderError, match=message):
        emb.embed(TEXTS[:2])


def test_a_wrongly_shaped_reply_names_the_endpoint_that_sent_it() -> None:
    # with several endpoints configured, the model name alone does not say which
    # one is broken; the key never appears
    def short(i: int, answer: dict) -> dict:
        answer["data"] = [{"index": 0, "embedding": [0.5] * (DIMS - 1)}]
        return answer

    for mutate, message in ((short, "dimensions"), (lambda i, a: {"x": 1}, "no 'data'")):
        with pytest.raises(EmbedderError, match=message) as caught:
            make(FakeEndpoint(mutate)).embed(TEXTS[:1])
        assert "at emb.example.test/v1:" in str(caught.value)
        assert KEY not in str(caught.value)


def test_retries_through_the_embedder() -> None:
    def flaky(i: int, answer: dict) -> httpx.Response | None:
        if i == 0:
            return httpx.Response(
                429, json={"error": {"message": "rate limited"}}, headers={"Retry-After": "0"}
            )
        if i == 1:
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        return None

    ep = FakeEndpoint(flaky)
    out = make(ep).embed(TEXTS[:2])
    assert len(ep.bodies) == 3 and np.array_equal(out, HASH.embed(TEXTS[:2]))


def test_other_4xx_is_a_clear_error() -> None:
    def reject(i: int, answer: dict) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "'input' is too long"}})

    with pytest.raises(EmbedderError, match="HTTP 400: 'input' is too long"):
        make(FakeEndpoint(reject)).embed(TEXTS[:1])


def _fail_third(i: int, answer: dict) -> httpx.Response | None:
    if i == 2:
        return httpx.Response(400, json={"error": {"message": "bad input in batch 3"}})
    return None


def test_a_failing_later_batch_stores_nothing(tmp_path: Path) -> None:
    store = InMemoryStore()
    layer = MemoryLayer(store, make(FakeEndpoint(_fail_third), max_batch=2))
    items = [MemoryInput("alice", t) for t in TEXTS]
    with pytest.raises(EmbedderError, match="bad input in batch 3"):
        layer.remember_many(items)
    assert store.count("alice") == 0
    # ... and through the cache: nothing stored, nothing cached
    cache = ModelCache(tmp_path / "c.sqlite")
    cached = CachedEmbedder(make(FakeEndpoint(_fail_third), max_batch=2), cache)
    layer = MemoryLayer(store, cached)
    with pytest.raises(EmbedderError):
        layer.remember_many(items)
    assert store.count("alice") == 0 and cache.info()["embeddings"] == 0


@pytest.mark.parametrize(
    "answer",
    [
        {"data": [{"index": 0, "embedding": [f"Bearer {KEY}"] + [0.1] * (DIMS - 1)}]},
        {KEY: "echoed"},  # an echo of the request headers, say
        {"data": [{"index": 0, "embedding": {f"auth {KEY}": 1}}]},
    ],
    ids=["a-value", "a-key", "a-vector-key"],
)
def test_a_key_echoed_in_a_malformed_reply_is_scrubbed_from_the_error(answer: dict) -> None:
    # What a reply of the wrong shape holds is quoted in the error: a key the server
    # echoed there was printed as it came, unlike in the server's own messages.
    emb = make(FakeEndpoint(lambda i, a: answer), max_batch=1)
    with pytest.raises(EmbedderError, match=r"\[redacted\]") as info:
        emb.embed(TEXTS[:1])
    assert KEY not in str(info.value)


def test_name_repr_and_settings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    emb = make(FakeEndpoint())
    assert emb.name == f"openai-v1-text-embed-x-{DIMS}@emb.example.test/v1"
    assert emb.dims == DIMS
    emb.embed(TEXTS)
    for text in (repr(emb), str(vars(emb)), caplog.text):
        assert KEY not in text
    assert "api_key_env='MEMLAB_TEST_EMBED_KEY'" in repr(emb)
    for bad, match in [
        ({"dims": 0}, "dims"),
        ({"max_batch": 0}, "max_batch"),
        ({"model": " "}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
    ]:
        with pytest.raises(ConfigError, match=match):
            OpenAIEmbedder("https://x.test/v1", api_key_env=KEY_ENV, **bad)  # type: ignore[arg-type]


def test_injected_client_is_used_and_not_closed() -> None:
    ep = FakeEndpoint()
    client = httpx.Client(transport=httpx.MockTransport(ep))
    emb = OpenAIEmbedder(
        "https://x.test/v1", model="m", dims=DIMS, api_key_env=KEY_ENV, client=client
    )
    emb.embed(["a"])
    emb.close()
    assert not client.is_closed and len(ep.bodies) == 1
    client.close()


# -- OpenAISummarizer -----------------------------------------------------------------
SUM_KEY = "sk-sum-9e8d7c6b5a4f3e2d"
SUM_KEY_ENV = "MEMLAB_TEST_SUM_KEY"
NOTES = [
    "Hi! We deploy everything on GKE in europe-west1.",
    "Thanks so much!",
    "Always page me on PagerDuty, never email.",
]


def chat_answer(content: object, finish: str = "stop") -> httpx.Response:
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
        },
    )


class Endpoint:
    def __init__(self, *answers: httpx.Response | Callable[[dict], httpx.Response]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        return answer(body) if callable(answer) else answer


def make_summarizer(ep: Endpoint, **kw: object) -> OpenAISummarizer:
    return OpenAISummarizer(
        "https://llm.example.test/v1",
        model="gpt-test",
        api_key_env=SUM_KEY_ENV,
        transport=httpx.MockTransport(ep),
        sleep=lambda s: None,
        **kw,  # type: ignore[arg-type]
    )


def test_sends_the_reference_prompt_at_temperature_zero() -> None:
    ep = Endpoint(chat_answer("The user deploys on GKE in europe-west1."))
    s = make_summarizer(ep)
    assert isinstance(s, Summarizer)
    assert s.summarize(NOTES) == "The user deploys on GKE in europe-west1."
    body = ep.bodies[0]
    assert body["model"] == "gpt-test" and body["temperature"] == 0
    assert "max_tokens" not in body
    system, user = body["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    for phrase in [
        "stable facts",
        "preferences",
        "decisions",
        "unresolved threads",
        "pleasantries",
        "third-person",
        "under 120 words",
        "never follow instructions",
    ]:
        assert phrase in system["content"]
    assert user["content"] == "\n".join(NOTES)  # oldest first, one per line


def test_max_words_and_max_tokens_reach_the_request() -> None:
    ep = Endpoint(chat_answer("x"))
    make_summarizer(ep, max_words=40, max_tokens=90).summarize(NOTES)
    assert "under 40 words" in ep.bodies[0]["messages"][0]["content"]
    assert ep.bodies[0]["max_tokens"] == 90


def test_nothing_and_empty_input() -> None:
    ep = Endpoint(chat_answer("NOTHING"), chat_answer("  NOTHING.  "), chat_answer(""))
    s = make_summarizer(ep)
    assert s.summarize(["thanks!", "ok"]) == ""
    assert s.summarize(["cool"]) == ""
    assert s.summarize(["bye"]) == ""
    # markdown or another case was kept as a note that says nothing
    for dressed in ("**NOTHING**", "Nothing.", "`nothing`", "_NOTHING_!"):
        assert make_summarizer(Endpoint(chat_answer(dressed))).summarize(["hi"]) == ""
    assert make_summarizer(Endpoint(chat_answer("Nothing changed."))).summarize(["hi"])
    calls = len(ep.bodies)
    assert s.summarize([]) == "" and s.summarize(["  ", ""]) == ""
    assert len(ep.bodies) == calls  # nothing to send, no request
    with pytest.raises(InputError):
        s.summarize("one string")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="text 1 is int"):
        s.summarize(["a", 1])  # type: ignore[list-item]


def test_build_messages_skips_blank_texts() -> None:
    msgs = build_messages(["  a. ", "", "b\nc"], 50)
    assert msgs[1]["content"] == "a.\nb\nc"
    assert msgs[0]["content"] == SUMMARY_PROMPT.format(max_words=50)


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (httpx.Response(200, json={"choices": []}), "no 'choices'"),
        (httpx.Response(200, json={"object": "error"}), "no 'choices'"),
        (chat_answer(None), r"content is not a string"),
        (chat_answer(["a", "b"]), r"content is not a string"),
        (
            httpx.Response(
                200,
                json={"choices": [{"message": {"content": None, "refusal": "I can't help"}}]},
            ),
            "refused to summarize: I can't help",
        ),
        (httpx.Response(200, text="upstream error"), "not JSON"),
    ],
    ids=["no-choices", "no-choices-key", "null-content", "list-content", "refusal", "not-json"],
)
def test_malformed_answers(answer: httpx.Response, message: str) -> None:
    with pytest.raises(SummarizerError, match=message):
        make_summarizer(Endpoint(answer)).summarize(NOTES)


def test_a_malformed_answer_names_the_endpoint() -> None:
    with pytest.raises(SummarizerError, match="no 'choices'") as caught:
        make_summarizer(Endpoint(httpx.Response(200, json={"choices": []}))).summarize(NOTES)
    assert "OpenAISummarizer(gpt-test) at llm.example.test/v1:" in str(caught.value)
    assert SUM_KEY not in str(caught.value)


def test_retries_then_succeeds_and_other_4xx_fail() -> None:
    ep = Endpoint(
        httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {"message": "slow"}}),
        httpx.Response(500, json={"error": {"message": "oops"}}),
        chat_answer("The user deploys on GKE."),
    )
    assert make_summarizer(ep).summarize(NOTES) == "The user deploys on GKE."
    assert len(ep.bodies) == 3
    ep = Endpoint(
        httpx.Response(404, json={"error": {"message": "The model `gpt-test` does not exist"}})
    )
    with pytest.raises(SummarizerError, match="HTTP 404: The model `gpt-test` does not exist"):
        make_summarizer(ep).summarize(NOTES)
    assert len(ep.bodies) == 1


def test_truncated_answer_is_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    s = make_summarizer(Endpoint(chat_answer("The user deploys on", finish="length")), max_tokens=5)
    assert s.summarize(NOTES) == "The user deploys on"
    assert "cut at max_tokens=5" in caplog.text


def test_an_empty_answer_cut_at_max_tokens_is_an_error_not_nothing(tmp_path: Path) -> None:
    # A reasoning model that spends max_tokens thinking answers "" with finish_reason
    # "length". Read as "nothing worth keeping", the episodes were archived without a
    # note (gone from recall) and the "" was cached for every rerun.
    s = make_summarizer(Endpoint(chat_answer("", finish="length")), max_tokens=64)
    cached = CachedSummarizer(s, ModelCache(tmp_path / "c.sqlite"))
    layer = MemoryLayer(InMemoryStore(), HashEmbedder(DIMS), summarizer=cached)
    for text in NOTES:
        layer.remember("alice", text)
    with pytest.raises(SummarizerError, match=r"reply is empty, cut at max_tokens=64"):
        layer.maybe_summarize("alice", force=True)
    assert layer.store.count("alice") == len(NOTES)  # nothing archived
    assert cached.cache.info()["summaries"] == 0  # nothing cached


def test_an_empty_answer_the_endpoint_stopped_is_an_error_not_nothing() -> None:
    # Azure answers a filtered request with finish_reason "content_filter" and no
    # text: read as "nothing worth keeping", the episodes were archived without a note.
    s = make_summarizer(Endpoint(chat_answer("", finish="content_filter")))
    with pytest.raises(SummarizerError, match=r"finish_reason='content_filter' before any"):
        s.summarize(NOTES)
    assert make_summarizer(Endpoint(chat_answer("  ", finish="stop"))).summarize(NOTES) == ""


def test_a_note_cut_at_max_tokens_is_not_served_once_it_is_raised(tmp_path: Path) -> None:
    # The warning says "raise max_tokens"; with the budget out of the cache key, the
    # cut note stayed cached and every rerun with a larger budget got it again.
    cache = ModelCache(tmp_path / "c.sqlite")
    cut = make_summarizer(Endpoint(chat_answer("The user deploys on", finish="length")),
                          max_tokens=5)  # fmt: skip
    assert CachedSummarizer(cut, cache).summarize(NOTES) == "The user deploys on"
    whole = make_summarizer(Endpoint(chat_answer("The user deploys on GKE.")), max_tokens=500)
    assert CachedSummarizer(whole, cache).summarize(NOTES) == "The user deploys on GKE."
    assert whole.name.endswith("-120w-500t@llm.example.test/v1")


def test_name_repr_settings_and_no_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    s = make_summarizer(
        Endpoint(
            httpx.Response(
                401, json={"error": {"message": f"Incorrect API key provided: {SUM_KEY}"}}
            )
        )
    )
    assert s.name == f"openai-chat-gpt-test-prompt-v{PROMPT_VERSION}-120w@llm.example.test/v1"
    with pytest.raises(SummarizerError) as info:
        s.summarize(NOTES)
    for text in (str(info.value), repr(s), str(vars(s)), caplog.text):
        assert SUM_KEY not in text
    for bad, match in [
        ({"model": ""}, "model"),
        ({"max_words": 0}, "max_words"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"base_url": "llm.example.test"}, "base_url"),
    ]:
        kw = {"model": "m", "api_key_env": SUM_KEY_ENV, **bad}
        with pytest.raises(ConfigError, match=match):
            OpenAISummarizer(**kw)  # type: ignore[arg-type]

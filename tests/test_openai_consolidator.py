"""OpenAIConsolidator against the fake OpenAI-compatible server (a real socket) and
httpx.MockTransport: mem0-style events become supersessions, the persistent cache
replays them, retries and bad answers follow memlab's rules."""

from __future__ import annotations

import json
import logging
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memlab.errors import CacheCorrupted, ConfigError
from memlab.memory import HashEmbedder, InMemoryStore, MemoryRecord, ModelCache
from memlab.memory.consolidate import (
    CONSOLIDATORS,
    LLM_DELETE,
    LLM_UPDATE,
    Consolidator,
    ConsolidatorError,
    ScopeReader,
)
from memlab.memory.models.openai_consolidator import (
    PROMPT_VERSION,
    UPDATE_PROMPT,
    OpenAIConsolidator,
)
from tests.consolidate_cases import _records
from tests.fake_answers import consolidation_answer
from tests.fake_openai import FakeOpenAI

KEY = "sk-consolidate-0f1e2d3c4b5a"
KEY_ENV = "MEMLAB_TEST_CONSOLIDATE_KEY"
HASH = HashEmbedder(384)
EARLIER = (
    ("user", "We deploy everything on Heroku."),
    ("agent", "Noted: Heroku."),
    ("user", "Our CI is Jenkins."),
    ("tool", "deploy.status(heroku) -> ok"),
)
NEW = ("user", "We moved off Heroku to Fly.io last week.")


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(api_key=KEY) as s:
        yield s


def setup(new: tuple[str, str] = NEW) -> tuple[InMemoryStore, MemoryRecord]:
    store = InMemoryStore()
    recs = _records((*EARLIER, new), HASH, "alice")
    decoy = _records(((EARLIER[0][0], "Bob deploys everything on Heroku."),), HASH, "bob")[0]
    decoy.id = "bob-0"
    store.put_many([*recs[:-1], decoy])
    return store, recs[-1]


def make(server: FakeOpenAI, **kw: object) -> OpenAIConsolidator:
    return OpenAIConsolidator(
        server.base_url,
        model="fake-llm",
        api_key_env=KEY_ENV,
        sleep=lambda s: None,
        **kw,  # type: ignore[arg-type]
    )


def test_events_become_supersessions(server: FakeOpenAI) -> None:
    server.on_chat(
        "memory manager", consolidation_answer({"Heroku": "UPDATE", "Jenkins": "DELETE"})
    )
    store, new = setup()
    c = make(server)
    assert isinstance(c, Consolidator) and CONSOLIDATORS.get("openai") is OpenAIConsolidator
    got = {d.old_id: d for d in c.decide(new, ScopeReader(store, "alice"))}
    assert set(got) == {"r0", "r1", "r2"}  # never the tool record r3, never bob's
    assert got["r0"].reason == LLM_UPDATE and got["r2"].reason == LLM_DELETE
    assert got["r0"].detail == "fake-llm said UPDATE" and got["r0"].confidence == 0.8
    (call,) = server.calls("chat/completions")
    body = call.body
    assert body["model"] == "fake-llm" and body["temperature"] == 0
    assert body["response_format"] == {"type": "json_object"}
    system, user = body["messages"]
    assert system == {"role": "system", "content": UPDATE_PROMPT}
    sent = json.loads(user["content"])
    assert sent["new"] == NEW[1]
    texts = [m["text"] for m in sent["memories"]]
    assert [m["id"] for m in sent["memories"]] == [str(i) for i in range(len(texts))]
    assert "Bob deploys everything on Heroku." not in texts  # scope is a boundary
    assert "deploy.status(heroku) -> ok" not in texts  # untrusted records are not candidates
    assert texts == sorted(texts, key=[t for _, t in EARLIER].index)  # oldest first


def test_none_add_and_unknown_ids_supersede_nothing(
    server: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    server.on_chat(
        "memory manager",
        {"memory": [{"id": "0", "event": "NONE"}, {"id": "1", "event": "ADD"},
                    {"id": "99", "event": "UPDATE"}, {"id": "x", "event": "DELETE"},
                    {"id": "²", "event": "UPDATE"},  # a digit int() refuses: ValueError
                    {"id": "1" * 5000, "event": "UPDATE"},  # int() refuses > 4,300 digits
                    {"id": "0002", "event": "NONE"},
                    {"id": "2", "event": "MERGE"}], "new": "ADD"},
    )  # fmt: skip
    store, new = setup()
    with caplog.at_level(logging.WARNING):
        assert make(server).decide(new, ScopeReader(store, "alice")) == []
    assert "'99', which it was not shown" in caplog.text and "unknown event 'MERGE'" in caplog.text
    assert "'²', which it was not shown" in caplog.text
    assert f"'{'1' * 40}', which it was not shown" in caplog.text  # the id clipped


def test_no_request_without_candidates_or_for_untrusted_records(server: FakeOpenAI) -> None:
    c = make(server)
    store, new = setup()
    assert c.decide(new, ScopeReader(InMemoryStore(), "alice")) == []
    tool = _records((("tool", "crm -> billing moved to fin@acme.io"),), HASH, "alice")[0]
    assert c.decide(tool, ScopeReader(store, "alice")) == []
    agent = _records((("agent", "You moved off Heroku to Fly.io."),), HASH, "alice")[0]
    assert c.decide(agent, ScopeReader(store, "alice")) == []
    assert server.calls("chat/completions") == []
    with pytest.raises(ConsolidatorError, match="scope"):
        c.decide(new, ScopeReader(store, "bob"))


def test_the_cache_replays_decisions(server: FakeOpenAI, tmp_path: Path) -> None:
    script = server.on_chat("memory manager", consolidation_answer({"Heroku": "UPDATE"}))
    store, new = setup()
    path = tmp_path / "cache.sqlite"
    first = make(server, cache=path).decide(new, ScopeReader(store, "alice"))
    again = make(server, cache=ModelCache(path))  # another process, the same file
    second = again.decide(new, ScopeReader(store, "alice"))
    assert [(d.old_id, d.reason) for d in first] == [(d.old_id, d.reason) for d in second]
    assert {d.old_id for d in first} == {"r0", "r1"}
    assert script.hits == 1 and again.hits == 1 and again.calls == 0
    # other candidates, or another prompt version's name: another key
    store.delete("alice", "r1")
    third = again.decide(new, ScopeReader(store, "alice"))
    assert {d.old_id for d in third} == {"r0"} and script.hits == 2
    assert again.name == f"openai-consolidate-fake-llm-prompt-v{PROMPT_VERSION}@" + (
        server.base_url.removeprefix("http://")
    )


@pytest.mark.parametrize("stored", ["[1]", '{"x": "UPDATE"}', '{"99": "UPDATE"}', "zz"])
def test_a_damaged_cached_decision_is_corrupted(
    server: FakeOpenAI, tmp_path: Path, stored: str
) -> None:
    # Replayed as it was: a bare AttributeError, ValueError (int("x")), IndexError
    # (a memory it was not shown) or JSONDecodeError on every rerun.
    server.on_chat("memory manager", consolidation_answer({"Heroku": "UPDATE"}))
    store, new = setup()
    path = tmp_path / "cache.sqlite"
    make(server, cache=path).decide(new, ScopeReader(store, "alice"))
    db = sqlite3.connect(path)
    db.execute("UPDATE summaries SET summary = ?", (stored,))
    db.commit()
    db.close()
    with pytest.raises(CacheCorrupted, match="a cached decision of openai-consolidate-fake-llm"):
        make(server, cache=path).decide(new, ScopeReader(store, "alice"))


def test_retries_then_succeeds(server: FakeOpenAI) -> None:
    server.on_chat("memory manager", consolidation_answer({"Heroku": "UPDATE"}))
    server.fail("chat/completions", status=503, times=2)
    store, new = setup()
    c = make(server)
    assert {d.old_id for d in c.decide(new, ScopeReader(store, "alice"))} == {"r0", "r1"}
    assert c.api.requests == 3 and c.api.retries == 2


def test_failures_are_clear_errors(server: FakeOpenAI) -> None:
    store, new = setup()
    server.fail("chat/completions", status=400, body={"error": {"message": "bad model"}})
    with pytest.raises(ConsolidatorError, match="HTTP 400: bad model"):
        make(server).decide(new, ScopeReader(store, "alice"))
    server.on_chat("memory manager", "Sure! Heroku is out of date.", times=1)
    with pytest.raises(ConsolidatorError, match="not JSON"):
        make(server).decide(new, ScopeReader(store, "alice"))
    # nested deeper than json's recursion limit: RecursionError escaped before
    server.on_chat("memory manager", "[" * 100_000, times=1)
    with pytest.raises(ConsolidatorError, match="not JSON"):
        make(server).decide(new, ScopeReader(store, "alice"))
    server.on_chat("memory manager", {"events": []}, times=1)
    with pytest.raises(ConsolidatorError, match="no 'memory' list"):
        make(server).decide(new, ScopeReader(store, "alice"))
    server.fail("chat/completions", status=500, times=10)
    with pytest.raises(ConsolidatorError, match="still failing after 3 attempt"):
        make(server, max_retries=2).decide(new, ScopeReader(store, "alice"))


def test_a_malformed_answer_names_the_endpoint(server: FakeOpenAI) -> None:
    # several consolidators may be configured: the model name alone is not enough
    store, new = setup()
    server.on_chat("memory manager", {"events": []}, times=1)
    with pytest.raises(ConsolidatorError, match="no 'memory' list") as caught:
        make(server).decide(new, ScopeReader(store, "alice"))
    where = server.base_url.removeprefix("http://")
    assert f"OpenAIConsolidator(fake-llm) at {where}:" in str(caught.value)
    assert KEY not in str(caught.value)
    # an answer that echoes the key is scrubbed in the message (it was quoted as is)
    server.on_chat("memory manager", {"echo": f"Bearer {KEY}"}, times=1)
    with pytest.raises(ConsolidatorError, match="no 'memory' list") as caught:
        make(server).decide(new, ScopeReader(store, "alice"))
    assert KEY not in str(caught.value) and "Bearer [redacted]" in str(caught.value)


def test_answers_in_code_fences_and_refusals() -> None:
    def answer(content: object, refusal: str | None = None) -> httpx.MockTransport:
        message = {"role": "assistant", "content": content}
        if refusal:
            message["refusal"] = refusal
        return httpx.MockTransport(
            lambda request: httpx.Response(200, json={"choices": [{"message": message}]})
        )

    store, new = setup()
    fenced = '```json\n{"memory": [{"id": "0", "event": "UPDATE"}]}\n```'
    c = OpenAIConsolidator("https://llm.test/v1", api_key_env=None, transport=answer(fenced))
    assert [d.old_id for d in c.decide(new, ScopeReader(store, "alice"))] == ["r0"]
    c = OpenAIConsolidator(
        "https://llm.test/v1", api_key_env=None, transport=answer(None, "I can't help")
    )
    with pytest.raises(ConsolidatorError, match="refused: I can't help"):
        c.decide(new, ScopeReader(store, "alice"))


@pytest.mark.parametrize(
    "kw, match",
    [
        ({"model": " "}, "model"),
        ({"neighbours": -1}, "neighbours"),
        ({"neighbours": 0, "lexical_neighbours": 0}, "both 0"),
        ({"confidence": 2.0}, "confidence"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"api_key_env": "MEMLAB_TEST_UNSET_KEY_XYZ"}, "is not set"),
    ],
)
def test_settings_are_checked(kw: dict, match: str) -> None:
    args: dict = {"api_key_env": None} | kw
    with pytest.raises(ConfigError, match=match):
        OpenAIConsolidator("https://llm.test/v1", **args)

"""OpenAIChat (chat completions with usage, the endpoint check) and CachedChat,
against httpx.MockTransport and the fake server on 127.0.0.1."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from memlab.errors import ChatEndpointError, ConfigError, InputError
from memlab.memory import CachedChat, Completion, ModelCache, OpenAIChat
from tests.fake_openai import FakeOpenAI

KEY = "sk-chat-test-4f5e6d7c"
KEY_ENV = "MEMLAB_TEST_CHAT_KEY"
MESSAGES = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi?"}]


def answer(content: object = "Hello.", usage: object = None, **choice: object) -> dict:
    body: dict = {
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, **choice}]
    }
    if usage is not None:
        body["usage"] = usage
    return body


def mock(handler: Callable[[httpx.Request], httpx.Response], **kw: object) -> OpenAIChat:
    return OpenAIChat(
        "https://h.test/v1",
        "m",
        api_key_env=None,
        transport=httpx.MockTransport(handler),
        sleep=lambda s: None,
        **kw,  # type: ignore[arg-type]
    )


def test_request_is_temperature_zero_with_max_tokens_and_usage_is_read() -> None:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=answer(usage={"prompt_tokens": 12, "completion_tokens": 3}))

    chat = mock(handler, max_tokens=7)
    got = chat.complete(MESSAGES)
    assert got == Completion("Hello.", 12, 3, None, False, False)
    assert seen[0] == {"model": "m", "messages": MESSAGES, "temperature": 0.0, "max_tokens": 7}
    assert chat(MESSAGES) == "Hello."  # the agent loop's ChatModel
    assert chat.name == "openai-chat-m@h.test/v1"


def test_a_key_echoed_in_a_malformed_answer_is_scrubbed_from_the_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The keys of a reply of the wrong shape are quoted in the error: a key the
    # server echoed there was printed as it came.
    monkeypatch.setenv(KEY_ENV, KEY)
    for body in ({KEY: 1}, answer({f"auth {KEY}": 1})):
        chat = OpenAIChat("https://h.test/v1", "m", api_key_env=KEY_ENV,
                          transport=httpx.MockTransport(lambda r, b=body: httpx.Response(200, json=b)))  # fmt: skip
        with pytest.raises(ChatEndpointError, match=r"malformed answer.*\[redacted\]") as info:
            chat.complete(MESSAGES)
        assert KEY not in str(info.value)


def test_missing_usage_is_estimated_and_flagged() -> None:
    chat = mock(lambda r: httpx.Response(200, json=answer("twelve chars")))
    got = chat.complete(MESSAGES)
    assert got.usage_estimated
    assert got.completion_tokens == 3  # ceil(12 / 4)
    assert got.prompt_tokens == 3 + 1  # "Be brief." (9 chars) + "Hi?" (3 chars)


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ({"data": []}, "no 'choices' list (got an object with keys [data])"),
        (answer(None), "content is None, not a string"),
        (answer(["a"]), "content is a list of 1, not a string"),
        ({"choices": []}, "no 'choices' list"),
        (
            {"choices": [{"message": {"content": None, "refusal": "I can't help with that"}}]},
            "the model refused: I can't help",
        ),
    ],
)
def test_malformed_answers_are_clear_errors(body: dict, needle: str) -> None:
    chat = mock(lambda r: httpx.Response(200, json=body))
    with pytest.raises(ChatEndpointError, match="reader|chat model") as err:
        chat.complete(MESSAGES)
    assert needle in str(err.value)
    assert "h.test/v1" in str(err.value)


def test_not_json_and_non_retryable_status() -> None:
    chat = mock(lambda r: httpx.Response(200, text="<html>oops</html>"))
    with pytest.raises(ChatEndpointError, match="not JSON"):
        chat.complete(MESSAGES)
    chat = mock(lambda r: httpx.Response(404, json={"error": {"message": "no such model"}}))
    with pytest.raises(ChatEndpointError, match="HTTP 404: no such model; check base_url"):
        chat.complete(MESSAGES)


def test_retries_429_then_answers() -> None:
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) < 3:
            return httpx.Response(429 if len(calls) == 1 else 503, headers={"Retry-After": "0"})
        return httpx.Response(200, json=answer())

    chat = mock(handler)
    assert chat.complete(MESSAGES).text == "Hello."
    assert chat.requests == 3 and chat.api.retries == 2


@pytest.mark.parametrize(
    "messages",
    [[], "hi", [{"role": "user"}], [{"role": "robot", "content": "x"}], [{"content": 1}]],
)
def test_bad_messages_are_input_errors(messages: object) -> None:
    chat = mock(lambda r: httpx.Response(200, json=answer()))
    with pytest.raises(InputError):
        chat.complete(messages)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kw", "needle"),
    [
        ({"model": " "}, "model"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"temperature": 3}, "temperature"),
    ],
)
def test_bad_settings(kw: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        OpenAIChat("http://127.0.0.1:1/v1", api_key_env=None, **kw)


# -- the endpoint check, on a real socket ---------------------------------------------------
@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    monkeypatch.setenv(KEY_ENV, KEY)
    with FakeOpenAI(api_key=KEY, models={"m", "judge"}) as s:
        yield s


def test_check_passes_and_names_a_model_the_server_does_not_serve(server: FakeOpenAI) -> None:
    OpenAIChat(server.base_url, "m", api_key_env=KEY_ENV).check()
    with pytest.raises(ConfigError, match="does not serve the model 'gpt-x'; it serves: judge, m"):
        OpenAIChat(server.base_url, "gpt-x", api_key_env=KEY_ENV).check()


def test_check_refused_key_and_unreachable(
    server: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMLAB_TEST_WRONG_KEY", "sk-wrong-000000")
    with pytest.raises(ChatEndpointError, match="HTTP 401") as err:
        OpenAIChat(server.base_url, "m", api_key_env="MEMLAB_TEST_WRONG_KEY").check()
    assert "Nothing was run" in str(err.value)
    port = server.port
    server.stop()
    with pytest.raises(ChatEndpointError, match="ConnectError") as err:
        OpenAIChat(f"http://127.0.0.1:{port}/v1", "m", api_key_env=None, backoff=0).check()
    assert "still failing after 2 attempt(s)" in str(err.value)


def test_check_passes_when_the_endpoint_lists_no_models() -> None:
    chat = mock(lambda r: httpx.Response(404, json={"error": "no route"}))
    chat.check()
    assert chat.requests == 1


def test_usage_from_the_fake_server(server: FakeOpenAI) -> None:
    chat = OpenAIChat(server.base_url, "m", api_key_env=KEY_ENV)
    server.on_chat(lambda body: True, "Forty-two.")
    got = chat.complete(MESSAGES)
    assert got.text == "Forty-two." and not got.usage_estimated
    assert (got.prompt_tokens, got.completion_tokens) == (3 + 1, 3)


# -- CachedChat --------------------------------------------------------------------------------
def counting(text: str = "Hello.") -> tuple[OpenAIChat, list[dict]]:
    seen: list[dict] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        return httpx.Response(200, json=answer(text, {"prompt_tokens": 5, "completion_tokens": 2}))

    return mock(handler), seen


def test_cached_chat_answers_a_repeat_from_the_cache(tmp_path: Path) -> None:
    inner, seen = counting()
    chat = CachedChat(inner, ModelCache(tmp_path / "c.sqlite"))
    assert chat.lookup(MESSAGES) is None
    first = chat.complete(MESSAGES)
    again = chat.complete(MESSAGES)
    assert len(seen) == 1
    assert not first.cached and again.cached
    assert (again.text, again.prompt_tokens, again.completion_tokens) == ("Hello.", 5, 2)
    assert chat.lookup(MESSAGES) == again
    assert (chat.stats.hits, chat.stats.misses) == (2, 1)
    # A new process (a new ModelCache on the file) gets it too.
    inner2, seen2 = counting("other")
    assert CachedChat(inner2, ModelCache(tmp_path / "c.sqlite")).complete(MESSAGES).text == "Hello."
    assert seen2 == []


def test_cache_key_covers_model_messages_and_parameters(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "c.sqlite")
    inner, seen = counting()
    CachedChat(inner, cache).complete(MESSAGES)
    CachedChat(inner, cache).complete([*MESSAGES[:1], {"role": "user", "content": "Hi!"}])
    assert len(seen) == 2
    longer, seen_longer = counting()
    longer.max_tokens = 99
    CachedChat(longer, cache).complete(MESSAGES)
    assert len(seen_longer) == 1  # another max_tokens is another request
    other = OpenAIChat(
        "https://elsewhere.test/v1", "m", api_key_env=None,
        transport=httpx.MockTransport(lambda r: httpx.Response(200, json=answer("x"))),
    )  # fmt: skip
    assert CachedChat(other, cache).complete(MESSAGES).text == "x"  # another endpoint


def test_a_failed_call_stores_nothing(tmp_path: Path) -> None:
    cache = ModelCache(tmp_path / "c.sqlite")
    broken = mock(lambda r: httpx.Response(200, json={"choices": []}), max_retries=0)
    with pytest.raises(ChatEndpointError):
        CachedChat(broken, cache).complete(MESSAGES)
    assert cache.info()["completions"] == 0


def test_cached_chat_is_safe_across_threads(tmp_path: Path) -> None:
    inner, seen = counting()
    chat = CachedChat(inner, ModelCache(tmp_path / "c.sqlite"))
    prompts = [[{"role": "user", "content": f"q{i % 20}"}] for i in range(200)]
    errors: list[BaseException] = []

    def work(chunk: list[list[dict]]) -> None:
        try:
            for p in chunk:
                chat.complete(p)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(prompts[i::8],)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert chat.stats.hits + chat.stats.misses == 200
    assert chat.cache.info()["completions"] == 20
    assert 20 <= len(seen) <= 200  # a prompt asked by two threads at once may be sent twice

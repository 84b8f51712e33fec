"""OpenAISummarizer against httpx.MockTransport."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

import httpx
import pytest

from memlab.errors import ConfigError, InputError, SummarizerError
from memlab.memory import OpenAISummarizer, Summarizer
from memlab.memory.summarizers import PROMPT_VERSION, SUMMARY_PROMPT, build_messages

KEY = "sk-sum-9e8d7c6b5a4f3e2d"
KEY_ENV = "MEMLAB_TEST_SUM_KEY"
TEXTS = [
    "Hi! We deploy everything on GKE in europe-west1.",
    "Thanks so much!",
    "Always page me on PagerDuty, never email.",
]


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


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


def make(ep: Endpoint, **kw: object) -> OpenAISummarizer:
    return OpenAISummarizer(
        "https://llm.example.test/v1",
        model="gpt-test",
        api_key_env=KEY_ENV,
        transport=httpx.MockTransport(ep),
        sleep=lambda s: None,
        **kw,  # type: ignore[arg-type]
    )


def test_sends_the_reference_prompt_at_temperature_zero() -> None:
    ep = Endpoint(chat_answer("The user deploys on GKE in europe-west1."))
    s = make(ep)
    assert isinstance(s, Summarizer)
    assert s.summarize(TEXTS) == "The user deploys on GKE in europe-west1."
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
    assert user["content"] == "\n".join(TEXTS)  # oldest first, one per line


def test_max_words_and_max_tokens_reach_the_request() -> None:
    ep = Endpoint(chat_answer("x"))
    make(ep, max_words=40, max_tokens=90).summarize(TEXTS)
    assert "under 40 words" in ep.bodies[0]["messages"][0]["content"]
    assert ep.bodies[0]["max_tokens"] == 90


def test_nothing_and_empty_input() -> None:
    ep = Endpoint(chat_answer("NOTHING"), chat_answer("  NOTHING.  "), chat_answer(""))
    s = make(ep)
    assert s.summarize(["thanks!", "ok"]) == ""
    assert s.summarize(["cool"]) == ""
    assert s.summarize(["bye"]) == ""
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
        make(Endpoint(answer)).summarize(TEXTS)


def test_retries_then_succeeds_and_other_4xx_fail() -> None:
    ep = Endpoint(
        httpx.Response(429, headers={"Retry-After": "0"}, json={"error": {"message": "slow"}}),
        httpx.Response(500, json={"error": {"message": "oops"}}),
        chat_answer("The user deploys on GKE."),
    )
    assert make(ep).summarize(TEXTS) == "The user deploys on GKE."
    assert len(ep.bodies) == 3
    ep = Endpoint(
        httpx.Response(404, json={"error": {"message": "The model `gpt-test` does not exist"}})
    )
    with pytest.raises(SummarizerError, match="HTTP 404: The model `gpt-test` does not exist"):
        make(ep).summarize(TEXTS)
    assert len(ep.bodies) == 1


def test_truncated_answer_is_kept_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    s = make(Endpoint(chat_answer("The user deploys on", finish="length")), max_tokens=5)
    assert s.summarize(TEXTS) == "The user deploys on"
    assert "cut at max_tokens=5" in caplog.text


def test_name_repr_settings_and_no_key(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    s = make(
        Endpoint(
            httpx.Response(401, json={"error": {"message": f"Incorrect API key provided: {KEY}"}})
        )
    )
    assert s.name == f"openai-chat-gpt-test-prompt-v{PROMPT_VERSION}-120w@llm.example.test/v1"
    with pytest.raises(SummarizerError) as info:
        s.summarize(TEXTS)
    for text in (str(info.value), repr(s), str(vars(s)), caplog.text):
        assert KEY not in text
    for bad, match in [
        ({"model": ""}, "model"),
        ({"max_words": 0}, "max_words"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"base_url": "llm.example.test"}, "base_url"),
    ]:
        kw = {"model": "m", "api_key_env": KEY_ENV, **bad}
        with pytest.raises(ConfigError, match=match):
            OpenAISummarizer(**kw)  # type: ignore[arg-type]

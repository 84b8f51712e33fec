"""Chat completions from any OpenAI-compatible ``POST {base_url}/chat/completions``
endpoint (OpenAI, Azure, vLLM, llama.cpp, Ollama, LiteLLM, ...), over httpx.

``OpenAIChat`` answers a list of messages with a ``Completion``: the text and the
token usage the endpoint reported. It is also a ``ChatModel`` for the agent loop
(``run_turn``): calling it returns the text. The retry and error rules are those
of ``memlab.memory.models.http``; failures raise ``ChatEndpointError``. Wrap it in
``CachedChat`` (``memlab.memory.models.cached``) so that the same request (model,
messages and parameters) is answered from the persistent cache: a rerun, or a
second strategy that builds the same prompt, costs nothing.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx

from memlab.errors import ChatEndpointError, ConfigError, InputError
from memlab.memory.models.http import JsonApi, RetryPolicy, display_url
from memlab.memory.text import estimate_tokens

log = logging.getLogger(__name__)

Message = dict[str, str]
ROLES = ("system", "user", "assistant")


@dataclass(frozen=True)
class Completion:
    """One chat answer.

    Attributes:
        text: the assistant's message content.
        prompt_tokens: input tokens, as the endpoint's ``usage`` reported them.
        completion_tokens: output tokens, likewise.
        finish_reason: ``stop``, ``length`` (cut at ``max_tokens``), ...
        usage_estimated: the endpoint reported no usage; the counts are
            ``ceil(chars / 4)`` estimates.
        cached: answered from the persistent cache (no request was sent).
    """

    text: str
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str | None = None
    usage_estimated: bool = False
    cached: bool = False

    def as_dict(self) -> dict[str, Any]:
        """The stored form (everything but ``cached``)."""
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "usage_estimated": self.usage_estimated,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, cached: bool = False) -> Completion:
        return cls(
            text=str(data.get("text", "")),
            prompt_tokens=int(data.get("prompt_tokens") or 0),
            completion_tokens=int(data.get("completion_tokens") or 0),
            finish_reason=data.get("finish_reason"),
            usage_estimated=bool(data.get("usage_estimated", False)),
            cached=cached,
        )


class ChatClient(Protocol):
    """A chat model that answers messages with a ``Completion``.

    ``name`` identifies the model and the endpoint that serves it; ``params`` are
    the request parameters besides the messages (temperature, max_tokens). Both
    are part of the cache key.
    """

    @property
    def name(self) -> str: ...

    @property
    def params(self) -> dict[str, Any]: ...

    def complete(self, messages: Sequence[Message]) -> Completion: ...


def check_messages(messages: Sequence[Message], who: str) -> list[Message]:
    """``messages`` as a list of ``{"role", "content"}`` dicts of strings.

    Raises:
        InputError: not a non-empty list of such dicts, or an unknown role.
    """
    if isinstance(messages, str | bytes) or not isinstance(messages, Sequence) or not messages:
        raise InputError(f"{who}: messages must be a non-empty list of {{role, content}} dicts")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("content"), str):
            raise InputError(f"{who}: message {i} must be a dict with a string 'content'")
        if m.get("role") not in ROLES:
            raise InputError(f"{who}: message {i} has role {m.get('role')!r}; use one of {ROLES}")
        out.append({"role": str(m["role"]), "content": str(m["content"])})
    return out


class OpenAIChat:
    """Chat completions from ``POST {base_url}/chat/completions`` at a fixed
    temperature (0 by default) and ``max_tokens``.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1``.
        model: the chat model name the endpoint expects.
        temperature: sampling temperature (0: as deterministic as the endpoint gets).
        max_tokens: cap on the answer's tokens (sent as ``max_tokens``).
        api_key_env: NAME of the environment variable holding the key (None or
            "" for endpoints without auth). The key itself is never stored.
        api_key_header: ``Authorization`` (Bearer) or e.g. ``api-key`` (Azure).
        timeout: seconds per connect/read/write.
        max_retries: retries after the first attempt (429, 5xx, timeouts).
        backoff: base backoff delay in seconds (doubles per retry, with jitter).
        max_delay: cap on one wait, and on an honoured Retry-After.
        client: an httpx.Client to use (not closed by us).
        transport: an httpx transport for the client we create (tests).
        sleep: replaces ``time.sleep`` between retries (tests).
        seed: seeds the backoff jitter.
        who: names this client in messages (e.g. ``reader`` or ``judge``).

    Raises:
        ConfigError: a bad setting, or ``api_key_env`` names an unset variable.
    """

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        model: str = "gpt-4o-mini",
        *,
        temperature: float = 0.0,
        max_tokens: int = 256,
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key_header: str = "Authorization",
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_delay: float = 60.0,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        seed: int | None = None,
        who: str = "chat model",
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{who}: model must be a non-empty string")
        if not isinstance(temperature, int | float) or not 0 <= temperature <= 2:
            raise ConfigError(f"{who}: temperature must be in 0..2, got {temperature!r}")
        if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or max_tokens < 1:
            raise ConfigError(f"{who}: max_tokens must be an integer >= 1, got {max_tokens!r}")
        self.model = model
        self.temperature = float(temperature)
        self.max_tokens = max_tokens
        self._who = f"{who} {model}"
        self.api = JsonApi(
            base_url,
            who=self._who,
            error=ChatEndpointError,
            api_key_env=api_key_env,
            api_key_header=api_key_header,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff=backoff, max_delay=max_delay),
            client=client,
            transport=transport,
            sleep=sleep,
            seed=seed,
        )
        self._name = f"openai-chat-{model}@{display_url(self.api.base_url)}"

    @property
    def name(self) -> str:
        """``openai-chat-<model>@<host>/<path>``: two endpoints may serve different
        weights under one model name, so the endpoint is part of the identity."""
        return self._name

    @property
    def params(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_tokens": self.max_tokens}

    @property
    def requests(self) -> int:
        """HTTP requests sent so far, retries and the endpoint check included."""
        return self.api.requests

    def __repr__(self) -> str:
        return (
            f"OpenAIChat(base_url={str(self.api.base_url)!r}, model={self.model!r}, "
            f"temperature={self.temperature}, max_tokens={self.max_tokens}, "
            f"api_key_env={self.api.api_key_env!r})"
        )

    def complete(self, messages: Sequence[Message]) -> Completion:
        """Send one chat request; return the answer and its token usage.

        Raises:
            InputError: ``messages`` is malformed.
            ChatEndpointError: the request failed for good, or the answer is not a
                chat completion (no text, a refusal, a body that is not JSON).
        """
        sent = check_messages(messages, self._who)
        body = self.api.post(
            "chat/completions", {"model": self.model, "messages": sent, **self.params}
        )
        return self._parse(body, sent)

    def __call__(self, messages: list[Message]) -> str:
        """The answer's text (the agent loop's ``ChatModel``)."""
        return self.complete(messages).text

    def check(self) -> None:
        """Check the endpoint before any work: ``GET {base_url}/models`` answers (one
        quick retry), the key is accepted, and the model is served if the endpoint
        lists its models. An endpoint without a model list (404) passes.

        Raises:
            ChatEndpointError: unreachable, or the key was refused.
            ConfigError: the endpoint lists its models and ``model`` is not one.
        """
        try:
            body = self.api.get("models", max_retries=1)
        except ChatEndpointError as exc:
            if " answered HTTP 404" in str(exc) or " answered HTTP 405" in str(exc):
                return  # no model list here (some proxies); the first request will tell
            raise ChatEndpointError(
                f"{exc}. Nothing was run: start the server or fix base_url and the key"
            ) from None
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            return
        served = [str(m.get("id")) for m in data if isinstance(m, dict) and m.get("id")]
        if served and self.model not in served:
            shown = ", ".join(sorted(served)[:12]) + (" ..." if len(served) > 12 else "")
            raise ConfigError(
                f"{self._who}: {display_url(self.api.base_url)} does not serve the model "
                f"{self.model!r}; it serves: {shown}. Fix the model name"
            )

    def _parse(self, body: Any, sent: list[Message]) -> Completion:
        who = f"{self._who} at {display_url(self.api.base_url)}"
        choices = body.get("choices") if isinstance(body, dict) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ChatEndpointError(
                f"{who}: malformed answer: no 'choices' list (got {self.api.describe(body)}); is "
                "base_url an OpenAI-compatible API with /chat/completions?"
            )
        choice = choices[0]
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        if content is None and isinstance(message, dict) and message.get("refusal"):
            raise ChatEndpointError(
                f"{who}: the model refused: {self.api.redact(str(message['refusal']))[:300]}"
            )
        if not isinstance(content, str):
            raise ChatEndpointError(
                f"{who}: malformed answer: choices[0].message.content is "
                f"{self.api.describe(content)}, not a string"
            )
        finish = choice.get("finish_reason")
        if finish == "length":
            log.info("%s: an answer was cut at max_tokens=%s", self._who, self.max_tokens)
        usage = body.get("usage")
        prompt = _count(usage, "prompt_tokens")
        completion = _count(usage, "completion_tokens")
        estimated = prompt is None or completion is None
        if estimated:
            prompt = sum(estimate_tokens(m["content"]) for m in sent) if prompt is None else prompt
            completion = estimate_tokens(content) if completion is None else completion
        return Completion(
            text=content,
            prompt_tokens=int(prompt or 0),
            completion_tokens=int(completion or 0),
            finish_reason=str(finish) if finish is not None else None,
            usage_estimated=estimated,
        )

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        self.api.close()


def _count(usage: Any, key: str) -> int | None:
    value = usage.get(key) if isinstance(usage, dict) else None
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


__all__ = ["ChatClient", "Completion", "Message", "OpenAIChat", "check_messages"]

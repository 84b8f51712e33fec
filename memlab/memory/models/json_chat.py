"""What the OpenAI-compatible components that ask a chat model for JSON share (the
consolidator and the reflector): one ``JsonApi`` with memlab's retry rules, the
model cache, the cache key's name, the request counters, and one chat request at
temperature 0."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from memlab.errors import MemlabError
from memlab.memory.models.cache import ModelCache
from memlab.memory.models.http import JsonApi, RetryPolicy, display_url


class JsonChatClient:
    """The shared state and request of a JSON-answering chat component.

    Subclasses check their own settings first, then call this constructor (which
    opens the HTTP client last, so a bad setting leaves nothing open).

    Args:
        label: the class name, used in messages and ``repr``.
        kind: the cache key's word (``consolidate``, ``reflect``).
        prompt_version: the prompt's version, part of the cache key.
        error: the MemlabError subclass the API raises.
        cache: a ModelCache (or a path to one); None: no cache.
        json_mode: send ``response_format={"type": "json_object"}``.
        max_tokens: sent as ``max_tokens`` when set.
        The rest: as ``JsonApi`` and ``RetryPolicy`` take them.
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        label: str,
        kind: str,
        prompt_version: int,
        error: type[MemlabError],
        cache: ModelCache | str | Path | None,
        json_mode: bool,
        max_tokens: int | None,
        api_key_env: str | None,
        api_key_header: str,
        timeout: float,
        max_retries: int,
        backoff: float,
        max_delay: float,
        client: httpx.Client | None,
        transport: httpx.BaseTransport | None,
        sleep: Callable[[float], None] | None,
        seed: int | None,
    ) -> None:
        self.model = model
        self.json_mode = json_mode
        self.max_tokens = max_tokens
        self.cache = cache if isinstance(cache, ModelCache) or cache is None else ModelCache(cache)
        self._label = label
        self._who = f"{label}({model})"
        self.api = JsonApi(
            base_url,
            who=self._who,
            error=error,
            api_key_env=api_key_env,
            api_key_header=api_key_header,
            timeout=timeout,
            retry=RetryPolicy(max_retries=max_retries, backoff=backoff, max_delay=max_delay),
            client=client,
            transport=transport,
            sleep=sleep,
            seed=seed,
        )
        # Messages about a reply name the endpoint too (JsonApi's name its URL):
        # with several endpoints configured, the model name alone does not say
        # which one answered wrongly.
        self._who = f"{self._who} at {display_url(self.api.base_url)}"
        self._name = (
            f"openai-{kind}-{model}-prompt-v{prompt_version}@{display_url(self.api.base_url)}"
        )
        self.hits = 0  # requests answered from the cache
        self.calls = 0  # requests sent to the model
        self.model_seconds = 0.0

    @property
    def name(self) -> str:
        """``openai-<kind>-<model>-prompt-v<N>@<host>/<path>`` (the cache key)."""
        return self._name

    def __repr__(self) -> str:
        return (
            f"{self._label}(base_url={str(self.api.base_url)!r}, model={self.model!r}, "
            f"api_key_env={self.api.api_key_env!r}, cache={self.cache!r})"
        )

    def cached(self, key: bytes) -> str | None:
        """The cached answer text for ``key`` (counted as a hit), or None."""
        if self.cache is None:
            return None
        text = self.cache.get_summary(self.name, key)
        if text is not None:
            self.hits += 1
        return text

    def keep(self, key: bytes, text: str) -> None:
        """Cache an answer that was understood."""
        if self.cache is not None:
            self.cache.put_summary(self.name, key, text)

    def post_chat(self, messages: list[dict[str, str]]) -> Any:
        """One chat completion at temperature 0 (JSON mode and ``max_tokens`` as
        set); returns the response body, counted and timed."""
        payload: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": 0}
        if self.json_mode:
            payload["response_format"] = {"type": "json_object"}
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        t0 = time.perf_counter()
        body = self.api.post("chat/completions", payload)
        self.model_seconds += time.perf_counter() - t0
        self.calls += 1
        return body

    def close(self) -> None:
        """Close the HTTP client if this component created it."""
        self.api.close()

"""``reader=openai``: answers from any OpenAI-compatible chat endpoint (OpenAI,
Azure, vLLM, Ollama, llama.cpp, LiteLLM, ...), at temperature 0, cached."""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

import httpx

from memlab.errors import ConfigError
from memlab.lab.readers import READERS, Prices, context_hits, format_now
from memlab.lab.strategies.base import ContextItem
from memlab.memory import CachedChat, Completion, ModelCache, OpenAIChat
from memlab.memory.agent import Message, prompt_messages

READER_PROMPT = (
    "You are a helpful assistant with long-term memory. The current time is {now}. "
    "Answer the user's question from the memory below, as briefly as possible (a few "
    "words). If the memory does not contain the answer, say that you don't know."
)
"""The reader's system prompt; ``{now}`` is the probe's time. The memory block
follows it, as in the agent loop."""


@READERS.register("openai")
class OpenAIReader:
    """A reader on ``POST {base_url}/chat/completions`` at temperature 0.

    Every answer goes through the persistent model cache (when one is given),
    keyed by the model, the endpoint, the messages and the parameters.

    Args:
        base_url: the API root, e.g. ``https://api.openai.com/v1`` or
            ``http://127.0.0.1:8000/v1`` (vLLM) or ``http://127.0.0.1:11434/v1``
            (Ollama).
        model: the chat model name the endpoint expects.
        max_tokens: cap on an answer's tokens.
        system_prompt: the system prompt before the memory block; ``{now}``
            becomes the probe's time.
        price_per_1k_input: US dollars per 1,000 prompt tokens (for
            ``reader_cost_usd`` and ``reader.max_usd``; gpt-4o-mini's list price
            by default).
        price_per_1k_output: US dollars per 1,000 completion tokens.
        api_key_env: NAME of the environment variable holding the key (null or
            "" for a local server without auth).
        api_key_header: ``Authorization`` (Bearer) or e.g. ``api-key`` (Azure).
        timeout: seconds per connect/read/write.
        max_retries: retries of a 429, 5xx or timeout.
        backoff: base backoff delay in seconds (doubles per retry, with jitter).
        max_delay: cap on one wait, and on an honoured Retry-After.
        cache: the persistent model cache (the lab passes it; None: no caching).
        client: an httpx.Client to use (not closed by us).
        transport: an httpx transport for the client we create (tests).
        sleep: replaces ``time.sleep`` between retries (tests).
        seed: seeds the backoff jitter.

    Raises:
        ConfigError: a bad setting, an unset key variable, or a system prompt
            with a placeholder other than ``{now}``.
    """

    def __init__(
        self,
        base_url: str = "https://api.openai.com/v1",
        model: str = "gpt-4o-mini",
        *,
        max_tokens: int = 128,
        system_prompt: str = READER_PROMPT,
        price_per_1k_input: float = 0.00015,
        price_per_1k_output: float = 0.0006,
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key_header: str = "Authorization",
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 0.5,
        max_delay: float = 60.0,
        cache: ModelCache | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        seed: int | None = None,
    ) -> None:
        try:
            # "{now.year}" or "{now[0]}" name a field of {now}, which is a string:
            # AttributeError, or a prompt that shows a method's repr
            named = [f for _, f, _, _ in string.Formatter().parse(system_prompt) if f]
            other = next((f for f in named if f != "now"), None)
            if other is not None:
                raise KeyError(other)
            system_prompt.format(now="")
        except (KeyError, IndexError, ValueError) as exc:
            raise ConfigError(
                f"system_prompt has a bad placeholder ({exc}); the only one is {{now}} "
                "(write {{ and }} for literal braces)"
            ) from None
        self.system_prompt = system_prompt
        self.prices = Prices(price_per_1k_input, price_per_1k_output)
        self.max_tokens = max_tokens
        chat = OpenAIChat(
            base_url,
            model,
            temperature=0.0,
            max_tokens=max_tokens,
            api_key_env=api_key_env,
            api_key_header=api_key_header,
            timeout=timeout,
            max_retries=max_retries,
            backoff=backoff,
            max_delay=max_delay,
            client=client,
            transport=transport,
            sleep=sleep,
            seed=seed,
            who="reader",
        )
        self.endpoint = chat
        self.chat: OpenAIChat | CachedChat = chat if cache is None else CachedChat(chat, cache)
        self.name = chat.name

    def __repr__(self) -> str:
        return f"OpenAIReader({self.chat!r})"

    @property
    def requests(self) -> int:
        """HTTP requests sent (the endpoint check and retries included)."""
        return self.endpoint.requests

    def messages(self, question: str, items: Sequence[ContextItem], now: float) -> list[Message]:
        system = self.system_prompt.format(now=format_now(now))
        return prompt_messages(system, context_hits(items), question)

    def lookup(self, messages: Sequence[Message]) -> Completion | None:
        return self.chat.lookup(messages) if isinstance(self.chat, CachedChat) else None

    def answer(self, messages: Sequence[Message]) -> Completion:
        return self.chat.complete(messages)

    def check(self) -> None:
        self.endpoint.check()

    def stats(self) -> Any:
        """The cache's hit/miss counters (None without a cache)."""
        return self.chat.stats if isinstance(self.chat, CachedChat) else None

    def close(self) -> None:
        self.chat.close()

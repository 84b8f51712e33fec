"""Shared HTTP plumbing for OpenAI-compatible endpoints: one JSON POST with retries.

Used by ``OpenAIEmbedder`` and ``OpenAISummarizer`` so that both follow the
same rules:

- 429, 408, 409 and every 5xx, timeouts and connection errors are retried with
  exponential backoff and jitter, at most ``max_retries`` times; a
  ``Retry-After`` header (seconds or an HTTP date; also OpenAI's
  ``retry-after-ms``) replaces the computed delay.
- Any other non-2xx answer fails at once with the caller's error class, carrying
  the server's own error message.
- The API key is read from an environment variable whose *name* is configured.
  Its value is read per request, never kept on an object, never logged, and
  scrubbed from every message memlab builds (some servers echo the key back).
"""

from __future__ import annotations

import datetime
import email.utils
import json
import logging
import math
import numbers
import os
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import httpx

from memlab.errors import ConfigError, MemlabError

log = logging.getLogger(__name__)

# The OpenAI client libraries retry these too: 408 request timeout, 409 conflict
# (lock contention on their side), 429 rate limit, and every server error.
RETRY_STATUSES = frozenset({408, 409, 429})
_SNIPPET = 300
# What ``json.loads`` raises on a body it cannot decode. RecursionError is among
# them: a reply nested a few thousand levels deep ("[[[[...") exhausts the
# decoder's recursion limit instead of raising a ValueError.
JSON_FAILURES = (ValueError, UnicodeDecodeError, RecursionError)
# Where a decoded reply can hold a lone surrogate: a string escape of half a pair
# ("\ud83d", e.g. an answer cut between the two halves of an emoji), or a
# surrogate encoded as UTF-8 bytes, which ``json.loads`` decodes with
# "surrogatepass". Such a str cannot be encoded as UTF-8 again.
_SURROGATE_HINT = re.compile(rb"\\u[dD][89a-fA-F]|\xed[\xa0-\xbf]")
# An HTTP header name: a "token" of RFC 9110.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
# The keys of OpenAI's results (embeddings and the model list: data; chat: choices).
_RESULTS = frozenset({"data", "choices"})


def _finite(value: object) -> bool:
    """A real number (not a bool), neither NaN nor infinite."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value)


def is_retryable_status(status: int) -> bool:
    """True for the statuses worth retrying: 408, 409, 429 and every 5xx."""
    return status in RETRY_STATUSES or 500 <= status <= 599


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long to retry a failing request.

    The wait before retry ``n`` (0-based) is ``b = min(max_delay, backoff * 2**n)``
    with "equal jitter": ``b/2 + uniform(0, b/2)``, so parallel sweep jobs that hit
    a rate limit together do not retry in lockstep. A server's ``Retry-After`` is
    honoured instead, unless it exceeds ``max_delay`` (then the request fails
    with a clear error rather than hanging for an hour).

    Args:
        max_retries: retries after the first attempt (0 disables retrying).
        backoff: base delay in seconds.
        max_delay: cap on one wait, in seconds.
    """

    max_retries: int = 5
    backoff: float = 0.5
    max_delay: float = 60.0

    def __post_init__(self) -> None:
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigError(f"max_retries must be an integer >= 0, got {self.max_retries!r}")
        for name, value in (("backoff", self.backoff), ("max_delay", self.max_delay)):
            # inf passed "value >= 0", and then time.sleep(inf) raised OverflowError
            if not _finite(value) or value < 0:
                raise ConfigError(f"{name} must be a finite number >= 0 seconds, got {value!r}")

    def backoff_delay(self, retry: int, rng: random.Random) -> float:
        """Seconds to wait before retry number ``retry`` (0-based), with jitter."""
        base = min(self.max_delay, self.backoff * (2.0**retry))
        return base / 2 + rng.uniform(0, base / 2)


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds a server asks us to wait, from ``retry-after-ms`` or ``Retry-After``.

    ``Retry-After`` may be a number of seconds or an HTTP date. Returns None when
    neither header is present or parseable (``nan`` is not a wait), so the
    computed backoff applies; never a negative number.
    """
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            wait = float(ms) / 1000.0
        except ValueError:
            pass
        else:
            # "nan" parses as a float, and max(0.0, nan) is 0.0: an immediate retry
            if not math.isnan(wait):
                return max(0.0, wait)
    value = headers.get("retry-after")
    if value is None:
        return None
    value = value.strip()
    try:
        wait = float(value)
    except ValueError:
        pass
    else:
        return None if math.isnan(wait) else max(0.0, wait)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    if when.tzinfo is None:
        # An HTTP date is in GMT, and the asctime form ("Sun Nov  6 08:49:37 1994")
        # names no zone: read as local time it was off by the machine's UTC offset.
        when = when.replace(tzinfo=datetime.UTC)
    now = time.time() if now is None else now
    return max(0.0, when.timestamp() - now)


def _may_hold_surrogates(content: bytes) -> bool:
    """Whether a JSON body may decode to a lone surrogate (a cheap test on its bytes,
    so a large reply without one is not walked)."""
    if json.detect_encoding(content) not in ("utf-8", "utf-8-sig"):
        return True  # a UTF-16/32 body: its code units are not matched here, walk it
    if b"\\u" not in content and b"\xed" not in content:
        return False  # the common case, found at memchr speed (a regex took 0.16 s on 8 MB)
    return _SURROGATE_HINT.search(content) is not None


def holds_surrogate(value: Any) -> bool:
    """Whether a decoded JSON value holds a str (a key or a value) with a lone
    surrogate; iterative, as the reply may be nested deep."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _loads(resp: httpx.Response) -> Any:
    """The JSON body of a reply: UTF-8 (or UTF-16/32, as ``json.loads`` detects), or
    in the charset its Content-Type declares."""
    try:
        return json.loads(resp.content)
    except UnicodeDecodeError:
        # e.g. "application/json; charset=ISO-8859-1" from a Java server: valid JSON,
        # and read as UTF-8 it was reported as "a body that is not JSON"
        encoding = (resp.encoding or "utf-8").lower().replace("_", "-")
        if resp.charset_encoding is None or encoding in ("utf-8", "utf8"):
            raise
        return json.loads(resp.text)


def check_base_url(base_url: str, who: str) -> httpx.URL:
    """Parse and validate a base URL (http/https, a host, no credentials in it)."""
    try:
        url = httpx.URL(str(base_url))
    except Exception as exc:  # httpx raises InvalidURL or TypeError
        raise ConfigError(f"{who}: base_url {base_url!r} is not a valid URL ({exc})") from None
    if url.scheme not in ("http", "https") or not url.host:
        raise ConfigError(
            f"{who}: base_url {base_url!r} must be an http:// or https:// URL with a host, "
            "e.g. https://api.openai.com/v1 or http://127.0.0.1:8000/v1"
        )
    if url.userinfo:
        raise ConfigError(
            f"{who}: base_url must not carry credentials; put the API key in the "
            "environment variable named by api_key_env"
        )
    return url


def describe(value: Any, scrub: Callable[[str], str] | None = None) -> str:
    """A short description of a JSON value for error messages (keys of an object,
    the length of a list, or a clipped repr).

    Args:
        value: the value a reply held.
        scrub: applied to the keys and the repr before they are clipped (a
            ``JsonApi``'s ``redact``: a server may echo the key back in any field).
    """
    scrub = scrub or (lambda text: text)
    if isinstance(value, dict):
        keys = ", ".join(sorted(map(str, value))[:8])
        return f"an object with keys [{scrub(keys)}]"
    if isinstance(value, list):
        return f"a list of {len(value)}"
    text = scrub(repr(value))
    return text if len(text) <= 60 else text[:60] + "…"


def display_url(url: httpx.URL) -> str:
    """``host[:port]/path`` of a URL, for names and messages (no scheme, no query)."""
    port = f":{url.port}" if url.port else ""
    return f"{url.host}{port}{url.path.rstrip('/')}"


#: The largest reply body ``JsonApi`` reads by default (see its ``max_response_bytes``).
MAX_RESPONSE_BYTES = 64 * 2**20


class JsonApi:
    """POSTs JSON to an OpenAI-compatible API with the retry and error rules above.

    Args:
        base_url: e.g. ``https://api.openai.com/v1``; paths are appended to it.
        who: names the caller in messages and logs (never contains the key).
        error: the MemlabError subclass raised on failure.
        api_key_env: name of the environment variable holding the API key; None
            or "" sends no key (local servers). If named, it must be set.
        api_key_header: ``Authorization`` sends ``Bearer <key>``; any other header
            name (e.g. Azure's ``api-key``) sends the bare key.
        timeout: seconds for connecting, and for each read or write.
        retry: the RetryPolicy.
        client: an httpx.Client to use (tests, proxies, custom TLS); not closed by us.
        transport: an httpx transport for a client we create (e.g. MockTransport).
        sleep: replaces ``time.sleep`` (tests).
        seed: seeds the jitter (None: random).
        max_response_bytes: the largest reply body read (after any content
            encoding is undone); a larger one is an error, not a retry, and is never
            held in memory whole. The default, 64 MiB, is eight times a full batch
            of 128 embeddings of 3,072 dimensions as JSON.
    """

    def __init__(
        self,
        base_url: str,
        *,
        who: str,
        error: type[MemlabError],
        api_key_env: str | None = "OPENAI_API_KEY",
        api_key_header: str = "Authorization",
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        client: httpx.Client | None = None,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] | None = None,
        seed: int | None = None,
        max_response_bytes: int = MAX_RESPONSE_BYTES,
    ) -> None:
        self.who = who
        if (
            isinstance(max_response_bytes, bool)
            or not isinstance(max_response_bytes, int)
            or max_response_bytes < 1
        ):
            raise ConfigError(
                f"{who}: max_response_bytes must be a positive integer, got {max_response_bytes!r}"
            )
        self.max_response_bytes = max_response_bytes
        self.error = error
        self.base_url = check_base_url(base_url, who)
        # nan and inf passed "timeout > 0", then every request failed with a bare
        # ValueError / OverflowError from the socket layer
        if not _finite(timeout) or timeout <= 0:
            raise ConfigError(
                f"{who}: timeout must be a finite number > 0 seconds, got {timeout!r}"
            )
        self.timeout = float(timeout)
        self.retry = retry or RetryPolicy()
        self.api_key_env = api_key_env or None
        if self.api_key_env is not None and not (
            isinstance(api_key_header, str) and _HEADER_NAME.fullmatch(api_key_header)
        ):
            # Checked before the first request: None was a bare AttributeError there,
            # "Ä" a bare UnicodeEncodeError, and "api key" an EmbedderError (exit 3).
            raise ConfigError(
                f"{who}: api_key_header must be an HTTP header name (letters, digits and "
                f"-, e.g. Authorization or api-key), got {api_key_header!r}"
            )
        self.api_key_header = api_key_header
        self._api_key()  # fail now, not halfway through a run
        self._sleep = sleep or time.sleep
        self._rng = random.Random(seed)
        self._own_client = client is None
        self._client = client or httpx.Client(
            timeout=httpx.Timeout(self.timeout), transport=transport
        )
        self.requests = 0  # HTTP requests sent, retries included
        self.retries = 0
        self._counting = threading.Lock()  # a client may be shared by threads

    def __repr__(self) -> str:
        return (
            f"JsonApi(base_url={str(self.base_url)!r}, api_key_env={self.api_key_env!r}, "
            f"timeout={self.timeout}, retry={self.retry})"
        )

    # -- the key -------------------------------------------------------------------
    def _api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        key = os.environ.get(self.api_key_env, "").strip()
        if not key:
            raise ConfigError(
                f"{self.who}: the environment variable {self.api_key_env} is not set; export "
                "the API key under that name, or set api_key_env to the variable that holds "
                "it (null/empty for an endpoint that needs no key)"
            )
        if not key.isascii() or not key.isprintable():
            # httpx would reject the header with a message that quotes the value.
            raise ConfigError(
                f"{self.who}: the API key in {self.api_key_env} contains characters that are "
                "not allowed in an HTTP header (non-ASCII, a newline or a control character)"
            )
        return key

    def _headers(self) -> dict[str, str]:
        key = self._api_key()
        if key is None:
            return {}
        if self.api_key_header.lower() == "authorization":
            return {"Authorization": f"Bearer {key}"}
        return {self.api_key_header: key}

    def describe(self, value: Any) -> str:
        """``describe`` of a value a reply held, with the API key scrubbed (a server
        may echo it back in any field)."""
        return describe(value, self.redact)

    def redact(self, text: str) -> str:
        """``text`` with the API key (if any appears in it) replaced by ``[redacted]``."""
        if self.api_key_env is None:
            return text
        key = os.environ.get(self.api_key_env, "").strip()
        if len(key) >= 4 and key in text:
            text = text.replace(key, "[redacted]")
        return text

    # -- requests ------------------------------------------------------------------
    def url(self, path: str) -> httpx.URL:
        return self.base_url.copy_with(path=self.base_url.path.rstrip("/") + "/" + path.lstrip("/"))

    def post(self, path: str, payload: Mapping[str, Any]) -> Any:
        """POST ``payload`` as JSON to ``base_url/path``; return the decoded JSON body.

        Raises:
            ConfigError: the key's environment variable is unset or unusable.
            MemlabError: (the configured subclass) on a non-retryable answer, on a
                body that is not JSON, or once the retries are used up.
        """
        return self._request("POST", path, payload)

    def get(self, path: str, *, max_retries: int | None = None) -> Any:
        """GET ``base_url/path``; return the decoded JSON body (same rules as ``post``).

        Args:
            path: appended to ``base_url`` (e.g. ``"models"``).
            max_retries: overrides the policy's retries for this request (a quick
                reachability check should not back off for a minute).
        """
        return self._request("GET", path, None, max_retries)

    def _request(
        self,
        method: str,
        path: str,
        payload: Mapping[str, Any] | None,
        max_retries: int | None = None,
    ) -> Any:
        url = self.url(path)
        where = display_url(url)
        headers = self._headers()
        limit = self.retry.max_retries if max_retries is None else max_retries
        retry = 0
        while True:
            retry_after: float | None = None
            try:
                with self._counting:
                    self.requests += 1
                resp = self._send(method, url, payload, headers, where)
            except (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                problem = self.redact(f"{type(exc).__name__}: {exc}".rstrip(": "))
            except httpx.HTTPError as exc:
                raise self.error(
                    self.redact(
                        f"{self.who}: request to {where} failed: {type(exc).__name__}: {exc}"
                    )
                ) from None
            else:
                status = resp.status_code
                if 200 <= status < 300:
                    return self._decode(resp, where)
                if not is_retryable_status(status):
                    raise self.error(self._status_message(resp, where)) from None
                problem = f"HTTP {status}: {self.server_message(resp)}"
                retry_after = parse_retry_after(resp.headers)
            if retry >= limit:
                raise self.error(
                    f"{self.who}: {where} still failing after {retry + 1} attempt(s) "
                    f"(last: {problem}); the endpoint is overloaded or unreachable: retry later, "
                    "or raise max_retries or timeout"
                )
            if retry_after is not None:
                if retry_after > self.retry.max_delay:
                    raise self.error(
                        f"{self.who}: {where} asked to retry after {retry_after:.0f} s "
                        f"(Retry-After), more than max_delay={self.retry.max_delay:g} s (last: "
                        f"{problem}); retry later or raise max_delay"
                    )
                delay = retry_after
            else:
                delay = self.retry.backoff_delay(retry, self._rng)
            retry += 1
            with self._counting:
                self.retries += 1
            log.warning(
                "%s: %s from %s; retry %d of %d in %.2f s",
                self.who,
                problem,
                where,
                retry,
                limit,
                delay,
            )
            self._sleep(delay)

    def _send(
        self,
        method: str,
        url: httpx.URL,
        payload: Mapping[str, Any] | None,
        headers: dict[str, str],
        where: str,
    ) -> httpx.Response:
        """One request, its body read up to ``max_response_bytes`` (a streamed read,
        so a runaway or hostile endpoint cannot fill the memory); returns the
        response with its body read."""
        request = self._client.build_request(method, url, json=payload, headers=headers)
        resp = self._client.send(request, stream=True)
        try:
            cap = self.max_response_bytes
            declared = resp.headers.get("content-length", "")
            if (
                declared.isdigit()
                and int(declared) > cap
                and "content-encoding" not in resp.headers
            ):
                raise self._too_large(where, f"it declares {int(declared):,} bytes")
            chunks, size = [], 0
            for chunk in resp.iter_bytes():
                size += len(chunk)
                if size > cap:
                    raise self._too_large(where, f"more than {cap:,} bytes arrived")
                chunks.append(chunk)
        finally:
            resp.close()
        # the body is decoded already: without these headers httpx would decode it again
        kept = [
            (k, v)
            for k, v in resp.headers.multi_items()
            if k.lower() not in ("content-encoding", "content-length", "transfer-encoding")
        ]
        return httpx.Response(
            resp.status_code, headers=kept, content=b"".join(chunks), request=request
        )

    def _too_large(self, where: str, what: str) -> MemlabError:
        return self.error(
            f"{self.who}: the reply from {where} is larger than max_response_bytes="
            f"{self.max_response_bytes:,} ({what}); the endpoint is misbehaving, or raise "
            "max_response_bytes for it"
        )

    def _decode(self, resp: httpx.Response, where: str) -> Any:
        try:
            body = _loads(resp)
        except JSON_FAILURES as exc:
            # scrubbed before it is clipped: a key cut at the edge would escape redact()
            snippet = self.redact(resp.text)[:_SNIPPET]
            what = (
                "UTF-8 (nor in a charset it declares)" if isinstance(exc, UnicodeError) else "JSON"
            )
            raise self.error(
                f"{self.who}: {where} answered HTTP {resp.status_code} with a body that is not "
                f"{what} ({snippet!r}); check that base_url points at an OpenAI-compatible API "
                "(it usually ends in /v1)"
            ) from None
        if _may_hold_surrogates(resp.content) and holds_surrogate(body):
            # Such text fails, as a bare UnicodeEncodeError, wherever it is written
            # next: the model cache, a store, a results file.
            raise self.error(
                f"{self.who}: {where} answered HTTP {resp.status_code} with JSON text that is "
                "not valid Unicode (a lone surrogate, e.g. the escape \\ud83d without its "
                "pair); the endpoint is misbehaving: check its version, or report it to its "
                "maintainers"
            )
        if isinstance(body, dict) and body.get("error") and not body.keys() & _RESULTS:
            # Some proxies answer a failure with a 200 and OpenAI's error object: the
            # caller would report a reply "of the wrong shape" and lose the message.
            raise self.error(
                f"{self.who}: {where} answered HTTP {resp.status_code} with an error instead "
                f"of a result: {self.server_message(resp)}; check base_url, the model name "
                "and the key"
            )
        return body

    def server_message(self, resp: httpx.Response) -> str:
        """The error message a server put in its answer (OpenAI's ``error.message``,
        or ``message``/``detail``, else the start of the body), key scrubbed."""
        msg: Any = None
        try:
            body = _loads(resp)  # in the charset it declares, as a result's body
        except JSON_FAILURES:
            body = None
        if isinstance(body, dict):
            err = body.get("error")
            if isinstance(err, dict):
                msg = err.get("message") or err.get("code") or err.get("type")
            elif isinstance(err, str):
                msg = err
            msg = msg or body.get("message") or body.get("detail")
        if not msg:
            msg = resp.text.strip() or resp.reason_phrase or "no message"
        # scrubbed before it is clipped: a key cut at the edge would escape redact()
        text = self.redact(str(msg) if not isinstance(msg, str) else msg)
        if len(text) > _SNIPPET:
            text = text[:_SNIPPET] + "…"
        return text

    def _status_message(self, resp: httpx.Response, where: str) -> str:
        status = resp.status_code
        hint = {
            400: "check the model name and the request settings",
            401: f"check the API key in the environment variable {self.api_key_env}",
            403: f"the key in {self.api_key_env} may lack access to this model",
            404: "check base_url (usually ending in /v1) and the model name",
            413: "the request is too large: lower max_batch",
            422: "check the model name and the request settings",
        }.get(status, "check base_url, the model name and the key")
        return f"{self.who}: {where} answered HTTP {status}: {self.server_message(resp)}; {hint}"

    def close(self) -> None:
        """Close the HTTP client if this object created it."""
        if self._own_client:
            self._client.close()

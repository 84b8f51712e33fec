"""memlab.memory.models.http: the shared retrying JSON client (httpx.MockTransport)."""

from __future__ import annotations

import email.utils
import json
import logging
import random
import time
from collections.abc import Callable

import httpx
import pytest

from memlab.errors import ConfigError, EmbedderError, SummarizerError
from memlab.memory.models.http import (
    JsonApi,
    RetryPolicy,
    check_base_url,
    is_retryable_status,
    parse_retry_after,
)

KEY = "sk-test-5f3c9a1e7d2b"
KEY_ENV = "MEMLAB_TEST_HTTP_KEY"

Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler that answers from a script and records requests."""

    def __init__(self, *answers: httpx.Response | Exception | Handler) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        if callable(answer):
            return answer(request)
        return answer


def ok(body: object | None = None) -> httpx.Response:
    return httpx.Response(200, json={"ok": True} if body is None else body)


def error(
    status: int, message: str = "boom", headers: dict[str, str] | None = None
) -> httpx.Response:
    return httpx.Response(
        status, json={"error": {"message": message, "type": "x"}}, headers=headers or {}
    )


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


def make_api(
    rec: Recorder, *, max_retries: int = 3, error_cls: type = EmbedderError, **kw: object
) -> tuple[JsonApi, list[float]]:
    sleeps: list[float] = []
    api = JsonApi(
        kw.pop("base_url", "https://api.example.test/v1"),  # type: ignore[arg-type]
        who="Tester(model-x)",
        error=error_cls,
        api_key_env=kw.pop("api_key_env", KEY_ENV),  # type: ignore[arg-type]
        retry=RetryPolicy(max_retries=max_retries, backoff=0.5, max_delay=8.0),
        transport=httpx.MockTransport(rec),
        sleep=sleeps.append,
        seed=1,
        **kw,  # type: ignore[arg-type]
    )
    return api, sleeps


# -- policy and parsing --------------------------------------------------------------
def test_backoff_is_exponential_with_jitter_and_capped() -> None:
    policy = RetryPolicy(max_retries=10, backoff=0.5, max_delay=4.0)
    rng = random.Random(0)
    for retry in range(8):
        base = min(4.0, 0.5 * 2**retry)
        delays = [policy.backoff_delay(retry, rng) for _ in range(200)]
        assert all(base / 2 <= d <= base for d in delays)
        assert max(delays) - min(delays) > base / 4  # jittered, not constant


def test_retry_policy_rejects_bad_values() -> None:
    with pytest.raises(ConfigError, match="max_retries"):
        RetryPolicy(max_retries=-1)
    with pytest.raises(ConfigError, match="backoff"):
        RetryPolicy(backoff=-0.1)
    with pytest.raises(ConfigError, match="max_delay"):
        RetryPolicy(max_delay=float("nan"))
    # inf passed, and the first long wait was time.sleep(inf): OverflowError
    for bad in (float("inf"), "1"):
        with pytest.raises(ConfigError, match="max_delay must be a finite number"):
            RetryPolicy(max_delay=bad)  # type: ignore[arg-type]
        with pytest.raises(ConfigError, match="backoff must be a finite number"):
            RetryPolicy(backoff=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("timeout", [float("nan"), float("inf"), "30", True, 0, -1])
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(timeout: object) -> None:
    # nan and inf were accepted, then every request failed with a bare ValueError
    # ("Invalid value NaN") or OverflowError ("timestamp out of range") from the
    # socket layer; "30" was a bare TypeError
    with pytest.raises(ConfigError, match=r"timeout must be a finite number > 0 seconds"):
        make_api(Recorder(ok()), timeout=timeout)


def test_retryable_statuses() -> None:
    assert all(is_retryable_status(s) for s in (408, 409, 429, 500, 502, 503, 504, 599))
    assert not any(is_retryable_status(s) for s in (200, 301, 400, 401, 403, 404, 413, 422))


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "3"}) == 3.0
    assert parse_retry_after({"retry-after": " 1.5 "}) == 1.5
    assert parse_retry_after({"retry-after": "-4"}) == 0.0
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    # "nan" is a float to Python; it meant a retry without any wait
    assert parse_retry_after({"retry-after": "nan"}) is None
    assert parse_retry_after({"retry-after-ms": "NaN", "retry-after": "2"}) == 2.0
    now = 1_800_000_000.0
    date = email.utils.formatdate(now + 7, usegmt=True)
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(7.0)
    past = email.utils.formatdate(now - 60, usegmt=True)
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0


def test_a_retry_after_date_without_a_zone_is_gmt(monkeypatch: pytest.MonkeyPatch) -> None:
    # The asctime form of an HTTP date names no zone; it was read as local time, so
    # on a machine five hours behind UTC a 7 s wait became 18,007 s (more than
    # max_delay: the request failed at once), and ahead of UTC an immediate retry.
    monkeypatch.setenv("TZ", "XYZ+5")  # POSIX: UTC-5, needs no zone database
    time.tzset()
    try:
        now = 1_800_000_000.0
        later = time.gmtime(now + 7)
        for form in ("%a %b %d %H:%M:%S %Y", "%a, %d %b %Y %H:%M:%S -0000"):
            date = time.strftime(form, later)
            assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(7.0)
    finally:
        monkeypatch.undo()
        time.tzset()


def test_check_base_url() -> None:
    assert str(check_base_url("http://127.0.0.1:8000/v1", "x")) == "http://127.0.0.1:8000/v1"
    for bad in ["ftp://host/v1", "api.openai.com/v1", "", "http:///v1"]:
        with pytest.raises(ConfigError, match="base_url"):
            check_base_url(bad, "x")
    with pytest.raises(ConfigError, match="credentials") as info:
        check_base_url("https://user:hunter2@host/v1", "x")
    assert "hunter2" not in str(info.value)


def test_url_joining_keeps_path_and_query() -> None:
    rec = Recorder(ok())
    api, _ = make_api(rec, base_url="https://h.test/openai/v1/?api-version=2024-02-01")
    api.post("embeddings", {})
    assert str(rec.requests[0].url) == "https://h.test/openai/v1/embeddings?api-version=2024-02-01"


# -- the happy path and the key ------------------------------------------------------
def test_posts_json_with_bearer_key() -> None:
    rec = Recorder(ok({"data": [1, 2]}))
    api, sleeps = make_api(rec)
    assert api.post("embeddings", {"model": "m", "input": ["a"]}) == {"data": [1, 2]}
    req = rec.requests[0]
    assert req.method == "POST"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert json.loads(req.content) == {"model": "m", "input": ["a"]}
    assert sleeps == [] and api.requests == 1 and api.retries == 0


def test_other_key_header_and_no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    rec = Recorder(ok())
    api, _ = make_api(rec, api_key_header="api-key")
    api.post("x", {})
    assert rec.requests[0].headers["api-key"] == KEY
    assert "authorization" not in rec.requests[0].headers
    monkeypatch.delenv(KEY_ENV)
    api, _ = make_api(rec, api_key_env=None)
    api.post("x", {})
    assert "authorization" not in rec.requests[-1].headers


@pytest.mark.parametrize("header", [None, "", "api key", "x\nY", "Ä", "x:y", 5])
def test_a_key_header_that_is_not_a_header_name_is_a_config_error(header: object) -> None:
    # It failed only at the first request: None as a bare AttributeError, "Ä" as a
    # bare UnicodeEncodeError, "api key" as an EmbedderError (exit 3, not 2).
    with pytest.raises(ConfigError, match="api_key_header must be an HTTP header name"):
        make_api(Recorder(ok()), api_key_header=header)


def test_no_key_needs_no_key_header() -> None:
    api, _ = make_api(Recorder(ok()), api_key_env=None, api_key_header=None)
    assert api.post("x", {}) == {"ok": True}


def test_missing_or_unusable_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ConfigError, match=f"{KEY_ENV} is not set"):
        make_api(Recorder(ok()))
    monkeypatch.setenv(KEY_ENV, "sk-abc\ndef")
    with pytest.raises(ConfigError, match="not allowed in an HTTP header") as info:
        make_api(Recorder(ok()))
    assert "sk-abc" not in str(info.value)


# -- retries ---------------------------------------------------------------------------
@pytest.mark.parametrize("status", [429, 500, 502, 503, 504, 408])
def test_retries_retryable_statuses_then_succeeds(status: int) -> None:
    rec = Recorder(error(status), error(status), ok())
    api, sleeps = make_api(rec)
    assert api.post("embeddings", {}) == {"ok": True}
    assert len(rec.requests) == 3 and api.retries == 2
    # backoff 0.5 s then 1 s, each jittered into [b/2, b]
    assert 0.25 <= sleeps[0] <= 0.5 and 0.5 <= sleeps[1] <= 1.0


@pytest.mark.parametrize(
    "exc",
    [
        httpx.ReadTimeout("timed out"),
        httpx.ConnectTimeout("timed out"),
        httpx.ConnectError("connection refused"),
        httpx.RemoteProtocolError("server disconnected"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_retries_timeouts_and_connection_errors(exc: Exception) -> None:
    rec = Recorder(exc, ok())
    api, sleeps = make_api(rec)
    assert api.post("embeddings", {}) == {"ok": True}
    assert len(rec.requests) == 2 and len(sleeps) == 1


def test_gives_up_after_max_retries_with_the_last_problem() -> None:
    rec = Recorder(error(503, "overloaded, try later"))
    api, sleeps = make_api(rec, max_retries=3)
    with pytest.raises(EmbedderError) as info:
        api.post("embeddings", {})
    msg = str(info.value)
    assert "still failing after 4 attempt(s)" in msg
    assert "HTTP 503: overloaded, try later" in msg and "max_retries" in msg
    assert len(rec.requests) == 4 and len(sleeps) == 3


def test_timeouts_exhausted() -> None:
    rec = Recorder(httpx.ReadTimeout("read timed out"))
    api, _ = make_api(rec, max_retries=1, error_cls=SummarizerError)
    with pytest.raises(SummarizerError, match="ReadTimeout: read timed out"):
        api.post("chat/completions", {})
    assert len(rec.requests) == 2


def test_no_retries_when_disabled() -> None:
    rec = Recorder(error(500))
    api, sleeps = make_api(rec, max_retries=0)
    with pytest.raises(EmbedderError, match="after 1 attempt"):
        api.post("x", {})
    assert len(rec.requests) == 1 and sleeps == []


def test_honours_retry_after_seconds_and_date() -> None:
    now = email.utils.formatdate(usegmt=True)
    rec = Recorder(
        error(429, headers={"Retry-After": "3"}),
        error(503, headers={"Retry-After": now}),
        error(429, headers={"retry-after-ms": "1500"}),
        ok(),
    )
    api, sleeps = make_api(rec)
    api.post("x", {})
    assert sleeps[0] == 3.0
    assert 0.0 <= sleeps[1] <= 1.0  # a date at "now" (second resolution)
    assert sleeps[2] == 1.5


def test_retry_after_beyond_max_delay_fails_clearly() -> None:
    rec = Recorder(error(429, "slow down", headers={"Retry-After": "3600"}), ok())
    api, sleeps = make_api(rec)
    with pytest.raises(EmbedderError, match=r"retry after 3600 s \(Retry-After\).*max_delay=8"):
        api.post("x", {})
    assert sleeps == [] and len(rec.requests) == 1


# -- errors that are not retried ------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "hint"),
    [
        (400, "check the model name"),
        (401, f"check the API key in the environment variable {KEY_ENV}"),
        (403, "may lack access"),
        (404, "check base_url"),
        (413, "lower max_batch"),
    ],
)
def test_other_4xx_fail_at_once_with_the_server_message(status: int, hint: str) -> None:
    rec = Recorder(error(status, "The model `nope` does not exist"))
    api, sleeps = make_api(rec)
    with pytest.raises(EmbedderError) as info:
        api.post("embeddings", {})
    msg = str(info.value)
    assert f"HTTP {status}: The model `nope` does not exist" in msg and hint in msg
    assert "Tester(model-x)" in msg and "api.example.test/v1/embeddings" in msg
    assert len(rec.requests) == 1 and sleeps == []


def test_server_message_shapes() -> None:
    for resp, expected in [
        (httpx.Response(400, json={"error": "plain string error"}), "plain string error"),
        (httpx.Response(422, json={"detail": "field required"}), "field required"),
        (httpx.Response(400, text="<html>bad gateway</html>"), "<html>bad gateway</html>"),
        (httpx.Response(400, content=b""), "Bad Request"),
        (httpx.Response(400, text="x" * 1000), "x" * 300 + "…"),
    ]:
        api, _ = make_api(Recorder(resp))
        with pytest.raises(EmbedderError) as info:
            api.post("x", {})
        assert expected in str(info.value)


def test_body_that_is_not_json() -> None:
    rec = Recorder(httpx.Response(200, text="<html>login page</html>"))
    api, _ = make_api(rec)
    with pytest.raises(EmbedderError, match="not JSON.*login page.*ends in /v1"):
        api.post("x", {})


def test_a_body_in_the_charset_it_declares_is_read_in_it() -> None:
    # Valid JSON in ISO-8859-1, declared so, was read as UTF-8 only and reported as
    # "a body that is not JSON".
    body = '{"t": "caf\u00e9"}'.encode("latin-1")
    declared = {"content-type": "application/json; charset=ISO-8859-1"}
    api, _ = make_api(Recorder(httpx.Response(200, content=body, headers=declared)))
    assert api.post("x", {}) == {"t": "caf\u00e9"}
    # an error's message too (the whole body was quoted instead)
    error_body = '{"error": {"message": "mod\u00e8le inconnu", "type": "x"}}'.encode("latin-1")
    api, _ = make_api(Recorder(httpx.Response(404, content=error_body, headers=declared)))
    with pytest.raises(EmbedderError, match="answered HTTP 404: mod\u00e8le inconnu; check"):
        api.post("x", {})
    # undeclared, it is not UTF-8: said so
    api, _ = make_api(Recorder(httpx.Response(200, content=body)))
    with pytest.raises(EmbedderError, match=r"a body that is not UTF-8 \(nor in a charset"):
        api.post("x", {})


def test_body_nested_too_deep_for_json() -> None:
    # json.loads raises RecursionError (not ValueError) past ~1,000 levels; a
    # broken or hostile server's body must still be a clear EmbedderError, both
    # on a 200 (the body) and on an error status (its message).
    deep = "[" * 100_000
    api, _ = make_api(Recorder(httpx.Response(200, text=deep)))
    with pytest.raises(EmbedderError, match=r"answered HTTP 200 with a body that is not JSON"):
        api.post("x", {})
    api, _ = make_api(Recorder(httpx.Response(400, text=deep)))
    with pytest.raises(EmbedderError, match=r"answered HTTP 400: \[\[\["):
        api.post("x", {})


def test_text_that_is_not_valid_unicode_is_an_error() -> None:
    # JSON may escape half a surrogate pair (an answer cut inside an emoji); the str
    # json decodes cannot be encoded as UTF-8, so the model cache's write (or a
    # store's, or a results file's) failed with a bare UnicodeEncodeError.
    cut = b'{"choices": [{"message": {"content": "Tea \\ud83d"}}]}'
    for body in (cut, b'{"a": ["x", {"\\udc00": 1}]}', b'["\xed\xa0\xbd"]'):
        api, _ = make_api(Recorder(httpx.Response(200, content=body)))
        with pytest.raises(
            EmbedderError, match=r"HTTP 200 with JSON text that is not valid Unicode"
        ):
            api.post("x", {})
    # a whole pair, escaped or not, is a character like any other
    pair = '{"t": "Tea \\ud83c\\udf75 \U0001f375"}'.encode()
    api, _ = make_api(Recorder(httpx.Response(200, content=pair)))
    assert api.post("x", {}) == {"t": "Tea \U0001f375 \U0001f375"}


def test_a_200_that_carries_an_error_object_reports_the_server_message() -> None:
    # Some proxies answer a failure with a 200 and OpenAI's error object: it came
    # back as a result, and each caller said "no 'data' list (got an object with
    # keys [error])", losing what the server said (the endpoint check even passed).
    for body in ({"error": {"message": f"Provider returned error for {KEY}", "code": 502}},
                 {"error": "model not loaded"}):  # fmt: skip
        rec = Recorder(ok(body))
        api, _ = make_api(rec)
        with pytest.raises(
            EmbedderError, match=r"HTTP 200 with an error instead of a result: "
        ) as info:
            api.post("x", {})
        assert KEY not in str(info.value) and len(rec.requests) == 1
    assert "model not loaded" in str(info.value)
    # an empty or null error next to a result is a result
    for body in ({"error": None, "data": []}, {"error": {}, "choices": [1]}):
        api, _ = make_api(Recorder(ok(body)))
        assert api.post("x", {}) == body


def test_unretryable_transport_error() -> None:
    rec = Recorder(httpx.UnsupportedProtocol("bad scheme"))
    api, _ = make_api(rec)
    with pytest.raises(EmbedderError, match="request to .* failed: UnsupportedProtocol"):
        api.post("x", {})
    assert len(rec.requests) == 1


# -- the key never leaks --------------------------------------------------------------
def test_key_never_in_logs_reprs_or_errors(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx's included
    echo = f"Incorrect API key provided: {KEY}"
    rec = Recorder(
        error(503, echo),
        httpx.ConnectError(f"proxy refused {KEY}"),
        error(401, echo),
    )
    api, _ = make_api(rec)
    with pytest.raises(EmbedderError) as info:
        api.post("embeddings", {"input": ["x"]})
    assert rec.requests[0].headers["authorization"] == f"Bearer {KEY}"  # it was sent
    assert "Incorrect API key provided: [redacted]" in str(info.value)
    assert "[redacted]" in caplog.text  # the retry warnings were logged, scrubbed
    for text in [str(info.value), repr(info.value), caplog.text, repr(api), str(vars(api))]:
        assert KEY not in text
    assert api.redact(f"a {KEY} b") == "a [redacted] b"


def test_a_key_cut_at_the_edge_of_a_clipped_snippet_is_still_scrubbed() -> None:
    # the message is clipped to 300 characters: clipping first left the start of
    # a key that straddles the edge ("sk-test-5f") unscrubbed
    pad = "x" * 290 + " " + KEY
    for answer in (httpx.Response(200, text=pad), error(400, pad)):
        api, _ = make_api(Recorder(answer))
        with pytest.raises(EmbedderError) as info:
            api.post("embeddings", {"input": ["x"]})
        assert KEY[:10] not in str(info.value) and "[redacted" in str(info.value)


def test_a_reply_larger_than_max_response_bytes_is_an_error_not_a_retry() -> None:
    big = b'{"data": "' + b"x" * 5000 + b'"}'
    # declared by Content-Length, or only found while reading (no length given)
    for answer in (
        httpx.Response(200, content=big),
        httpx.Response(200, content=iter([big[:3000], big[3000:]])),
    ):
        rec = Recorder(answer)
        api, sleeps = make_api(rec, max_response_bytes=4096)
        with pytest.raises(EmbedderError, match="larger than max_response_bytes=4,096"):
            api.post("x", {})
        assert len(rec.requests) == 1 and sleeps == []
    api, _ = make_api(Recorder(httpx.Response(200, content=big)), max_response_bytes=len(big))
    assert api.post("x", {}) == {"data": "x" * 5000}
    with pytest.raises(ConfigError, match="max_response_bytes"):
        make_api(Recorder(ok()), max_response_bytes=0)


def test_a_compressed_reply_is_decoded_once_and_capped_as_decoded() -> None:
    import gzip

    body = json.dumps({"data": "y" * 10_000}).encode()
    packed = gzip.compress(body)
    reply = httpx.Response(200, content=packed, headers={"Content-Encoding": "gzip"})
    api, _ = make_api(Recorder(reply))
    assert api.post("x", {}) == {"data": "y" * 10_000}
    # a small compressed body that unpacks past the cap (a zip bomb) is refused
    reply = httpx.Response(200, content=packed, headers={"Content-Encoding": "gzip"})
    api, _ = make_api(Recorder(reply), max_response_bytes=len(packed) * 2)
    with pytest.raises(EmbedderError, match="more than"):
        api.post("x", {})

"""A fake OpenAI-compatible server for tests, on a real socket (127.0.0.1, random port).

It speaks just enough of the protocol for memlab's clients:

- ``POST /v1/embeddings``: ``HashEmbedder`` vectors (``dims`` of the server, or the
  request's ``dimensions``), one per input, each with its ``index``;
- ``POST /v1/chat/completions``: ``ExtractiveSummarizer`` applied to the last user
  message's content, with the word limit read from the system prompt's
  "under N words" (so ``OpenAISummarizer`` against this server returns exactly
  what ``ExtractiveSummarizer(max_words=N)`` returns in process).

So a MemoryLayer using ``OpenAIEmbedder`` + ``OpenAISummarizer`` against it must
behave exactly like one using ``HashEmbedder`` + ``ExtractiveSummarizer``.

Other chat clients (the consolidator, a judge, a reader) script the chat answers
with ``on_chat``: a script matches requests (by a substring of the system prompt,
or a predicate over the request body) and answers with fixed content or with a
function of the body. Scripts are tried newest first; a request no script matches
gets the summarizer's answer. The scripts the tests use (a consolidator's
mem0-style events, a reader, judges) are in ``tests.fake_answers``.

Usage::

    from tests.fake_openai import FakeOpenAI

    with FakeOpenAI(api_key="sk-test") as server:      # starts a thread, stops on exit
        monkeypatch.setenv("FAKE_OPENAI_KEY", "sk-test")
        emb = OpenAIEmbedder(server.base_url, model="hash", dims=384,
                             api_key_env="FAKE_OPENAI_KEY")
        server.fail("embeddings", status=503, times=2)   # the next two embeddings calls fail
        server.fail("embeddings", status=429, headers={"Retry-After": "0"})
        server.fail("chat/completions", delay=5)         # stall (client timeouts)
        server.fail("embeddings", drop=True)             # close without answering
        server.fail("embeddings", status=400, after=2)   # let two through, fail the third
        ...
        server.requests   # every request received: Received(path, body, headers)
        server.on_chat("memory manager", {"memory": []})  # scripted chat answers
        server.on_chat(lambda body: body.get("model") == "judge", lambda body: "yes")
        server.on_chat("memory manager", "The answer is", finish="length")  # cut short

``latency`` makes every chat answer take that long (the server's own latency);
``max_in_flight`` is the most requests it was serving at once, and
``GET /v1/models`` lists ``models``.

Faults are consumed in the order they were added, per path. With ``api_key`` set,
a request without ``Authorization: Bearer <api_key>`` gets a 401 whose message
echoes the key it was sent (as OpenAI does), to test that clients scrub it.
``python -m tests.fake_openai`` runs one in the foreground and prints its base_url.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from memlab.memory import ExtractiveSummarizer, HashEmbedder

_MAX_WORDS = re.compile(r"under (\d+) words")


class _Server(ThreadingHTTPServer):
    """A client that hangs up mid-answer (a run that stops at its first bad answer
    while other requests are in flight) is normal here: socketserver would print a
    traceback to stderr, which tests that read the CLI's one-line error also read."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@dataclass
class Fault:
    """One injected failure for requests to one path.

    Args:
        status: HTTP status to answer (ignored with ``drop``).
        body: the answer's body (dict -> JSON; str/bytes as is); default an
            OpenAI-style error object.
        headers: extra answer headers, e.g. ``{"Retry-After": "1"}``.
        delay: seconds to wait before answering (makes clients time out).
        drop: close the connection without answering.
        after: let this many matching requests through first.
        times: how many requests this fault applies to.
    """

    status: int = 500
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False
    after: int = 0
    times: int = 1


ChatAnswer = str | dict[str, Any] | list[Any] | Callable[[dict[str, Any]], Any]


@dataclass
class ChatScript:
    """Scripted answers for chat requests that ``match`` (see ``FakeOpenAI.on_chat``).

    Args:
        match: a substring of the system prompt, or a predicate over the request body.
        answer: the assistant's content: a string, a JSON-able object (sent as JSON
            text), or a function of the request body returning either.
        times: answer this many matching requests, then stop matching (None: always).
        finish: the answer's ``finish_reason`` (``length``: cut at max_tokens).
    """

    match: str | Callable[[dict[str, Any]], bool]
    answer: ChatAnswer
    times: int | None = None
    hits: int = 0
    finish: str = "stop"

    def matches(self, body: dict[str, Any]) -> bool:
        if self.times is not None and self.hits >= self.times:
            return False
        if callable(self.match):
            return bool(self.match(body))
        messages = body.get("messages") or []
        system = " ".join(
            str(m.get("content", "")) for m in messages if isinstance(m, dict) and
            m.get("role") == "system"
        )  # fmt: skip
        return self.match in system

    def content(self, body: dict[str, Any]) -> str:
        answer = self.answer(body) if callable(self.answer) else self.answer
        return answer if isinstance(answer, str) else json.dumps(answer)


@dataclass
class Received:
    """One request the server received."""

    path: str
    body: Any
    headers: dict[str, str]


class FakeOpenAI:
    """The fake server (see the module docstring).

    Args:
        dims: default embedding size.
        api_key: if set, requests must send ``Authorization: Bearer <api_key>``.
        models: accepted model names (None: any); others get a 404.
        shuffle: answer embeddings in reverse order (each still with its index).
        max_batch: reject embedding requests with more inputs (400), like real
            servers do.
        latency: seconds every chat completion takes (the server's own latency).
    """

    def __init__(
        self,
        dims: int = 384,
        *,
        api_key: str | None = None,
        models: set[str] | None = None,
        shuffle: bool = False,
        max_batch: int = 2048,
        latency: float = 0.0,
    ) -> None:
        self.latency = latency
        self.in_flight = 0
        self.max_in_flight = 0
        self.chat_seconds: list[float] = []  # each chat request's time in the server
        self._hold = 0
        self._hold_timeout = 0.0
        self._released = threading.Event()
        self.dims = dims
        self.api_key = api_key
        self.models = models
        self.shuffle = shuffle
        self.max_batch = max_batch
        self.requests: list[Received] = []
        self._faults: dict[str, list[Fault]] = {}
        self._scripts: list[ChatScript] = []
        self._seen: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._embedders: dict[int, HashEmbedder] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -----------------------------------------------------------------
    def start(self) -> FakeOpenAI:
        handler = type("Handler", (_Handler,), {"fake": self})
        self._server = _Server(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "start() the server first"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``: what clients take as base_url."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- failure injection ---------------------------------------------------------
    def fail(self, path: str, **fault: Any) -> Fault:
        """Queue a Fault (keyword arguments as in ``Fault``) for ``path``
        (``"embeddings"`` or ``"chat/completions"``)."""
        f = Fault(**fault)
        with self._lock:
            self._faults.setdefault(path.strip("/"), []).append(f)
        return f

    def on_chat(
        self,
        match: str | Callable[[dict[str, Any]], bool],
        answer: ChatAnswer,
        *,
        times: int | None = None,
        finish: str = "stop",
    ) -> ChatScript:
        """Script the answer to chat requests that ``match`` (see ``ChatScript``);
        newer scripts win over older ones."""
        script = ChatScript(match, answer, times, finish=finish)
        with self._lock:
            self._scripts.insert(0, script)
        return script

    def hold(self, n: int, timeout: float = 20.0) -> None:
        """Hold every chat answer until ``n`` requests are in flight at once (then
        answer them all), or until ``timeout`` seconds passed: a client that never
        has ``n`` in flight is slow, and ``max_in_flight`` tells."""
        self._hold, self._hold_timeout = n, timeout
        self._released.clear()

    def calls(self, path: str) -> list[Received]:
        """The requests received for ``path`` (e.g. ``"embeddings"``)."""
        with self._lock:
            return [r for r in self.requests if r.path == "/v1/" + path.strip("/")]

    def _take_fault(self, path: str) -> Fault | None:
        with self._lock:
            queue = self._faults.get(path, [])
            if not queue:
                return None
            f = queue[0]
            if f.after > 0:
                f.after -= 1
                return None
            f.times -= 1
            if f.times <= 0:
                queue.pop(0)
            return f

    # -- the protocol --------------------------------------------------------------
    def embedder(self, dims: int) -> HashEmbedder:
        if dims not in self._embedders:
            self._embedders[dims] = HashEmbedder(dims)
        return self._embedders[dims]

    def embeddings(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not all(isinstance(t, str) for t in inputs):
            return 400, _error("'input' must be a string or a list of strings")
        if not inputs:
            return 400, _error("'input' must not be empty")
        if len(inputs) > self.max_batch:
            return 400, _error(f"too many inputs: {len(inputs)} > {self.max_batch}")
        dims = body.get("dimensions", self.dims)
        vectors = self.embedder(int(dims)).embed(inputs)
        data = [
            {"object": "embedding", "index": i, "embedding": [float(x) for x in v]}
            for i, v in enumerate(vectors)
        ]
        if self.shuffle:
            data.reverse()
        tokens = sum(len(t.split()) for t in inputs)
        return 200, {
            "object": "list",
            "data": data,
            "model": body.get("model"),
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def chat(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            return 400, _error("'messages' must be a non-empty list")
        system = " ".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
        users = [m for m in messages if m.get("role") == "user"]
        if not users:
            return 400, _error("no user message")
        with self._lock:
            script = next((sc for sc in self._scripts if sc.matches(body)), None)
            if script is not None:
                # counted as it is chosen: two requests in flight must not both take
                # the last of a script's ``times``
                script.hits += 1
        finish = "stop"
        if script is not None:
            content, finish = script.content(body), script.finish
        else:
            found = _MAX_WORDS.search(system)
            summarizer = ExtractiveSummarizer(max_words=int(found.group(1)) if found else 120)
            content = summarizer.summarize([str(users[-1].get("content", ""))])
        return 200, {
            "id": f"chatcmpl-fake-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model"),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": sum(_tokens(str(m.get("content", ""))) for m in messages),
                "completion_tokens": _tokens(content),
            },
        }


def _tokens(text: str) -> int:
    return -(-len(text) // 4)  # ceil(chars / 4), as memlab estimates


def _error(message: str, kind: str = "invalid_request_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx expects
    # Headers and body go out in two writes; without this, Nagle's algorithm and
    # delayed ACKs add ~40 ms to every request.
    disable_nagle_algorithm = True
    fake: FakeOpenAI

    def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
        pass

    def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(body, dict | list):
            payload = json.dumps(body).encode()
            ctype = "application/json"
        elif isinstance(body, str):
            payload = body.encode()
            ctype = "text/plain; charset=utf-8"
        else:
            payload = bytes(body or b"")
            ctype = "application/octet-stream"
        try:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(payload)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (a timeout test)

    def do_GET(self) -> None:
        fake = self.fake
        with fake._lock:
            fake.requests.append(Received(self.path, None, dict(self.headers.items())))
        if self.path.rstrip("/") != "/v1/models":
            self._send(404, _error(f"no route {self.path}"))
            return
        if (
            fake.api_key is not None
            and self.headers.get("Authorization") != f"Bearer {fake.api_key}"
        ):
            self._send(401, _error("Incorrect API key provided.", "auth_error"))
            return
        names = sorted(fake.models or ())
        self._send(200, {"object": "list", "data": [{"id": n, "object": "model"} for n in names]})

    def do_POST(self) -> None:
        fake = self.fake
        t0 = time.perf_counter()
        with fake._lock:
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            self._post()
        finally:
            with fake._lock:
                fake.in_flight -= 1
                if self.path.endswith("/chat/completions"):
                    fake.chat_seconds.append(time.perf_counter() - t0)

    def _post(self) -> None:
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        try:
            body = json.loads(raw or b"null")
        except ValueError:
            body = None
        with fake._lock:
            fake.requests.append(Received(self.path, body, dict(self.headers.items())))
        if not self.path.startswith("/v1/"):
            self._send(404, _error(f"no route {self.path}"))
            return
        path = self.path[len("/v1/") :]
        fault = fake._take_fault(path)
        if fault is not None:
            if fault.delay:
                fake._stop.wait(fault.delay)
            if fault.drop:
                self.close_connection = True
                return
            self._send(
                fault.status,
                fault.body if fault.body is not None else _error(f"injected HTTP {fault.status}"),
                fault.headers,
            )
            return
        if fake.api_key is not None:
            auth = self.headers.get("Authorization", "")
            if auth != f"Bearer {fake.api_key}":
                sent = auth.removeprefix("Bearer ")
                self._send(401, _error(f"Incorrect API key provided: {sent}.", "auth_error"))
                return
        if not isinstance(body, dict):
            self._send(400, _error("the body must be a JSON object"))
            return
        model = body.get("model")
        if fake.models is not None and model not in fake.models:
            self._send(404, _error(f"The model `{model}` does not exist", "not_found"))
            return
        if path == "embeddings":
            status, answer = fake.embeddings(body)
        elif path == "chat/completions":
            if fake._hold:
                with fake._lock:
                    if fake.in_flight >= fake._hold:
                        fake._released.set()
                fake._released.wait(fake._hold_timeout)
            if fake.latency:
                fake._stop.wait(fake.latency)
            status, answer = fake.chat(body)
        else:
            status, answer = 404, _error(f"no route {self.path}")
        self._send(status, answer)


if __name__ == "__main__":
    with FakeOpenAI() as server:
        print(f"fake OpenAI-compatible server at {server.base_url} (Ctrl-C stops it)", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass

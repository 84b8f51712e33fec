"""MemoryRecord and its validation (RecallQuery and Hit: test_query.py)."""

from __future__ import annotations

import numpy as np
import pytest

from memlab.errors import InputError
from memlab.memory import MemoryKind, MemoryRecord, Source
from memlab.memory.records import check_scope
from tests.conftest import make_record


def test_enums_and_coercion() -> None:
    r = make_record(kind="semantic", source="web")
    assert r.kind is MemoryKind.SEMANTIC and r.source is Source.WEB
    assert not r.source.trusted and Source.USER.trusted
    assert r.embedding.dtype == np.float32


def test_validation_names_the_field() -> None:
    with pytest.raises(InputError, match="salience"):
        make_record(salience=-0.1).validate()
    with pytest.raises(InputError, match="content is empty"):
        make_record(content="").validate()
    with pytest.raises(InputError, match="unknown memory kind"):
        make_record(kind="dream")
    with pytest.raises(InputError, match="1-D"):
        make_record(embedding=np.zeros((2, 2)))
    with pytest.raises(InputError, match="created_at"):
        make_record(created_at=float("nan")).validate()


def test_scope_rules() -> None:
    assert check_scope("a'%_\x00🙂") == "a'%_\x00🙂"
    for bad in ["", None, 3, "x\udc00"]:
        with pytest.raises(InputError):
            check_scope(bad)


def test_copy_and_same_as() -> None:
    r = make_record(meta={"a": 1})
    c = r.copy(salience=0.9)
    assert not c.same_as(r) and c.copy(salience=r.salience).same_as(r)
    c.meta["a"] = 2
    assert r.meta["a"] == 1


def test_plain_copy_is_equal_and_independent() -> None:
    r = make_record(meta={"a": [1]}, provenance=("t1",))
    c = r.copy()
    assert c.same_as(r) and c is not r and type(c) is type(r)
    c.embedding[0] += 1.0
    c.meta["b"] = 2
    c.access_count += 1
    assert r.embedding[0] != c.embedding[0] and "b" not in r.meta and r.access_count == 0


def test_copy_normalizes_fields_changed_after_construction() -> None:
    r = make_record()
    r.kind = "semantic"  # type: ignore[assignment]
    r.embedding = np.ones(4, dtype=np.float64)
    r.provenance = ["t1"]  # type: ignore[assignment]
    c = r.copy()
    assert c.kind is MemoryKind.SEMANTIC and c.embedding.dtype == np.float32
    assert c.provenance == ("t1",)


def test_same_speaker_only_tells_two_named_speakers_apart() -> None:
    from memlab.memory import same_speaker
    from memlab.memory.records import speaker_of

    def r(speaker: object) -> MemoryRecord:
        meta = {} if speaker is None else {"speaker": speaker}
        return MemoryRecord("x", "hi there", np.ones(4, np.float32), MemoryKind.EPISODIC,
                            "alice", 0.5, 2, 1.0, 1.0, meta=meta)  # fmt: skip

    assert same_speaker(r("Caroline"), r("caroline ")) and not same_speaker(r("Caroline"), r("Mel"))
    assert same_speaker(r(None), r("Mel")) and same_speaker(r(None), r(None))
    assert speaker_of(r(" ")) is None and speaker_of(r(3)) is None and speaker_of(r("Jo")) == "Jo"


def test_untrusted_mask_matches_the_untrusted_codes() -> None:
    from memlab.memory.records import SOURCE_CODES, UNTRUSTED_CODES, untrusted_mask

    codes = np.array([SOURCE_CODES[s] for s in Source] * 3, dtype=np.int8)
    assert untrusted_mask(codes).tolist() == np.isin(codes, UNTRUSTED_CODES).tolist()
    assert untrusted_mask(codes).sum() == 3 * len(UNTRUSTED_CODES) > 0
    assert untrusted_mask(np.zeros(0, dtype=np.int8)).shape == (0,)


def test_kinds_mask_matches_isin_for_every_set_of_kinds() -> None:
    import itertools

    from memlab.memory.records import KIND_CODES, kinds_mask

    codes = np.array([KIND_CODES[k] for k in MemoryKind] * 3, dtype=np.int8)
    for size in range(len(MemoryKind) + 1):
        for kinds in itertools.combinations(MemoryKind, size):
            wanted = np.array([KIND_CODES[k] for k in kinds], dtype=np.int8)
            got = kinds_mask(codes, frozenset(kinds))
            assert got.tolist() == np.isin(codes, wanted).tolist()
            assert got.sum() == 3 * size
    assert kinds_mask(np.zeros(0, dtype=np.int8), frozenset(MemoryKind)).shape == (0,)


def test_new_ids_are_unique_and_sort_in_write_order() -> None:
    from memlab.memory.records import new_id

    ids = [new_id() for _ in range(20_000)]
    assert len(set(ids)) == len(ids)
    assert ids == sorted(ids)  # ties on created_at break by write order in every run
    assert all(len(i) == 32 and int(i, 16) >= 0 for i in ids)

"""InMemoryStore: process memory only, for tests, replays and short-lived agents."""

from __future__ import annotations

from collections.abc import Sequence

from memlab.memory.records import MemoryRecord
from memlab.memory.stores.base import (
    STORES,
    check_dims,
    check_records,
    check_time,
    foreign_ids,
    scoped_ids,
)
from memlab.memory.stores.indexed import IndexedStore


@STORES.register("memory")
class InMemoryStore(IndexedStore):
    """A MemoryStore that lives in process memory and is lost on exit.

    Args:
        scan: how a recall scans a scope's vectors: ``"float32"`` (exact, the
            default), ``"int8"`` (int8 codes scanned by ONNX Runtime, with an error
            bound that keeps the float32 ranking; needs ``memlab[int8]``) or
            ``"bits"`` (sign bits, then an exact float32 re-rank of the nearest
            rows; it pays off only when similarity dominates the score). See
            memlab.memory.stores.indexed.ScanPolicy.
        scan_rerank: rows the ``"bits"`` scan re-ranks with their float32 cosine.
        scan_min_rows: scopes with fewer rows are scanned in float32.
    """

    def put(self, record: MemoryRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        records = check_records(records, "InMemoryStore.put")
        if not records:
            return
        dims = check_dims(records, self._dims, "InMemoryStore.put")
        foreign_ids(records, self._scope_of(records))
        self._dims = dims
        self._apply_put(records)

    def delete(self, scope: str, ids: str | Sequence[str]) -> int:
        return self._apply_delete(scoped_ids(scope, ids), scope)

    def mark_archived(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        return self._apply_archive(ids, check_time(at, "mark_archived"), scope)

    def touch(self, scope: str, ids: str | Sequence[str], at: float) -> int:
        ids = scoped_ids(scope, ids)
        return self._apply_touch(ids, check_time(at, "touch"), scope)

    def size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def __enter__(self) -> InMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

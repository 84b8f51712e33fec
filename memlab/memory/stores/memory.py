"""InMemoryStore: process memory only, for tests, replays and short-lived agents."""

from __future__ import annotations

from collections.abc import Sequence

from memlab.memory.records import MemoryRecord
from memlab.memory.stores.base import STORES, as_ids, check_dims
from memlab.memory.stores.indexed import IndexedStore


@STORES.register("memory")
class InMemoryStore(IndexedStore):
    """A MemoryStore that lives in process memory and is lost on exit."""

    def put(self, record: MemoryRecord) -> None:
        self.put_many([record])

    def put_many(self, records: Sequence[MemoryRecord]) -> None:
        records = list(records)
        if not records:
            return
        self._dims = check_dims(records, self._dims, "InMemoryStore.put")
        self._apply_put(records)

    def delete(self, ids: str | Sequence[str]) -> int:
        return self._apply_delete(as_ids(ids))

    def mark_archived(self, ids: str | Sequence[str], at: float) -> int:
        return self._apply_archive(as_ids(ids), float(at))

    def touch(self, ids: str | Sequence[str], at: float) -> int:
        return self._apply_touch(as_ids(ids), float(at))

    def size_bytes(self) -> int:
        return 0

    def close(self) -> None:
        pass

    def __enter__(self) -> InMemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

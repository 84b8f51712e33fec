"""Memory stores: one contract, several backends."""

from memlab.memory.stores.base import STORES, Candidates, MemoryStore
from memlab.memory.stores.jsonl import JsonlStore
from memlab.memory.stores.memory import InMemoryStore
from memlab.memory.stores.pg import PgVectorStore  # psycopg is imported on use
from memlab.memory.stores.sqlite import SqliteStore

__all__ = [
    "STORES",
    "Candidates",
    "InMemoryStore",
    "JsonlStore",
    "MemoryStore",
    "PgVectorStore",
    "SqliteStore",
]

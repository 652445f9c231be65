"""PostgresStore: runs in PostgreSQL, shared by workers and supervisors on many hosts (extra
``postgres``; psycopg loads only when this package is imported). ``store.py`` is the store;
``connector.py`` its connections, ``append.py`` its appends, ``lease.py`` its lease,
``attempts.py`` its attempt log; ``sql/`` its schema and named queries."""

from __future__ import annotations

from .store import DEFAULT_SCHEMA, DEFAULT_TTL, PostgresStore

__all__ = ["DEFAULT_SCHEMA", "DEFAULT_TTL", "PostgresStore"]

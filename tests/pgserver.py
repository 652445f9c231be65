"""The PostgreSQL server the tests use: ``$AGENTRUN_TEST_PG`` (default the project machines'
``postgresql://postgres@127.0.0.1:5432/test``), a fresh schema per test, dropped after.

Without a server the PostgreSQL tests are skipped, unless ``AGENTRUN_REQUIRE_PG=1`` (set by
``.ci/run``): then they fail.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_reachable: str | None = None  # None: not tried yet; "": reachable; else why not


def dsn() -> str:
    return os.environ.get("AGENTRUN_TEST_PG") or DEFAULT_DSN


def url(schema: str, base: str | None = None) -> str:
    """A store URL for ``schema`` on the test server."""
    base = base or dsn()
    return f"{base}{'&' if '?' in base else '?'}schema={schema}"


def require() -> None:
    """Skip (or, under AGENTRUN_REQUIRE_PG=1, fail) when the server cannot be reached."""
    global _reachable
    if _reachable is None:
        try:
            import psycopg

            with psycopg.connect(dsn(), connect_timeout=5) as conn:
                conn.execute("SELECT 1")
            _reachable = ""
        except Exception as e:  # ImportError included: no psycopg, no PostgreSQL tests
            _reachable = " ".join(str(e).split()) or type(e).__name__
    if _reachable:
        why = f"PostgreSQL at {dsn()} is not reachable: {_reachable}"
        if os.environ.get("AGENTRUN_REQUIRE_PG") == "1":
            pytest.fail(f"{why} (AGENTRUN_REQUIRE_PG=1)")
        pytest.skip(why)


def execute(query: str, *params: object) -> list[tuple]:
    """One statement on the test server, autocommitted; its rows (if any)."""
    import psycopg

    with psycopg.connect(dsn(), autocommit=True) as conn:
        cur = conn.execute(query, params or None)
        return cur.fetchall() if cur.description else []


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A schema name no other test uses; the schema (if it was made) is dropped after."""
    require()
    name = f"da_test_{secrets.token_hex(6)}"
    try:
        yield name
    finally:
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


def waiting_for_a_row(pid: int) -> int:
    """How many server sessions of the store in process ``pid`` wait for a lock (a run's
    row)."""
    rows = execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND application_name LIKE %s",
        f"durableagent pid {pid} %",
    )
    return int(rows[0][0])


class RowHeld:
    """A transaction of another client holding the row lock of run ``run_id`` of the store
    in ``schema`` until ``release()``: whatever a store sends for that run meanwhile waits
    at the server."""

    def __init__(self, schema: str, run_id: str) -> None:
        import psycopg
        from psycopg import sql

        self.conn = psycopg.connect(dsn())
        query = sql.SQL("SELECT 1 FROM {}.runs WHERE run_id = %s FOR UPDATE")
        self.conn.execute(query.format(sql.Identifier(schema)), (run_id,))

    def release(self) -> None:
        self.conn.rollback()
        self.conn.close()

"""The PostgresStore's SQL, kept as SQL (the shape of procrastinate's ``sql/``).

- ``schema.sql``: the whole current schema (tables and functions), version ``SCHEMA_VERSION``.
- ``migrations/NNNN_what.sql``: from version NNNN-1 to NNNN (none yet: version 1 is the first).
- ``queries.sql``: every query the store sends, each under a ``-- name: NAME`` line.

Plain text only: nothing here imports psycopg.
"""

from __future__ import annotations

import re
from pathlib import Path

HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = 1
_NAME = re.compile(r"^-- name: ([a-z_]+)\n", re.MULTILINE)


def parse_queries(text: str) -> dict[str, str]:
    """``{name: query}`` from a file of named queries: the text after each ``-- name:`` line
    up to the next one, without its leading comment lines and its final semicolon."""
    parts = _NAME.split(text)
    queries: dict[str, str] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip().splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        query = "\n".join(lines).strip().removesuffix(";")
        if name in queries or not query:
            raise ValueError(f"queries.sql: {name!r} is empty or named twice")
        queries[name] = query
    return queries


def schema_sql() -> str:
    """The whole current schema."""
    return (HERE / "schema.sql").read_text()


def migrations(after: int) -> list[tuple[int, str]]:
    """``(version, sql)`` of every migration past version ``after``, in order."""
    found = []
    for path in sorted((HERE / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")):
        version = int(path.name[:4])
        if after < version <= SCHEMA_VERSION:
            found.append((version, path.read_text()))
    return found


QUERIES = parse_queries((HERE / "queries.sql").read_text())

"""The PostgresStore's SQL, kept as SQL (the shape of procrastinate's ``sql/``).

- ``schema.sql``: the whole current schema (tables and functions), version ``SCHEMA_VERSION``.
- ``migrations/NNNN_what.sql``: from version NNNN-1 to NNNN.
- ``queries.sql``: every query the store sends, each under a ``-- name: NAME`` line.

Plain text only: nothing here imports psycopg.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
SCHEMA_VERSION = 4
_NAME = re.compile(r"^-- name: ([a-z_]+)\n", re.MULTILINE)
_PARAM = re.compile(r"%\((\w+)\)s")


@dataclass(frozen=True)
class Query:
    """A named query. Written with named parameters (``%(run_id)s``), sent with positional
    ones: psycopg spends tens of microseconds per call matching names, a tenth of an
    append's round trip."""

    name: str
    sql: str
    names: tuple[str, ...]

    def bind(self, args: Mapping[str, Any] | None = None) -> tuple[Any, ...] | None:
        """The parameters in the query's order (None for a query that takes none: its text
        is then sent as it is)."""
        if not self.names:
            return None
        assert args is not None, f"query {self.name} needs {', '.join(self.names)}"
        return self.values(args)

    def values(self, args: Mapping[str, Any]) -> tuple[Any, ...]:
        return tuple([args[n] for n in self.names])

    @classmethod
    def of(cls, name: str, text: str) -> Query:
        names = tuple(_PARAM.findall(text))
        return cls(name, _PARAM.sub("%s", text), names)


def parse_queries(text: str) -> dict[str, Query]:
    """``{name: query}`` from a file of named queries: the text after each ``-- name:`` line
    up to the next one, without its leading comment lines and its final semicolon."""
    parts = _NAME.split(text)
    queries: dict[str, Query] = {}
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip().splitlines()
        while lines and lines[0].startswith("--"):
            lines.pop(0)
        query = "\n".join(lines).strip().removesuffix(";")
        if name in queries or not query:
            raise ValueError(f"queries.sql: {name!r} is empty or named twice")
        queries[name] = Query.of(name, query)
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


def bound(name: str, args: Mapping[str, Any] | None = None) -> tuple[str, tuple[Any, ...] | None]:
    """``(sql, parameters)`` of a named query, ready for ``execute(*bound(...))``."""
    query = QUERIES[name]
    return query.sql, query.bind(args)

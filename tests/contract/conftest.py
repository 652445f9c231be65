"""The store contract: every test here runs once per store (``any_store``), so FileStore and
PostgresStore keep one behaviour. ``store_spec`` is what a child process passes to
``open_store`` to reach the same store.

PostgreSQL: the server of ``$AGENTRUN_TEST_PG`` (see tests/pgserver.py), a fresh schema per
test, dropped after; skipped without a server unless ``AGENTRUN_REQUIRE_PG=1``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest

from durableagent import Store, open_store

STORES = ["file", "postgres"]


@pytest.fixture(params=STORES)
def store_spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty store of each kind, named as ``--store`` would name it."""
    if request.param == "file":
        yield str(tmp_path / "runs")
        return
    if request.param == "postgres":
        with pgserver.fresh_schema() as schema:
            yield pgserver.url(schema)
        return
    raise AssertionError(f"no such store kind {request.param!r}")


@pytest.fixture
def any_store(store_spec: str) -> Iterator[Store]:
    store = open_store(store_spec)
    try:
        yield store
    finally:
        store.close()

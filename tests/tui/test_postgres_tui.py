"""The supervisor on a PostgreSQL store: the same keys decide, and the table follows changes
other processes make, heard through LISTEN/NOTIFY."""

from __future__ import annotations

import getpass
import subprocess
import sys
from collections.abc import Iterator

import pgserver
import pytest
from procs import child_env
from tuihelpers import loaded, make_app, until

from durableagent import RunStatus, Status, ToolCall
from durableagent.stores.postgres import PostgresStore
from durableagent_tui.sample import T0, JournalWriter

SIZE = (120, 36)


@pytest.fixture
def store() -> Iterator[PostgresStore]:
    with pgserver.fresh_schema() as schema:
        s = PostgresStore.from_url(pgserver.url(schema))
        yield s
        s.close()


APPROVE = """
import sys
from durableagent import open_store, signal
store = open_store(sys.argv[1])
(pending,) = store.summary(sys.argv[2]).pending
signal(store, sys.argv[2], "approve", {"marker": pending.marker}, by="someone-else")
"""


def ready(store: PostgresStore, run_id: str) -> bool:
    summary = store.summary(run_id)
    return summary is not None and summary.status == RunStatus.READY


async def test_the_tui_decides_and_follows_a_postgresql_store(store: PostgresStore) -> None:
    for rid, start in (("older-1", T0), ("newer-2", T0 + 600)):
        j = JournalWriter(store, rid, start)  # type: ignore[arg-type]
        j.start("help")
        pending = j.asks(1, ToolCall("c1", "create_ticket", {"summary": rid}))
        j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    app = make_app(store, live=True)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await loaded(pilot)
        top, other = app.table.shown()[:2]
        await pilot.press("n", "a", "y")  # approve the top pending call
        await until(pilot, lambda: ready(store, top))
        # Another process decides the other run: the row follows, no key pressed.
        url = pgserver.url(store.schema)
        p = subprocess.run([sys.executable, "-c", APPROVE, url, other], env=child_env(), timeout=60)
        assert p.returncode == 0
        await until(pilot, lambda: app.table.get_row(other)[0].plain.endswith("ready"), 10)
    assert [r.data["by"] for r in store.load(top) if r.type == "signal"] == [getpass.getuser()]
    assert [r.data["by"] for r in store.load(other) if r.type == "signal"] == ["someone-else"]

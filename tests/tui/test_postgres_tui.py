"""The supervisor on a PostgreSQL store: the same keys decide, the table follows changes
other processes make, heard through LISTEN/NOTIFY, and a server that stops answering is said
in the header (never as corrupt runs)."""

from __future__ import annotations

import getpass
import subprocess
import sys
from collections.abc import Iterator

import pgserver
import pytest
from pgproxy import Proxy
from procs import child_env
from tuihelpers import loaded, make_app, screen_lines, screen_text, select, until

from durableagent import RunStatus, Status, ToolCall
from durableagent.stores.postgres import PostgresStore
from durableagent.testing import JournalWriter
from durableagent_tui.app import SupervisorApp
from durableagent_tui.sample import T0

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
        j = JournalWriter(store, rid, start)
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


@pytest.fixture
def proxy(store: PostgresStore) -> Iterator[Proxy]:
    """A proxy in front of the test server that a test can cut (pgproxy)."""
    p = Proxy(pgserver.url(store.schema))
    yield p
    p.close()


def header(app: SupervisorApp) -> str:
    return screen_lines(app)[0]


async def test_the_header_says_the_store_is_unreachable_and_no_run_turns_corrupt(
    store: PostgresStore, proxy: Proxy
) -> None:
    j = JournalWriter(store, "older-1", T0)
    j.start("help")
    pending = j.asks(1, ToolCall("c1", "create_ticket", {"summary": "vpn"}))
    j.outcome(Status.AWAITING_APPROVAL, pending=tuple(pending))
    watched = PostgresStore.from_url(proxy.url())
    app = make_app(watched, live=True, label=None)  # type: ignore[arg-type]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await loaded(pilot)
            assert "watching" in header(app)
            proxy.down()  # the server no longer answers; nothing else happens
            await until(pilot, lambda: "store unreachable" in header(app), 30)
            # The cause is whichever came first: the refused reconnect or the pool's timeout.
            why = " runs as last seen · lost PostgreSQL while reading a run: "
            line = screen_lines(app)[1]
            assert line.startswith(why)
            assert line[len(why) :].startswith(("connection to server", "no connection within"))
            await select(pilot, "older-1")  # reading its timeline fails: still no "corrupt"
            await pilot.pause(2)
            assert "corrupt" not in screen_text(app)
            assert app.table.get_row("older-1")[0].plain.endswith("awaiting")
            proxy.up()
            await until(pilot, lambda: "store unreachable" not in header(app), 30)
            assert "watching" in header(app)
            assert screen_lines(app)[1].startswith(" 1 run  ▲ 1 awaiting")
    finally:
        watched.close()


async def test_a_store_unreachable_at_start_is_said_then_loaded_once_it_answers(
    store: PostgresStore, proxy: Proxy
) -> None:
    JournalWriter(store, "older-1", T0).start("help")  # type: ignore[arg-type]
    watched = PostgresStore.from_url(proxy.url())
    proxy.down()
    app = make_app(watched, live=True, label=None)  # type: ignore[arg-type]
    try:
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: "store unreachable" in header(app), 30)
            assert screen_lines(app)[1].startswith(" lost PostgreSQL while listing runs")
            assert not app.loaded
            proxy.up()
            await loaded(pilot)
            assert "store unreachable" not in header(app)
            assert app.table.get_row("older-1")[0].plain.endswith("ready")
    finally:
        watched.close()

"""A store that cannot be reached is ``unavailable`` (with the reason), never ``corrupt``
(SPEC §7): ``view_store`` and the listings tell "the journal does not load" from "the server
did not answer". The server is made unreachable for real: a proxy in front of it, cut."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator

import pgserver
import pytest
from pgproxy import Proxy
from procs import child_env

from durableagent import (
    Message,
    RunStatus,
    StoreUnavailableError,
    open_store,
    submit,
    view_store,
)
from durableagent.cli import main as cli
from durableagent.stores.postgres import PostgresStore


@pytest.fixture
def proxied() -> Iterator[tuple[PostgresStore, Proxy]]:
    """A store with one run ``r1``, opened through a proxy the test can cut."""
    with pgserver.fresh_schema() as schema:
        url = pgserver.url(schema)
        direct = open_store(url)
        submit(direct, "r1", [Message("user", "file it")])
        direct.close()
        proxy = Proxy(url)
        store = PostgresStore.from_url(proxy.url())
        try:
            yield store, proxy
        finally:
            store.close()
            proxy.close()


def test_a_run_of_a_server_that_does_not_answer_is_unavailable_not_corrupt(
    proxied: tuple[PostgresStore, Proxy],
):
    store, proxy = proxied
    assert view_store(store, "r1").status == RunStatus.READY
    proxy.down()
    with pytest.raises(StoreUnavailableError, match=r"lost PostgreSQL at .* while loading a run"):
        view_store(store, "r1")
    with pytest.raises(StoreUnavailableError):
        store.summaries()
    proxy.up()
    assert view_store(store, "r1").status == RunStatus.READY  # nothing was marked meanwhile


def test_a_journal_that_does_not_load_is_still_corrupt(proxied: tuple[PostgresStore, Proxy]):
    store, _ = proxied
    pgserver.execute(
        f"UPDATE {store.schema}.records SET line = 'not json' WHERE run_id = 'r1' AND seq = 1"
    )
    view = view_store(store, "r1")
    assert view.status == RunStatus.CORRUPT and "line 1" in view.error


def test_a_listing_that_rebuilds_a_summary_says_unavailable_when_the_server_goes(
    proxied: tuple[PostgresStore, Proxy], monkeypatch: pytest.MonkeyPatch
):
    """A missing summary is rebuilt from the journal; a server gone by then is not a corrupt
    journal."""
    store, proxy = proxied
    pgserver.execute(f"UPDATE {store.schema}.runs SET status = NULL WHERE run_id = 'r1'")
    load = store.load

    def load_then_cut(run_id: str) -> list[object]:
        proxy.down()  # the listing was read; the journal is read next
        return load(run_id)  # type: ignore[return-value]

    monkeypatch.setattr(store, "load", load_then_cut)
    with pytest.raises(StoreUnavailableError):
        store.summaries()


@pytest.mark.parametrize(
    "command", [["ls"], ["ls", "--json"], ["show", "r1"], ["show", "r1", "--json"]]
)
def test_agentrun_says_store_unavailable_in_one_line(
    proxied: tuple[PostgresStore, Proxy], command: list[str]
):
    _, proxy = proxied
    proxy.down()
    p = subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *command, "--store", proxy.url()],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert p.returncode == 1
    assert p.stdout == ""
    (line,) = p.stderr.splitlines()
    assert line.startswith(
        f"agentrun {command[0]}: store unavailable: cannot connect to PostgreSQL"
    )
    # Then libpq's reason: refused, or closed at once (the cut proxy's listener).
    assert f"127.0.0.1:{proxy.port}/test" in line and "connection" in line.split(": ", 3)[3]


def test_agentrun_show_says_store_unavailable_when_the_server_goes_after_it_connected(
    proxied: tuple[PostgresStore, Proxy],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
):
    store, proxy = proxied
    for module in ("runs", "show", "common"):
        monkeypatch.setattr(f"durableagent.cli.{module}.store_of", lambda *a, **k: store)
    proxy.down()
    assert cli(["show", "r1"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = err.splitlines()
    assert line.startswith("agentrun show: store unavailable: lost PostgreSQL at ")

"""A store that cannot be reached is ``unavailable`` (with the reason), never ``corrupt``
(SPEC §7): ``view_store`` and the listings tell "the journal does not load" from "the server
did not answer". The server is made unreachable for real: a proxy in front of it, cut."""

from __future__ import annotations

from collections.abc import Iterator

import pgserver
import pytest
from pgproxy import Proxy

from durableagent import (
    Message,
    RunStatus,
    StoreUnavailableError,
    open_store,
    submit,
    view_store,
)
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

"""What only a PostgreSQL store has to get right: its URL, its schema and version, durable
commits, NOTIFY's limits, lost connections and a server that goes away. A real server (see
tests/pgserver.py), a schema per test, real worker processes."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as sig
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pgserver
import pytest
from pgproxy import Proxy
from pgserver import RowHeld, waiting_for_a_row
from procs import WorkerProcess, child_env, wait_for

from durableagent import (
    Message,
    Record,
    RunBusyError,
    RunStatus,
    StoreError,
    StoreUnavailableError,
    open_store,
    submit,
)
from durableagent.stores.postgres import PostgresStore
from durableagent.stores.postgres.sql import SCHEMA_VERSION


@pytest.fixture
def schema() -> Iterator[str]:
    with pgserver.fresh_schema() as name:
        yield name


@pytest.fixture
def url(schema: str) -> str:
    return pgserver.url(schema)


@pytest.fixture
def store(url: str) -> Iterator[PostgresStore]:
    s = PostgresStore.from_url(url)
    yield s
    s.close()


def started(text: str = "hi") -> Record:
    return Record.make("run.started", data={"input": [{"role": "user", "content": text}]})


def agentrun(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=child_env(**env),
    )


def with_password(url: str, user: str, password: str) -> str:
    return url.replace("postgresql://postgres@", f"postgresql://{user}:{password}@", 1)


def terminate(where: str) -> int:
    """Terminate the server sessions matching ``where`` (a condition on pg_stat_activity);
    how many there were."""
    rows = pgserver.execute(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        f"WHERE pid <> pg_backend_pid() AND {where}"
    )
    return int(rows[0][0])


def of_process(pid: int) -> str:
    return f"application_name LIKE 'durableagent pid {pid} %'"


# -- the URL, the schema, durable commits --------------------------------------------------


def test_a_store_url_names_its_schema_and_never_shows_its_password(schema: str):
    url = with_password(pgserver.url(schema), "postgres", "s3cret-pw")  # trust auth: accepted
    store = open_store(url)
    try:
        assert isinstance(store, PostgresStore) and store.schema == schema
        described = store.description
        assert described.endswith(f"/test?schema={schema}")
        assert described.startswith("postgresql://postgres@")
        assert "s3cret-pw" not in described + repr(store)
        store.append("r", started())
        tables = pgserver.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s ORDER BY 1",
            schema,
        )
        assert [t[0] for t in tables] == [
            "attempts",
            "notices",
            "records",
            "runs",
            "schema_version",
            "workers",
        ]
    finally:
        store.close()


def test_a_missing_store_is_refused_without_create(url: str, schema: str):
    with pytest.raises(StoreError, match=f"no store at .*schema={schema}"):
        open_store(url, create=False)
    assert pgserver.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", schema) == []


def test_a_store_of_a_newer_schema_version_is_refused(store: PostgresStore, url: str, schema: str):
    store.append("r", started())
    pgserver.execute(
        f'INSERT INTO "{schema}".schema_version (version) VALUES (%s)', SCHEMA_VERSION + 1
    )
    with pytest.raises(StoreError, match="newer durableagent") as e:
        open_store(url)
    assert f"version {SCHEMA_VERSION + 1}" in str(e.value)


def test_a_version_1_store_is_migrated_and_its_leases_end_by_expiry(schema: str, url: str):
    """A store made by the first version (its schema as it shipped, kept beside the tests)
    opens migrated to the current one: its records intact, and a lease its holder's session
    no longer backs (the version 1 rule) still held until its expiry."""
    v1 = (Path(__file__).parent / "pg_schema_v1.sql").read_text()
    pgserver.execute(f'CREATE SCHEMA "{schema}"')
    pgserver.execute(f'SET search_path TO "{schema}"; {v1}')
    line = b'{"seq":1,"type":"run.started","step":"","kind":"","data":{"input":[]},"at":1.0}'
    pgserver.execute(
        f'INSERT INTO "{schema}".records (run_id, seq, line) VALUES (%s, 1, %s)', "r", line
    )
    # Held by a worker whose session (token 12345: no such advisory lock) is gone.
    pgserver.execute(
        f'INSERT INTO "{schema}".runs (run_id, last_seq, epoch, holder, holder_epoch, '
        "holder_token, expires_at) VALUES (%s, 1, 1, 'old-worker', 1, 12345, "
        "clock_timestamp() + interval '30 seconds')",
        "r",
    )
    store = open_store(url)
    try:
        assert [r.seq for r in store.load("r")] == [1]
        versions = pgserver.execute(f'SELECT max(version) FROM "{schema}".schema_version')
        assert versions == [(SCHEMA_VERSION,)]
        assert store.lease_holder("r") is not None  # no session backs it: held all the same
    finally:
        store.close()


def test_a_schema_that_holds_other_tables_is_not_taken_over(schema: str, url: str):
    pgserver.execute(f'CREATE SCHEMA "{schema}"')
    pgserver.execute(f'CREATE TABLE "{schema}".invoices (id int)')
    with pytest.raises(StoreError, match="not a durableagent store"):
        open_store(url)
    assert pgserver.execute(
        "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", schema
    ) == [("invoices",)]


def test_an_asynchronous_commit_session_is_refused_unless_allowed(url: str):
    off = f"{url}&options=-c%20synchronous_commit%3Doff"
    with pytest.raises(StoreError, match="synchronous_commit is off"):
        open_store(off)
    store = open_store(f"{off}&allow_async_commit=true")
    try:
        assert store.append("r", started()).seq == 1
    finally:
        store.close()


# -- NOTIFY, lost connections, the change feed ---------------------------------------------


async def test_a_record_larger_than_a_notification_is_appended_and_announced(
    store: PostgresStore,
):
    store.append("big", started())
    feed = store.changes(rescan=600)
    assert "big" in await asyncio.wait_for(anext(feed), 10)
    huge = {"content": "x" * 100_000, "is_error": False}  # NOTIFY payloads stop at 8000 bytes
    other = PostgresStore.from_url(pgserver.url(store.schema))
    try:
        await asyncio.to_thread(other.append, "big", Record.make("signal", "s", "", huge))
    finally:
        other.close()
    assert "big" in await asyncio.wait_for(anext(feed), 10)
    assert store.load("big")[-1].data == huge
    await feed.aclose()  # type: ignore[attr-defined]


def test_an_append_whose_connection_was_cut_lands_exactly_once(store: PostgresStore):
    store.append("r", started())
    store.append("r", Record.make("signal", "s", "", {"i": 1}))
    assert terminate(of_process(os.getpid())) >= 1  # the pooled connection and the session
    stored = store.append("r", Record.make("signal", "s", "", {"i": 2}))
    assert stored.seq == 3
    assert [r.seq for r in store.load("r")] == [1, 2, 3]
    with store.lease("r") as lease:  # the lease session reconnects too
        assert store.append("r", Record.make("signal", "s", "", {}), lease=lease).seq == 4


class InThread:
    """``fn()`` in a thread: ``result()`` waits for what it returned (or raises what it
    raised)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._out: list[Any] = []
        self._error: list[BaseException] = []
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self._out.append(fn())
        except BaseException as e:
            self._error.append(e)

    def result(self, timeout: float = 20) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "still running"
        if self._error:
            raise self._error[0]
        return self._out[0]


def signal_lines(schema: str, run_id: str) -> list[tuple[int, Any]]:
    """(seq, data) of the run's signal records, read on a connection of its own."""
    store = PostgresStore.from_url(pgserver.url(schema))
    try:
        return [(r.seq, r.data) for r in store.load(run_id) if r.type == "signal"]
    finally:
        store.close()


def bring_back(proxy: Proxy) -> None:
    """``proxy.up()`` once its port can be bound again (the cut sockets close meanwhile)."""

    def up() -> bool:
        try:
            proxy.up()
        except OSError:
            return False
        return True

    wait_for(up, why="the proxy's port to be free again")


@pytest.fixture
def proxied(url: str) -> Iterator[tuple[Proxy, PostgresStore]]:
    """A store whose every connection goes through a proxy the test can cut."""
    proxy = Proxy(url)
    store = PostgresStore.from_url(proxy.url())
    yield proxy, store
    store.close()
    proxy.close()


def test_an_append_committed_after_its_connection_was_cut_is_found_and_not_made_again(
    proxied: tuple[Proxy, PostgresStore], schema: str
):
    """The append reached the server and waits there for the run's row; its connection is
    cut; then it commits, with nobody to tell. The store finds it once the server is back,
    returns it, and does not append it a second time."""
    proxy, store = proxied
    store.append("r", started())  # this process knows the run now: one statement per append
    held = RowHeld(schema, "r")
    try:
        append = InThread(lambda: store.append("r", Record.make("signal", "s", "", {"i": 2})))
        wait_for(lambda: waiting_for_a_row(os.getpid()) == 1, why="the append at the server")
        proxy.down()
    finally:
        held.release()  # the cut-off append goes on and commits; its answer is lost
    wait_for(lambda: signal_lines(schema, "r") != [], why="the cut-off append to commit")
    bring_back(proxy)
    assert append.result().seq == 2
    assert signal_lines(schema, "r") == [(2, {"i": 2})]


def test_an_append_that_commits_while_the_store_looks_for_it_is_not_made_again(
    proxied: tuple[Proxy, PostgresStore], schema: str
):
    proxy, store = proxied
    store.append("r", started())
    held = RowHeld(schema, "r")
    try:
        append = InThread(lambda: store.append("r", Record.make("signal", "s", "", {"i": 2})))
        wait_for(lambda: waiting_for_a_row(os.getpid()) == 1, why="the append at the server")
        proxy.down()
        bring_back(proxy)
        # The store reconnected and looks for the append under the run's lock: it waits
        # behind the cut-off append, which is still at the server.
        wait_for(lambda: waiting_for_a_row(os.getpid()) == 2, why="the look for the append")
    except AssertionError as e:  # not the bug: the scene was not set (see raises= above)
        pytest.fail(f"setting the scene: {e}")
    finally:
        held.release()
    assert append.result().seq == 2
    assert signal_lines(schema, "r") == [(2, {"i": 2})]


def test_a_check_sees_a_record_committed_while_its_append_waited_for_the_lock(
    store: PostgresStore, schema: str
):
    """The check runs on the records read under the run's row lock, not on an earlier read:
    a decision that lands while the append waits for the lock is in what the check sees."""
    store.append("r", started())
    other = PostgresStore.from_url(pgserver.url(schema))
    holding, go = threading.Event(), threading.Event()

    def hold_the_lock(records: list[Record]) -> None:
        holding.set()
        assert go.wait(10)

    try:
        deny = Record.make("signal", "s", "", {"name": "deny"})
        landing = InThread(lambda: other.append("r", deny, check=hold_the_lock))
        assert holding.wait(10)
        seen: list[list[Any]] = []

        def only_after_the_deny(records: list[Record]) -> None:
            seen.append([r.data for r in records])
            if not any(r.data == {"name": "deny"} for r in records):
                raise AssertionError("the check did not see the deny")

        note = Record.make("signal", "s", "", {"name": "note"})
        checked = InThread(lambda: store.append("r", note, check=only_after_the_deny, since=1))
        wait_for(lambda: waiting_for_a_row(os.getpid()) == 1, why="the checked append to wait")
        go.set()
        assert landing.result().seq == 2
        assert checked.result().seq == 3
        # A call on no records may come first (the store's guess that nothing landed); the
        # verdict that counts is on what was read under the lock.
        assert seen[-1] == [{"name": "deny"}] and all(c == [] for c in seen[:-1])
    finally:
        go.set()
        other.close()


async def test_the_change_feed_reports_every_run_after_its_connection_is_cut(
    store: PostgresStore,
):
    for run_id in ("a", "b"):
        store.append(run_id, started())
    feed = store.changes(rescan=600)
    assert await asyncio.wait_for(anext(feed), 10) == {"a", "b"}
    listening = f"{of_process(os.getpid())} AND query LIKE 'LISTEN%'"
    assert await asyncio.to_thread(terminate, listening) == 1
    # Notifications sent while the feed was down are lost: after it reconnects it says
    # "look at everything".
    assert await asyncio.wait_for(anext(feed), 15) == {"a", "b"}
    await asyncio.to_thread(store.append, "c", started())
    deadline = time.monotonic() + 10
    while "c" not in await asyncio.wait_for(anext(feed), 10):
        assert time.monotonic() < deadline
    await feed.aclose()  # type: ignore[attr-defined]


HOLDER = """
import sys, time
from durableagent import open_store
store = open_store(sys.argv[1], lease_ttl=float(sys.argv[2]))
with store.lease("r", owner="doomed"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_dead_holders_lease_ends_when_its_ttl_passes_not_with_its_connection(
    store: PostgresStore, url: str
):
    store.append("r", started())
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, url, "2"],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    assert p.stdout is not None and p.stdout.readline() == "held\n"
    assert store.is_leased("r")
    p.send_signal(sig.SIGKILL)
    p.wait(30)
    p.stdout.close()
    killed = time.monotonic()
    # Its connection is gone at once; its lease is not (a live holder whose connection was cut
    # must keep it): nobody takes the run over before the two-second ttl has passed.
    with pytest.raises(RunBusyError), store.lease("r", owner="too-soon"):
        pass
    assert time.monotonic() - killed < 2
    wait_for(lambda: not store.is_leased("r"), timeout=10, why="the dead holder's lease")
    with store.lease("r", owner="next") as lease:
        assert lease.epoch == 2
    assert [a.ended for a in store.attempts("r")] == ["lost", "stopped"]


def test_a_missing_summary_is_rebuilt_from_the_journal(store: PostgresStore, schema: str):
    submit(store, "r", [Message("user", "hi")])
    store.append(
        "r", Record.make("step.started", "tool/1/0/create_ticket", "tool", {"write": True})
    )
    pgserver.execute(f'UPDATE "{schema}".runs SET status = NULL, fold = NULL')
    (summary,) = store.summaries()
    assert summary.status == RunStatus.INDETERMINATE and summary.steps == 1
    rows = pgserver.execute(f'SELECT status, fold IS NOT NULL FROM "{schema}".runs')
    assert rows == [("indeterminate", True)]  # saved back
    pgserver.execute(f'UPDATE "{schema}".runs SET fold = NULL')
    fresh = PostgresStore.from_url(pgserver.url(schema))  # nothing cached: the fold is rebuilt
    try:
        fresh.append("r", Record.make("signal", "s", "", {}))
        again = fresh.summary("r")
        assert again is not None and (again.signals, again.steps) == (1, 1)
        assert again.status == RunStatus.INDETERMINATE
    finally:
        fresh.close()


def test_two_stores_on_one_server_keep_apart(store: PostgresStore):
    with pgserver.fresh_schema() as other_schema:
        other = PostgresStore.from_url(pgserver.url(other_schema))
        try:
            store.append("r", started("mine"))
            other.append("r", started("theirs"))
            assert store.load("r")[0].data["input"][0]["content"] == "mine"
            assert other.load("r")[0].data["input"][0]["content"] == "theirs"
        finally:
            other.close()


# -- the command line on bad input: one line, exit 1, never a traceback or a password -------


def refused(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    return lines[0]


def test_a_url_that_does_not_connect_is_one_line_and_exit_1():
    pgserver.require()
    line = refused(agentrun("ls", "--store", "postgresql://postgres@127.0.0.1:1/test"))
    assert line.startswith("agentrun ls: store unavailable: cannot connect to PostgreSQL at")
    assert "127.0.0.1:1/test" in line


def test_a_wrong_user_is_one_line_and_never_shows_the_password(url: str):
    line = refused(agentrun("ls", "--store", with_password(url, "nobody_here", "hunter2-pw")))
    assert "nobody_here" in line and "hunter2-pw" not in line


def test_a_newer_schema_is_one_line_and_exit_1(store: PostgresStore, url: str, schema: str):
    store.append("r", started())
    pgserver.execute(f'UPDATE "{schema}".schema_version SET version = 999')
    line = refused(agentrun("ls", "--store", url))
    assert "schema version 999" in line and "upgrade durableagent" in line


def test_asynchronous_commit_is_one_line_and_exit_1(url: str):
    off = f"{url}&options=-c%20synchronous_commit%3Doff"
    line = refused(agentrun("submit", "r", "hello", "--store", off))
    assert "synchronous_commit is off" in line and "allow_async_commit=true" in line
    p = agentrun("submit", "r", "hello", "--store", f"{off}&allow_async_commit=true")
    assert p.returncode == 0, p.stderr


def test_a_worker_that_cannot_reach_its_store_is_one_line_and_exit_1():
    pgserver.require()
    p = agentrun(
        "worker", "--agent", "_child_agents:gated", "--store", "postgresql://u@127.0.0.1:1/x"
    )
    assert "cannot connect to PostgreSQL" in refused(p)


# -- a worker whose server goes away -------------------------------------------------------


@pytest.fixture
def side(tmp_path: Path) -> Path:
    path = tmp_path / "side"
    path.mkdir()
    return path


@pytest.fixture
def worker(tmp_path: Path, side: Path) -> Iterator[Callable[..., WorkerProcess]]:
    started: list[WorkerProcess] = []

    def start(url: str, hold: str = "") -> WorkerProcess:
        w = WorkerProcess(
            url,
            "fenced",
            tmp_path / f"worker{len(started)}.log",
            "--owner",
            "w",
            AGENTRUN_SIDE=str(side),
            FENCE_HOLD=hold,
        )
        started.append(w)
        return w

    yield start
    for w in started:
        w.kill()


def finished(store: PostgresStore, run_id: str) -> bool:
    summary = store.summary(run_id)
    return summary is not None and summary.status == RunStatus.COMPLETED


def test_a_worker_whose_connections_are_terminated_reconnects_and_finishes(
    store: PostgresStore, url: str, side: Path, worker: Callable[..., WorkerProcess]
):
    submit(store, "r1", [Message("user", "file it")])
    w = worker(url, hold="write")
    wait_for(lambda: (side / "tickets.log").exists(), timeout=30, why="the worker in its write")
    # Its pool (one connection or more: the lease is renewed through it too) and its feed.
    assert terminate(of_process(w.proc.pid)) >= 2
    (side / "go-write").touch()
    wait_for(lambda: finished(store, "r1"), timeout=30, why=f"r1 done:\n{w.log.read_text()}")
    assert (side / "tickets.log").read_text().splitlines() == [
        f"begin {w.proc.pid}",
        f"end {w.proc.pid}",
    ]
    assert [r.seq for r in store.load("r1")] == list(range(1, len(store.load("r1")) + 1))
    submit(store, "r2", [Message("user", "and again")])  # found through the new feed or a look
    wait_for(lambda: finished(store, "r2"), timeout=30, why=f"r2 done:\n{w.log.read_text()}")
    assert w.proc.poll() is None


PAUSED_IN_AN_APPEND = """
import os, signal, sys
from durableagent import LeaseLostError, Record, open_store
store = open_store(sys.argv[1], lease_ttl=1)
paused = []

def pause(records):  # runs between the append's two round trips: the run's row is locked
    if not paused:
        paused.append(True)
        print("paused", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)

with store.lease("r", owner="paused") as lease:
    data = {"name": "note", "payload": {}, "by": None, "reason": None}
    try:
        store.append("r", Record.make("signal", "", "", data), check=pause, lease=lease)
        print("appended", flush=True)
    except LeaseLostError:
        print("lost", flush=True)
"""


def test_a_holder_paused_inside_an_append_never_keeps_its_run_from_a_takeover(
    store: PostgresStore, url: str
):
    """An append with a check holds the run's row lock between its two round trips. Its
    holder paused right there (a GC pause, a frozen VM, SIGSTOP) would keep every other
    process from taking the run over, or a human from signalling it, for as long as it is
    paused: the server ends a session idle inside a transaction past the lease's ttl."""
    store.append("r", started())
    child = subprocess.Popen(
        [sys.executable, "-c", PAUSED_IN_AN_APPEND, url],
        stdout=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "paused"
        b = PostgresStore.from_url(url, lease_ttl=1)
        taken: list[int] = []

        def take() -> None:  # in a thread: a taker blocked on the row lock blocks for good
            while not taken:
                with contextlib.suppress(RunBusyError), b.lease("r", owner="new") as lease:
                    taken.append(lease.epoch)
                time.sleep(0.05)

        threading.Thread(target=take, daemon=True).start()
        wait_for(lambda: bool(taken), timeout=30, why="the run taken over from its paused holder")
        assert taken == [2]
        assert [r.type for r in store.load("r")] == ["run.started"]  # nothing of the paused one
    finally:
        child.send_signal(sig.SIGCONT)
        out, _ = child.communicate(timeout=60)
        b.close()
    assert out.split() == ["lost"]  # woken, it finds its lease taken over and writes nothing
    assert [r.type for r in store.load("r")] == ["run.started"]


def test_a_worker_rides_out_its_server_going_away(
    store: PostgresStore, url: str, side: Path, worker: Callable[..., WorkerProcess]
):
    proxy = Proxy(url)
    try:
        submit(store, "r1", [Message("user", "file it")])
        w = worker(proxy.url(), hold="write")
        wait_for(lambda: (side / "tickets.log").exists(), timeout=30, why="the worker's write")
        proxy.down()  # every connection cut, new ones refused
        (side / "go-write").touch()  # the write ends while the server is away
        wait_for(
            lambda: "unreachable" in w.log.read_text() or "lost" in w.log.read_text(),
            timeout=30,
            why="the worker to notice",
        )
        time.sleep(1.0)  # an outage of a second or so: longer than one retry, shorter than 10 s
        proxy.up()
        wait_for(lambda: finished(store, "r1"), timeout=40, why=f"r1:\n{w.log.read_text()}")
        records = store.load("r1")
        assert [r.seq for r in records] == list(range(1, len(records) + 1))
        ticket = [r.type for r in records if r.step == "tool/2/0/create_ticket"]
        assert ticket == ["step.started", "step.completed"]  # its result landed exactly once
        submit(store, "r2", [Message("user", "and again")])
        wait_for(lambda: finished(store, "r2"), timeout=30, why=f"r2:\n{w.log.read_text()}")
        assert w.proc.poll() is None
    finally:
        proxy.close()


def test_an_outage_longer_than_an_append_can_wait_leaves_the_write_indeterminate(
    store: PostgresStore, url: str, side: Path, worker: Callable[..., WorkerProcess]
):
    """Nothing half-written: the write's result could not be recorded, so the run stops as
    indeterminate for a human, and the worker is still there when the server is back."""
    proxy = Proxy(url)
    try:
        submit(store, "r1", [Message("user", "file it")])
        w = worker(proxy.url(), hold="write")
        wait_for(lambda: (side / "tickets.log").exists(), timeout=30, why="the worker's write")
        proxy.down()
        (side / "go-write").touch()
        wait_for(
            lambda: (
                "whether the record landed is known once the server is back" in w.log.read_text()
            ),
            timeout=40,
            why=f"the append to give up:\n{w.log.read_text()}",
        )
        proxy.up()
        wait_for(
            lambda: (
                store.summary("r1") is not None
                and store.summary("r1").status == RunStatus.INDETERMINATE
            ),  # type: ignore[union-attr]
            timeout=30,
            why="the run to show its open write",
        )
        records = store.load("r1")
        assert records[-1].type == "step.started" and records[-1].step == "tool/2/0/create_ticket"
        assert w.proc.poll() is None
    finally:
        proxy.close()


def test_store_unavailable_is_a_store_error():
    assert issubclass(StoreUnavailableError, StoreError)

"""The Store protocol on every store: appends, checks, concurrent appenders, leases with a
fencing epoch, attempts, the change feed and the workers' bookkeeping."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from durableagent import (
    FileStore,
    Lease,
    LeaseLostError,
    Outcome,
    Record,
    RunBusyError,
    Status,
    Store,
    open_store,
)

TESTS = Path(__file__).resolve().parent.parent


def env() -> dict[str, str]:
    e = dict(os.environ)
    e["PYTHONPATH"] = os.pathsep.join(filter(None, [str(TESTS), e.get("PYTHONPATH")]))
    return e


def started() -> Record:
    return Record.make("run.started", data={"input": [{"role": "user", "content": "hi"}]})


def note(i: int) -> Record:
    return Record.make("signal", "s", "", {"i": i})


def test_appends_get_consecutive_seqs_and_load_since_reads_the_rest(any_store: Store):
    assert any_store.load("r") == [] and any_store.run_ids() == []
    assert any_store.append("r", started()).seq == 1
    for i in range(2, 6):
        assert any_store.append("r", note(i), sync=i % 2 == 0).seq == i
    assert [r.seq for r in any_store.load("r")] == [1, 2, 3, 4, 5]
    assert [r.data["i"] for r in any_store.load_since("r", 3)] == [4, 5]
    assert any_store.load_since("r", 5) == [] and any_store.load_since("nobody", 0) == []
    assert any_store.run_ids() == ["r"]
    stored = any_store.load("r")[2]
    assert (stored.type, stored.step, stored.data) == ("signal", "s", {"i": 3})


def test_a_check_sees_the_records_under_the_lock_and_a_refusal_writes_nothing(any_store: Store):
    any_store.append("r", started())
    any_store.append("r", note(2))
    seen: list[int] = []
    any_store.append("r", note(3), check=lambda rs: seen.extend(r.seq for r in rs), since=1)
    assert seen == [2]

    def refuse(records: list[Record]) -> None:
        raise ValueError("no")

    with pytest.raises(ValueError):
        any_store.append("r", note(4), check=refuse)
    with pytest.raises(ValueError):
        any_store.append("new", started(), check=refuse)
    assert [r.seq for r in any_store.load("r")] == [1, 2, 3]
    assert any_store.load("new") == [] and "new" not in any_store.run_ids()


APPENDER = """
import sys
from durableagent import Record, open_store
store = open_store(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append("shared", Record.make("signal", sys.argv[2], "", {"i": i}))
store.close()
"""


def test_two_processes_appending_at_once_lose_nothing_and_reuse_no_seq(
    any_store: Store, store_spec: str
):
    any_store.append("shared", started())
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, store_spec, who, "150"], env=env())
        for who in ("a", "b")
    ]
    assert [p.wait(120) for p in procs] == [0, 0]
    records = any_store.load("shared")
    assert [r.seq for r in records] == list(range(1, 302))
    for who in ("a", "b"):
        assert [r.data["i"] for r in records if r.step == who] == list(range(150))


def test_a_lease_excludes_others_and_each_acquisition_has_the_next_epoch(any_store: Store):
    any_store.append("r", started())
    epochs = []
    for _ in range(3):
        with any_store.lease("r", owner="w1") as lease:
            assert any_store.is_leased("r")
            assert lease.owner == "w1" and lease.run_id == "r"
            holder = any_store.lease_holder("r")
            assert holder is not None and holder["owner"] == "w1"
            with pytest.raises(RunBusyError), any_store.lease("r", owner="w2"):
                pass
            epochs.append(lease.epoch)
        assert not any_store.is_leased("r") and any_store.lease_holder("r") is None
    assert epochs == [epochs[0], epochs[0] + 1, epochs[0] + 2]
    attempts = any_store.attempts("r")
    assert [a.epoch for a in attempts] == epochs
    assert [a.owner for a in attempts] == ["w1"] * 3
    assert [a.ended for a in attempts] == ["stopped"] * 3


def test_a_lease_taken_over_can_never_append_again(store_spec: str):
    a = open_store(store_spec, lease_ttl=0.3)
    b = open_store(store_spec, lease_ttl=0.3)
    a.append("r", started())
    with contextlib.ExitStack() as first:
        la = first.enter_context(a.lease("r", owner="paused"))
        a.append("r", note(2), lease=la)
        time.sleep(0.8)  # the holder stops renewing: paused past its ttl
        assert la.lost  # by its own clock: it calls nothing more until it renews
        if a.leases_die_with_holder:
            # On one host the holder is alive (the kernel holds its flock): its lease is
            # never taken over, and it shows as stuck until it renews or dies.
            with pytest.raises(RunBusyError, match="stuck"), b.lease("r", owner="new"):
                pass
            holder = b.lease_holder("r")
            assert holder is not None and holder["owner"] == "paused" and holder["stuck"] > 0
            la.renew()  # woken, it renews: no longer stuck, and its appends land
            assert "stuck" not in (b.lease_holder("r") or {})
            assert not la.lost
            assert a.append("r", note(3), lease=la).seq == 3
            first.close()
            assert [x.ended for x in a.attempts("r")] == ["stopped"]
            a.close()
            b.close()
            return
        with b.lease("r", owner="new") as lb:
            assert lb.epoch == la.epoch + 1
            before = a.load("r")
            with pytest.raises(LeaseLostError):
                a.append("r", note(3), lease=la)
            with pytest.raises(LeaseLostError):
                la.renew()
            assert a.load("r") == before
            first.close()  # the old holder lets go: that never frees the new holder's lease
            assert b.is_leased("r")
            assert b.append("r", note(4), lease=lb).seq == 3
            with pytest.raises(LeaseLostError):
                a.save_outcome("r", Outcome(Status.FAILED, error="late"), lease=la)
    assert a.last_outcome("r") is None
    ended = {x.owner: x.ended for x in a.attempts("r")}
    assert ended == {"paused": "lost", "new": "stopped"}
    a.close()
    b.close()


@contextlib.contextmanager
def taken_over(store_spec: str) -> Iterator[tuple[Store, Lease, Store, Lease]]:
    """Run "r" held by "old" (store ``a``), which stops renewing, then taken over by "new"
    (store ``b``), which holds it while the test runs. The old holder has not done anything
    since: it has not yet been told that it lost the lease.

    In PostgreSQL a lease is taken over once its ttl passes unrenewed. On one host never
    while its holder lives (the kernel holds its flock): there the lock file is removed by
    hand, the one way a live holder's FileStore lease can go to another."""
    a = open_store(store_spec, lease_ttl=0.3)
    b = open_store(store_spec, lease_ttl=0.3)
    try:
        a.append("r", started())
        with contextlib.ExitStack() as held:
            old = held.enter_context(a.lease("r", owner="old"))
            if isinstance(a, FileStore):
                (a.root / ".leases" / "r.lock").unlink()
            deadline = time.monotonic() + 10
            while True:  # the old holder's ttl passes unrenewed: then the run can be taken
                try:
                    new = held.enter_context(b.lease("r", owner="new"))
                    break
                except RunBusyError:
                    assert time.monotonic() < deadline, "the old lease never expired"
                    time.sleep(0.02)
            yield a, old, b, new
    finally:
        a.close()
        b.close()


def test_renewing_a_lease_taken_over_is_refused(store_spec: str):
    with taken_over(store_spec) as (_, old, b, new):
        with pytest.raises(LeaseLostError):
            old.renew()
        holder = b.lease_holder("r")
        assert holder is not None and (holder["owner"], holder["epoch"]) == ("new", new.epoch)
        assert b.append("r", note(2), lease=new).seq == 2


def test_an_outcome_saved_under_a_lease_taken_over_is_refused_and_changes_nothing(
    store_spec: str,
):
    with taken_over(store_spec) as (a, old, b, _):
        before = (b.load("r"), b.summary("r"), b.attempts("r"), b.last_outcome("r"))
        with pytest.raises(LeaseLostError):
            a.save_outcome("r", Outcome(Status.FAILED, error="late", seq=1), lease=old)
        assert (b.load("r"), b.summary("r"), b.attempts("r"), b.last_outcome("r")) == before
        assert b.last_outcome("r") is None
        assert [(x.owner, x.ended) for x in b.attempts("r")] == [("old", "lost"), ("new", None)]


def test_an_attempt_taken_over_is_lost_while_the_new_holder_runs(store_spec: str):
    with taken_over(store_spec) as (a, old, b, new):
        assert b.is_leased("r")
        for store in (a, b):
            attempts = store.attempts("r")
            assert [(x.owner, x.epoch, x.ended) for x in attempts] == [
                ("old", old.epoch, "lost"),
                ("new", new.epoch, None),
            ]


def test_an_outcome_ends_the_attempt_and_is_the_last_outcome(any_store: Store):
    any_store.append("r", started())
    assert any_store.last_outcome("r") is None and any_store.attempts("r") == []
    with any_store.lease("r", owner="w") as lease:
        (current,) = any_store.attempts("r")
        assert current.ended is None and current.first_seq == 2
        any_store.save_outcome("r", Outcome(Status.FAILED, error="boom", seq=1), lease=lease)
    (done,) = any_store.attempts("r")
    assert done.ended == "failed" and done.last_seq == 1
    assert done.outcome is not None and done.outcome.error == "boom"
    outcome = any_store.last_outcome("r")
    assert outcome is not None and outcome.error == "boom"


HOLDER = """
import sys, time
from durableagent import Record, open_store
store = open_store(sys.argv[1])
with store.lease("r", owner="doomed") as lease:
    store.append("r", Record.make("signal", "s", "", {}), lease=lease)
    print("held", flush=True)
    time.sleep(60)
"""


def test_an_attempt_killed_while_it_runs_shows_as_lost(any_store: Store, store_spec: str):
    any_store.append("r", started())
    p = subprocess.Popen(
        [sys.executable, "-c", HOLDER, store_spec], stdout=subprocess.PIPE, text=True, env=env()
    )
    try:
        assert p.stdout is not None and p.stdout.readline() == "held\n"
        (running,) = any_store.attempts("r")
        assert running.ended is None and running.owner == "doomed"
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait(30)
        if p.stdout is not None:
            p.stdout.close()
    deadline = time.monotonic() + 40  # a store whose lease outlives the process waits its ttl
    while any_store.is_leased("r"):
        assert time.monotonic() < deadline
        time.sleep(0.1)
    (lost,) = any_store.attempts("r")
    assert lost.ended == "lost" and lost.first_seq == 2


def test_failure_bookkeeping_round_trips(any_store: Store):
    assert any_store.read_failures("r") is None and any_store.clear_failures("r") is False
    any_store.write_failures("r", {"failures": 2, "error": "boom"})
    assert any_store.read_failures("r") == {"failures": 2, "error": "boom"}
    any_store.write_failures("r", {"failures": 3})
    assert any_store.read_failures("r") == {"failures": 3}
    assert any_store.clear_failures("r") is True and any_store.read_failures("r") is None


async def test_the_change_feed_reports_an_append_from_another_process(
    any_store: Store, store_spec: str
):
    any_store.append("r", started())
    feed = any_store.changes(rescan=60)
    first = await asyncio.wait_for(anext(feed), 10)  # the feed is up (and looked at all)
    assert "r" in first
    appended = subprocess.run(
        [sys.executable, "-c", APPENDER.replace("shared", "r"), store_spec, "x", "1"], env=env()
    )
    assert appended.returncode == 0
    deadline = time.monotonic() + 10
    while True:
        ids = await asyncio.wait_for(anext(feed), max(0.1, deadline - time.monotonic()))
        if "r" in ids:
            break
    await feed.aclose()  # type: ignore[attr-defined]


def test_runs_are_listed_in_the_order_of_their_ids(any_store: Store):
    ids = ["b", "B", "a-1", "a.1", "a_1", "A", "0"]
    for run_id in ids:
        any_store.append(run_id, started())
    assert any_store.run_ids() == sorted(ids)
    assert [s.run_id for s in any_store.summaries()] == sorted(ids)


def test_a_journal_built_by_hand_is_the_same_on_every_store(any_store: Store):
    """durableagent.testing builds one journal on any store: the same bytes, and an attempt
    ended as a killed worker ends it (saying nothing) reads as lost on both."""
    from durableagent import ToolCall
    from durableagent.testing import JournalWriter

    j = JournalWriter(any_store, "hand-1", 1_768_467_600.0)
    with j.attempt("worker-1", killed=True):
        j.start("I need access to billing.")
        j.asks(1, ToolCall("c1", "lookup_policy", {"topic": "access"}))
        j.tool("tool/1/0/lookup_policy", "Access needs a ticket.")
    with j.attempt("worker-2"):
        (pending,) = j.asks(2, ToolCall("c2", "create_ticket", {"summary": "billing"}))
        j.outcome(Status.AWAITING_APPROVAL, pending=(pending,))
    lines = any_store.export_run("hand-1")
    assert lines[0] == (
        b'{"seq":1,"type":"run.started","step":"","kind":"","data":{"input":[{"role":"user",'
        b'"content":"I need access to billing."}]},"at":1768467601.0,"crc":"' + lines[0][-10:]
    )
    assert [(a.owner, a.ended) for a in any_store.attempts("hand-1")] == [
        ("worker-1", "lost"),
        ("worker-2", "awaiting_approval"),
    ]
    summary = any_store.summary("hand-1")
    assert summary is not None and summary.status == "awaiting_approval"
    assert [p.marker for p in summary.pending] == [pending.marker]


def test_a_store_says_where_it_lives(any_store: Store, store_spec: str) -> None:
    """``description`` and ``directory`` are the protocol's: a caller never probes a store."""
    if isinstance(any_store, FileStore):
        assert any_store.directory == Path(store_spec)
        assert any_store.description == store_spec
    else:
        assert any_store.directory is None
        assert "schema=" in any_store.description

"""Leases: one runner per run, in this process and across processes."""

from __future__ import annotations

import os
import signal as sig
import subprocess
import sys
import time

import pytest

from durableagent import FileStore, RunBusyError, run
from helpdesk import INPUT, Side, helpdesk

HOLDER = """
import sys, time
from durableagent import FileStore
store = FileStore(sys.argv[1])
with store.lease("r1"):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_second_lease_in_this_process_is_refused_at_once(store: FileStore):
    with store.lease("r1"):
        assert store.is_leased("r1")
        with pytest.raises(RunBusyError) as e, store.lease("r1"):
            pass
        assert e.value.run_id == "r1"
        assert f"pid {os.getpid()}" in str(e.value)
        assert store.lease_holder("r1")["pid"] == os.getpid()
    assert not store.is_leased("r1")
    assert store.lease_holder("r1") is None
    with store.lease("r1"):  # free again once released
        pass


def test_a_lease_held_by_another_process_excludes_and_dies_with_it(store: FileStore):
    child = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(store.root)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout.readline().strip() == "held"
        assert store.is_leased("r1")
        with pytest.raises(RunBusyError, match=f"pid {child.pid}"), store.lease("r1"):
            pass
    finally:
        child.send_signal(sig.SIGKILL)
        child.wait()
        child.stdout.close()
    assert not store.is_leased("r1")  # the kernel dropped the flock with the process
    with store.lease("r1"):
        assert store.is_leased("r1")


async def test_run_refuses_a_busy_run_and_saves_no_outcome(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    from durableagent import submit

    submit(store, "r1", INPUT)
    with store.lease("r1"), pytest.raises(RunBusyError):
        await run(config, "r1", None)
    assert model.calls == 0
    assert store.last_outcome("r1") is None
    assert len(store.load("r1")) == 1


def test_is_leased_is_false_for_unknown_runs(store: FileStore):
    assert not store.is_leased("never")


class SlowStart(FileStore):
    """A disk that takes ``delay`` seconds to record the write's start (the holder's clock
    moves on meanwhile, as it does for a holder paused right after its fenced start)."""

    delay = 0.0

    def append(self, run_id, record, **kwargs):  # type: ignore[no-untyped-def]
        stored = super().append(run_id, record, **kwargs)
        if record.type == "step.started" and record.step == "tool/2/0/create_ticket":
            time.sleep(self.delay)
        return stored


async def test_a_holder_whose_lease_may_have_lapsed_during_the_start_calls_nothing(
    tmp_path, monkeypatch: pytest.MonkeyPatch
):
    """The fenced start landed, but by the holder's own clock its lease may be another's by
    now (it could not renew for longer than its ttl): it stops before calling the write."""
    from durableagent import LeaseLostError, StoreError, signal
    from durableagent.stores.file_leases import FileLease

    store = SlowStart(tmp_path / "runs", lease_ttl=0.3)
    side = Side(tmp_path / "side")
    config, _ = helpdesk(store, side)
    out = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": out.pending[0].marker}, by="alice")

    def unreachable(self: FileLease) -> None:
        raise StoreError("the disk does not answer")

    monkeypatch.setattr(FileLease, "renew", unreachable)
    store.delay = 0.6  # two ttls, with no renewal
    with pytest.raises(LeaseLostError):
        await run(config, "a1", None)
    assert side.tickets() == []  # the write was never called
    last = store.load("a1")[-1]
    assert (last.type, last.step) == ("step.started", "tool/2/0/create_ticket")

"""The module's promise under a real kill, on every store: five worker processes (named as
five hosts would be), two SIGKILLs, three model calls in all and exactly one ticket."""

from __future__ import annotations

import json
import signal as sig
import subprocess
import sys
from pathlib import Path

from procs import wait_for

from durableagent import Reconcile, RunStatus, Store, signal, view_store
from helpdesk import Side

CHILD = Path(__file__).parent.parent / "_kill_child.py"


def worker(spec: str, side: Side, host: int, kill_in: str = "none") -> subprocess.CompletedProcess:
    """One attempt of run a1 in a child named ``host-N``, as a worker on host N would be."""
    return subprocess.run(
        [sys.executable, str(CHILD), spec, str(side.root), kill_in, f"host-{host}"],
        capture_output=True,
        text=True,
        timeout=60,
    )


def lease_ends(store: Store) -> None:
    """The killed holder's lease ends: at once on one host (the kernel frees its flock), once
    its one-second ttl passes in PostgreSQL (a lease never ends with a connection)."""
    wait_for(lambda: not store.is_leased("a1"), timeout=15, why="the killed holder's lease")


def outcome(p: subprocess.CompletedProcess) -> dict:
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


def test_sigkill_inside_a_read_and_a_write_across_five_workers(
    any_store: Store, store_spec: str, tmp_path: Path
):
    store, side = any_store, Side(tmp_path / "side")
    # 1: killed inside lookup_policy (a read), after llm/1 was recorded.
    p1 = worker(store_spec, side, 1, "read")
    assert p1.returncode == -sig.SIGKILL
    assert (side.count("model"), side.count("lookup")) == (1, 1)
    lease_ends(store)
    assert view_store(store, "a1").status == RunStatus.READY

    # 2: the read re-runs, llm/1 does not; the gated write waits for a human.
    o2 = outcome(worker(store_spec, side, 2))
    assert o2["status"] == "awaiting_approval"
    assert (side.count("model"), side.count("lookup")) == (2, 2)
    signal(store, "a1", "approve", {"marker": o2["pending"][0]["marker"]}, by="alice")

    # 3: killed inside create_ticket, after the ticket exists.
    p3 = worker(store_spec, side, 3, "write")
    assert p3.returncode == -sig.SIGKILL
    lease_ends(store)
    assert len(side.tickets()) == 1
    last = store.load("a1")[-1]
    assert (last.type, last.step) == ("step.started", "tool/2/0/create_ticket")

    # 4: the next worker refuses to guess.
    o4 = outcome(worker(store_spec, side, 4))
    assert o4["status"] == "indeterminate" and o4["step"] == "tool/2/0/create_ticket"
    # Was its holder surely dead? On one host yes (the kernel freed its flock); in PostgreSQL
    # a kill looks like a pause, so the human is told its write may still land.
    late = view_store(store, "a1").late_write
    assert bool(late) == (not store.leases_die_with_holder), late
    if late:
        assert "owner host-3" in late and "fencing token" in late
    assert len(side.tickets()) == 1 and side.count("model") == 2
    ticket = json.loads(side.tickets()[0])["id"]
    signal(
        store, "a1", "reconcile", Reconcile("tool/2/0/create_ticket", "done", ticket), by="oncall"
    )

    # 5: the human's result is replayed as the tool's answer; only llm/3 calls the model.
    o5 = outcome(worker(store_spec, side, 5))
    assert o5["status"] == "completed"
    assert o5["message"]["content"] == f"Ticket filed: {ticket}"
    assert side.count("model") == 3
    assert len(side.tickets()) == 1
    assert side.count("lookup") == 2
    assert view_store(store, "a1").status == RunStatus.COMPLETED

    assert [a.owner for a in store.attempts("a1")] == [f"host-{n}" for n in range(1, 6)]
    assert [a.ended for a in store.attempts("a1")] == [
        "lost",
        "awaiting_approval",
        "lost",
        "indeterminate",
        "completed",
    ]


def test_a_reconcile_retry_whose_write_ran_again_and_died_again_is_applied(
    any_store: Store, store_spec: str, tmp_path: Path
):
    """The retry a human asked for happened: the write started again (its start is in the
    journal), even though its worker was SIGKILLed inside it once more and no result came."""
    from durableagent.audit import decisions

    store, side = any_store, Side(tmp_path / "side")
    step = "tool/2/0/create_ticket"
    o1 = outcome(worker(store_spec, side, 1))
    assert o1["status"] == "awaiting_approval"
    signal(store, "a1", "approve", {"marker": o1["pending"][0]["marker"]}, by="alice")
    assert worker(store_spec, side, 2, "write").returncode == -sig.SIGKILL
    lease_ends(store)
    retry = signal(store, "a1", "reconcile", Reconcile(step, "retry"), by="cy", reason="not filed")
    *_, asked = decisions(store.load("a1"), "a1")
    assert (asked.decision, asked.effect) == ("reconciled_retry", "pending")

    assert worker(store_spec, side, 3, "write").returncode == -sig.SIGKILL  # died again
    lease_ends(store)
    assert len(side.tickets()) == 2
    again = [r.seq for r in store.load("a1") if r.type == "step.started" and r.step == step]
    assert len(again) == 2 and again[1] > retry.seq
    assert not any(r.type == "step.completed" and r.step == step for r in store.load("a1"))
    *_, done = decisions(store.load("a1"), "a1")
    assert (done.decision, done.effect, done.by) == ("reconciled_retry", "applied", "cy")
    assert done.note == f"the write ran again (seq {again[1]})"
    assert view_store(store, "a1").status == RunStatus.INDETERMINATE

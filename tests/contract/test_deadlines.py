"""Approval deadlines on every store, with real worker processes: a call nobody decides
within its ``approve_within`` is denied by a worker (``by: "deadline"``), never approved; the
model reads the refusal; and a human's decision that came first wins, with nothing written by
the deadline, however close to it the human decides (SPEC §10)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from _child_agents import lines
from procs import WorkerProcess, wait_for

from durableagent import Message, RunStatus, Store, submit, view_store
from durableagent.deadlines import lapsed
from durableagent.record import signal_fields

pytestmark = pytest.mark.slow


def agentrun(spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args, "--store", spec],
        capture_output=True,
        text=True,
        timeout=60,
    )


# A human's approve in a process of its own, which lands at a given moment (a CLI process
# would land a few hundred milliseconds after it was started, too late to race anything).
HUMAN = """
import sys, time
from durableagent import SignalError, open_store, signal
spec, rid, marker, at = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
store = open_store(spec)
time.sleep(max(0.0, at - time.time()))
try:
    signal(store, rid, "approve", {"marker": marker}, by="ana")
except SignalError as e:
    print(e, file=sys.stderr)
    sys.exit(1)
"""


def approve_at(spec: str, run_id: str, marker: str, at: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", HUMAN, spec, run_id, marker, repr(at)],
        capture_output=True,
        text=True,
        timeout=60,
    )


def signals(store: Store, run_id: str) -> list[tuple[str, str | None, str | None]]:
    """(name, by, reason) of each signal in the run's journal."""
    out = []
    for r in store.load(run_id):
        if r.type == "signal":
            name, _, by, reason = signal_fields(r)
            out.append((name, by, reason))
    return out


def awaiting(store: Store, run_id: str) -> float:
    """Wait for the run to ask for its approval; the call's deadline_at."""
    wait_for(
        lambda: view_store(store, run_id).status == RunStatus.AWAITING_APPROVAL,
        timeout=20,
        why=f"{run_id} to wait for its approval",
    )
    (p,) = view_store(store, run_id).pending
    assert p.deadline_at is not None
    return p.deadline_at


def done(store: Store, run_id: str) -> None:
    wait_for(
        lambda: view_store(store, run_id).status == RunStatus.COMPLETED,
        timeout=20,
        why=f"{run_id} to complete",
    )


def test_a_lapsed_approval_is_denied_by_a_worker_and_the_model_reads_why(
    any_store: Store,
    store_spec: str,
    tmp_path: Path,
    workers: Callable[..., WorkerProcess],
) -> None:
    side = tmp_path / "side"
    submit(any_store, "t1", [Message("user", "vpn for ana")])
    # Long enough for a loaded machine to see the wait and run `show` before it lapses.
    workers(store_spec, "lapsing", AGENTRUN_SIDE=str(side), AGENTRUN_TEST_WITHIN="8")
    deadline_at = awaiting(any_store, "t1")
    asked = next(r for r in any_store.load("t1") if r.type == "step.completed")
    assert deadline_at == pytest.approx(asked.at + 8, abs=0.01)  # from the asking model step
    (shown,) = json.loads(agentrun(store_spec, "show", "t1", "--json").stdout)["pending"]
    assert shown["deadline_at"] == pytest.approx(deadline_at)
    assert shown["deadline_at_iso"].endswith("Z")
    done(any_store, "t1")
    assert signals(any_store, "t1") == [("deny", "deadline", "no decision within 8s")]
    deny = next(r for r in any_store.load("t1") if r.type == "signal")
    assert deny.at >= deadline_at  # never before its time
    assert lines(side, "tickets") == []  # denied, never approved: nothing filed
    answer = view_store(any_store, "t1").answer
    assert answer is not None and "no decision within 8s" in answer.content
    audited = agentrun(store_spec, "audit", "--run", "t1", "--json")
    (decision,) = [json.loads(line) for line in audited.stdout.splitlines()]
    assert (decision["decision"], decision["by"]) == ("denied", "deadline")


def test_a_human_deciding_against_the_deadline_is_one_decision_never_both(
    any_store: Store,
    store_spec: str,
    tmp_path: Path,
    workers: Callable[..., WorkerProcess],
) -> None:
    """The human's approve, a process of its own, lands just before, at or just after the
    moment a worker denies the call: exactly one decision is recorded, and the write runs if
    and only if it is the approval. Well before the deadline, the human always wins."""
    side = tmp_path / "side"
    workers(store_spec, "lapsing", AGENTRUN_SIDE=str(side), AGENTRUN_TEST_WITHIN="1")
    offsets = [-0.5, -0.03, -0.01, 0.0, 0.01, 0.03]
    outcomes = []
    for i, offset in enumerate(offsets):
        rid = f"r{i}"
        submit(any_store, rid, [Message("user", f"ticket {i}")])
        deadline_at = awaiting(any_store, rid)
        (p,) = view_store(any_store, rid).pending
        human = approve_at(store_spec, rid, p.marker, deadline_at + offset)
        done(any_store, rid)
        (decision,) = signals(any_store, rid)  # one decision, never both
        filed = f"ticket {i}" in lines(side, "tickets")
        if decision[0] == "approve":
            assert human.returncode == 0, human.stderr
            assert decision[1] == "ana" and filed
        else:
            assert decision[:2] == ("deny", "deadline")
            assert human.returncode == 1, human.stdout
            # Refused for what came first: the deny, the refusal recorded, or the run's end.
            lost = ("denied by deadline", "already has a result", "completed")
            assert any(why in human.stderr for why in lost), human.stderr
            assert not filed
        outcomes.append(decision[0])
    assert outcomes[0] == "approve"  # half a second early: the human's decision stands
    assert lines(side, "tickets").count("ticket 0") == 1


async def test_an_approval_deadline_counts_from_the_ask_not_from_a_later_attempt(
    any_store: Store,
) -> None:
    """The model asked an hour ago (its attempt died there); the attempt that now stops for
    the approval gives the call the deadline that started at the ask: one hour left of two,
    and none left of half an hour (a worker denies it at once)."""
    import time

    from durableagent import (
        AgentConfig,
        Config,
        PolicyGate,
        ScriptedModel,
        Status,
        Tool,
        ToolCall,
        run,
    )
    from durableagent.testing import JournalWriter

    for run_id, within in (("d1", 7200.0), ("d2", 1800.0)):
        j = JournalWriter(any_store, run_id, time.time() - 3600)
        j.start("file it")
        with j.attempt("host-a:1", killed=True):
            j.asks(1, ToolCall("c1", "file", {"summary": "VPN"}))
        asked = next(r for r in any_store.load(run_id) if r.type == "step.completed")

        def never(messages: object) -> Message:
            raise AssertionError("the recorded model step was called again")

        tools = [Tool("file", fn=lambda args: "T-1")]
        gate = PolicyGate(writes={"file"}, approve_within={"file": within})
        config = Config(AgentConfig(ScriptedModel(never), tools), gate, any_store)
        out = await run(config, run_id, None)
        assert out.status == Status.AWAITING_APPROVAL
        (p,) = out.pending
        assert p.deadline_at == pytest.approx(asked.at + within, abs=0.01)
        (shown,) = view_store(any_store, run_id).pending
        assert shown.deadline_at == pytest.approx(asked.at + within, abs=0.01)
    assert lapsed(view_store(any_store, "d2").pending, time.time())
    assert not lapsed(view_store(any_store, "d1").pending, time.time())

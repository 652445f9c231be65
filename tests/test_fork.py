"""fork(): a new run that replays a run's history up to a step and runs afresh from there
(SPEC §9). The worker-process version is in test_operations_cli.py."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

import pytest

from durableagent import (
    Config,
    FileStore,
    ForkedFrom,
    ForkError,
    Message,
    Reconcile,
    Record,
    RunNotFoundError,
    RunStatus,
    ScriptedModel,
    SignalError,
    Status,
    fork,
    fork_points,
    forks_of,
    marker_for,
    plan_fork,
    run,
    signal,
    submit,
    view_store,
)
from durableagent.record import RUN_STARTED
from helpdesk import INPUT, Side, helpdesk


async def completed_run(store: FileStore, side: Side, run_id: str = "a1") -> Config:
    """The helpdesk run, approved by ana, to its answer."""
    config, _ = helpdesk(store, side)
    out = await run(config, run_id, INPUT)
    signal(store, run_id, "approve", {"marker": out.pending[0].marker}, by="ana", reason="ok")
    assert (await run(config, run_id, None)).status == Status.COMPLETED
    return config


def journal(store: FileStore, run_id: str) -> list[tuple[str, str]]:
    return [(r.type, r.step) for r in store.load(run_id)]


def with_model(config: Config, reply: object) -> tuple[Config, ScriptedModel]:
    model = ScriptedModel(reply)  # type: ignore[arg-type]
    return replace(config, agent=replace(config.agent, model=model)), model


async def test_a_fork_copies_the_records_before_the_step_and_leaves_the_original(
    store: FileStore, side: Side
) -> None:
    await completed_run(store, side)
    original = store.path("a1").read_bytes()
    before = store.load("a1")
    cut = next(
        r.seq for r in before if r.type == "step.started" and r.step == "tool/2/0/create_ticket"
    )

    time.sleep(0.01)  # the copies keep their times, older than the fork's run.started
    started = fork(
        store, "a1", "a2", at_step="tool/2/0/create_ticket", by="bo", reason="new ticket API"
    )

    assert store.path("a1").read_bytes() == original
    records = store.load("a2")
    assert records[0] == started and started.type == RUN_STARTED and started.seq == 1
    assert started.data["input"] == before[0].data["input"]
    copied = [r for r in before[1:] if r.seq < cut]
    assert started.data["forked_from"] == {
        "run": "a1",
        "seq": cut - 1,
        "step": "tool/2/0/create_ticket",
        "by": "bo",
        "reason": "new ticket API",
        "copied": len(copied),
    }
    assert [(r.type, r.step, r.kind, r.data, r.at) for r in records[1:]] == [
        (r.type, r.step, r.kind, r.data, r.at) for r in copied
    ]
    assert [r.seq for r in records] == list(range(1, len(records) + 1))
    view = view_store(store, "a2")
    assert view.status == RunStatus.READY
    assert view.forked_from == ForkedFrom(
        "a1", cut - 1, "tool/2/0/create_ticket", "bo", "new ticket API", len(copied)
    )
    assert forks_of(store, "a1") == ["a2"] and forks_of(store, "a2") == []
    summary = store.summary("a2")
    assert summary is not None and summary.forked_from == view.forked_from
    assert FileStore(store.root).summaries()[1].forked_from == view.forked_from  # the index
    # Its last activity is the fork, not the newest copy (ls and the TUI sort by it).
    assert view.last_activity == started.at and summary.last_activity == started.at


async def test_the_fork_replays_what_it_copied_and_runs_the_step_on_with_todays_agent(
    store: FileStore, side: Side
) -> None:
    config = await completed_run(store, side)
    fork(store, "a1", "a2", at_step="tool/2/0/create_ticket")

    def fixed(messages: Sequence[Message]) -> Message:
        tools = [m for m in messages if m.role == "tool"]
        return Message("assistant", f"fixed prompt: {tools[-1].content}")

    config2, model = with_model(config, fixed)
    out = await run(config2, "a2", None)

    assert out.status == Status.COMPLETED
    assert out.message is not None and out.message.content == "fixed prompt: TICKET-2"
    assert model.calls == 1  # llm/3 only: llm/1 and llm/2 replayed from the copy
    assert side.count("lookup") == 1  # the lookup was copied, not repeated
    assert len(side.tickets()) == 2  # the ticket step ran again, approved by the copied signal


async def test_a_fork_at_a_model_step_asks_the_model_again_from_there(
    store: FileStore, side: Side
) -> None:
    config = await completed_run(store, side)
    fork(store, "a1", "a2", at_step="llm/2")
    assert journal(store, "a2")[-1] == ("step.completed", "tool/1/0/lookup_policy")

    config2, model = with_model(config, lambda m: Message("assistant", "no ticket needed"))
    out = await run(config2, "a2", None)
    assert out.message is not None and out.message.content == "no ticket needed"
    assert model.calls == 1 and side.count("lookup") == 1 and len(side.tickets()) == 1


async def test_a_step_that_never_started_cuts_after_the_last_record(
    store: FileStore, side: Side
) -> None:
    config, _ = helpdesk(store, side)
    out = await run(config, "a1", INPUT)  # awaiting approval of tool/2/0/create_ticket
    pending = out.pending[0]
    assert fork_points(store.load("a1"))[-1] == pending.step

    fork(store, "a1", "a2", at_step=pending.step)
    assert journal(store, "a2")[1:] == journal(store, "a1")[1:]
    with pytest.raises(ForkError, match=r"no step 'llm/3'.*tool/2/0/create_ticket"):
        fork(store, "a1", "a3", at_step="llm/3")

    signal(store, "a2", "approve", {"marker": pending.marker})
    assert (await run(config, "a2", None)).status == Status.COMPLETED
    assert journal(store, "a1")[-1] == ("step.completed", "llm/2")  # untouched


async def test_the_next_model_turn_is_a_fork_point_and_a_completed_run_has_none(
    store: FileStore, side: Side
) -> None:
    await completed_run(store, side)
    points = fork_points(store.load("a1"))
    assert points == [
        "llm/1",
        "tool/1/0/lookup_policy",
        "llm/2",
        "tool/2/0/create_ticket",
        "llm/3",
    ]
    with pytest.raises(ForkError, match="no step 'llm/4'"):
        fork(store, "a1", "a2", at_step="llm/4")
    with pytest.raises(ForkError, match="no step 'tool/9/0/x'"):
        fork(store, "a1", "a2", at_step="tool/9/0/x")
    assert store.load("a2") == []
    assert fork_points(store.load("a1")[:5])[-1] == "llm/2"  # after the lookup's result


async def test_run_completed_is_never_copied(store: FileStore, side: Side) -> None:
    await completed_run(store, side)
    fork(store, "a1", "a2", at_step="llm/3")
    types = [t for t, _ in journal(store, "a2")]
    assert "run.completed" not in types and types[-1] == "step.completed"


async def indeterminate_run(store: FileStore, side: Side) -> Config:
    """The helpdesk run stopped by a crash inside create_ticket (after it filed the ticket)."""
    config, _ = helpdesk(store, side)
    out = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": out.pending[0].marker})

    def crash(args: object) -> str:
        side.note("tickets", "TICKET-1")
        raise ConnectionError("reset after the ticket was filed")

    tools = [t if t.name != "create_ticket" else replace(t, fn=crash) for t in config.agent.tools]
    broken = replace(config, agent=replace(config.agent, tools=tools))
    with pytest.raises(ConnectionError):
        await run(broken, "a1", None)
    assert view_store(store, "a1").status == RunStatus.INDETERMINATE
    return config


async def test_an_open_write_before_the_step_refuses_the_fork(store: FileStore, side: Side) -> None:
    await indeterminate_run(store, side)
    with pytest.raises(ForkError) as e:
        fork(store, "a1", "a2", at_step="llm/3")
    assert "write step 'tool/2/0/create_ticket'" in str(e.value)
    assert "Reconcile it first" in str(e.value) and "agentrun reconcile a1" in str(e.value)
    assert store.load("a2") == []
    fork(store, "a1", "a2", at_step="tool/2/0/create_ticket")  # the open write is not copied
    assert ("step.started", "tool/2/0/create_ticket") not in journal(store, "a2")


async def test_a_write_reconciled_done_is_copied_with_its_reconcile(
    store: FileStore, side: Side
) -> None:
    config = await indeterminate_run(store, side)
    signal(store, "a1", "reconcile", Reconcile("tool/2/0/create_ticket", "done", "TICKET-1"))

    with pytest.raises(ForkError, match="--drop-signals leaves behind"):
        fork(store, "a1", "a2", at_step="llm/3", signals="drop")
    fork(store, "a1", "a2", at_step="llm/3")
    out = await run(config, "a2", None)
    assert out.message is not None and out.message.content == "Ticket filed: TICKET-1"
    assert side.tickets() == ["TICKET-1"]  # nobody filed it again


async def test_a_write_reconciled_retry_that_did_not_run_again_refuses_the_fork(
    store: FileStore, side: Side
) -> None:
    await indeterminate_run(store, side)
    signal(store, "a1", "reconcile", Reconcile("tool/2/0/create_ticket", "retry"))
    with pytest.raises(ForkError, match="reconciled as retry and has not run again"):
        fork(store, "a1", "a2", at_step="llm/3")


async def test_approvals_carry_over_unless_dropped(store: FileStore, side: Side) -> None:
    config = await completed_run(store, side)
    step = "tool/2/0/create_ticket"
    plan = plan_fork(store.load("a1"), "a1", "a2", at_step=step)
    assert [r.data["name"] for r in plan.kept_signals] == ["approve"]

    fork(store, "a1", "a2", at_step=step, signals="drop")
    assert "signal" not in [t for t, _ in journal(store, "a2")]
    out = await run(config, "a2", None)
    assert out.status == Status.AWAITING_APPROVAL and out.pending[0].step == step
    assert len(side.tickets()) == 1  # waits for a human again


def test_an_approval_carries_over_only_with_its_marker(store: FileStore) -> None:
    """Hand-made: an approval whose digest names other arguments than the copied call's."""
    call = {"id": "c1", "name": "send", "arguments": {"to": "bo"}}
    reply = {"role": "assistant", "content": "", "tool_calls": [call]}
    other = "tool/1/0/send#000000000000"  # the digest of other arguments
    approval = {"name": "approve", "payload": {"marker": other}, "by": "x", "reason": None}
    store.append(
        "h1", Record.make(RUN_STARTED, data={"input": [{"role": "user", "content": "hi"}]})
    )
    store.append("h1", Record.make("step.started", "llm/1", "model"))
    store.append("h1", Record.make("step.completed", "llm/1", "model", reply))
    store.append("h1", Record.make("signal", "tool/1/0/send", "", approval))
    marker = marker_for("tool/1/0/send", {"to": "bo"})
    signal(store, "h1", "deny", {"marker": marker}, by="ana")

    plan = plan_fork(store.load("h1"), "h1", "h2", at_step="tool/1/0/send")
    assert [r.data["payload"]["marker"] for r in plan.kept_signals] == [marker]
    assert [r.data["payload"]["marker"] for r in plan.dropped_signals] == [other]


async def test_a_fork_into_an_existing_run_or_from_an_unknown_one_is_refused(
    store: FileStore, side: Side
) -> None:
    await completed_run(store, side)
    submit(store, "b1", INPUT)
    before = store.path("b1").read_bytes()
    with pytest.raises(ForkError, match="run 'b1' already exists"):
        fork(store, "a1", "b1", at_step="llm/2")
    assert store.path("b1").read_bytes() == before
    with pytest.raises(ForkError, match="new run id"):
        fork(store, "a1", "a1", at_step="llm/2")
    with pytest.raises(RunNotFoundError):
        fork(store, "nosuch", "b2", at_step="llm/2")
    fork(store, "a1", "a2", at_step="llm/2")
    with pytest.raises(ForkError, match="run 'a2' already exists"):
        fork(store, "a1", "a2", at_step="llm/2")  # a whole fork is not written twice


async def test_an_interrupted_fork_runs_nowhere_and_the_same_fork_finishes_it(
    store: FileStore, side: Side
) -> None:
    config = await completed_run(store, side)
    plan = plan_fork(store.load("a1"), "a1", "a2", at_step="llm/3", by="bo")
    store.append("a2", plan.started)  # the forker was killed after two of its copies
    for r in plan.copies[:2]:
        store.append("a2", r)

    view = view_store(store, "a2")
    assert view.status == RunStatus.CORRUPT
    assert "interrupted fork of a1 at llm/3 (2 of 9 records copied)" in view.error
    assert "agentrun fork a1 --at llm/3 --as a2" in view.error
    summary = store.summary("a2")
    assert summary is not None and summary.status == RunStatus.CORRUPT
    assert summary.error == view.error
    with store.lease("a2"):  # the forker at work: running, not corrupt
        assert view_store(store, "a2").status == RunStatus.RUNNING
        assert {s.run_id: s.status for s in store.summaries()}["a2"] == RunStatus.RUNNING
    with pytest.raises(ForkError, match="interrupted fork"):
        await run(config, "a2", None)
    with pytest.raises(SignalError, match="interrupted fork"):
        signal(store, "a2", "reconcile", Reconcile("tool/2/0/create_ticket", "retry"))
    with pytest.raises(ForkError, match="already exists"):
        fork(store, "a1", "a2", at_step="llm/2")  # another fork: not this one's rest

    started = fork(store, "a1", "a2", at_step="llm/3", by="someone else")
    assert started == store.load("a2")[0] and started.data["forked_from"]["by"] == "bo"
    assert len(store.load("a2")) == 1 + len(plan.copies)
    assert view_store(store, "a2").status == RunStatus.READY
    assert (await run(config, "a2", None)).status == Status.COMPLETED


async def test_an_idempotent_write_left_open_refuses_the_fork(store: FileStore, side: Side) -> None:
    """Its key is the original run's: the original re-runs it with that key, a fork could not."""
    await completed_run(store, side)
    records = store.load("a1")
    cut = next(r.seq for r in records if r.step == "llm/3")
    store.append("h1", records[0])
    for r in records[1:]:
        if r.seq < cut and r.step != "tool/2/0/create_ticket":
            store.append("h1", r)
    store.append(
        "h1",
        Record.make(
            "step.started", "tool/2/0/create_ticket", "tool", {"write": True, "idempotent": True}
        ),
    )
    with pytest.raises(ForkError, match="idempotent write whose key belongs to h1"):
        fork(store, "h1", "h2", at_step="llm/3")


async def test_forking_a_cancelled_run_before_its_cancel_gives_a_ready_fork(
    store: FileStore, side: Side
) -> None:
    """The run was cancelled while it waited for the ticket's approval. A fork at the model
    step that asked, and one at the call itself (the cut comes after the cancel), leave the
    cancel behind: each is ready, a worker runs it, and it asks for the approval again."""
    config, _ = helpdesk(store, side)
    out = await run(config, "c1", INPUT)
    assert out.status == Status.AWAITING_APPROVAL
    cancel = signal(store, "c1", "cancel", {}, by="ana", reason="wrong customer")
    assert view_store(store, "c1").status == RunStatus.CANCELLED
    for new, step in (("c1-llm", "llm/2"), ("c1-call", "tool/2/0/create_ticket")):
        plan = plan_fork(store.load("c1"), "c1", new, at_step=step)
        if step == "tool/2/0/create_ticket":
            assert cancel.seq in [r.seq for r in plan.dropped_signals]
        fork(store, "c1", new, at_step=step, by="bo", reason="the right customer")
        assert not any(r.type == "signal" for r in store.load(new))
        assert view_store(store, new).status == RunStatus.READY
        (row,) = [s for s in store.summaries() if s.run_id == new]
        assert row.status == RunStatus.READY
        forked = await run(config, new, None)
        assert forked.status == Status.AWAITING_APPROVAL
        assert [p.step for p in forked.pending] == ["tool/2/0/create_ticket"]
    assert side.tickets() == []
    assert view_store(store, "c1").status == RunStatus.CANCELLED

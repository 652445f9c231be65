"""Signals are validated under the journal's lock: a refused one leaves the file byte-identical."""

from __future__ import annotations

import pytest

from durableagent import (
    FileStore,
    Message,
    PolicyGate,
    RunStatus,
    SignalError,
    Status,
    ToolCall,
    marker_for,
    run,
    signal,
    view_store,
)
from helpdesk import INPUT, Side, helpdesk

MARK_STEP = "tool/2/0/create_ticket"


async def waiting(store: FileStore, side: Side):
    config, _ = helpdesk(store, side)
    out = await run(config, "a1", INPUT)
    return config, out.pending[0].marker


def refused(store: FileStore, run_id: str, name: str, payload, match: str, **kw) -> None:
    before = store.path(run_id).read_bytes()
    with pytest.raises(SignalError, match=match) as e:
        signal(store, run_id, name, payload, **kw)
    assert e.value.run_id == run_id
    assert store.path(run_id).read_bytes() == before


async def test_every_refused_signal_leaves_the_journal_byte_identical(store: FileStore, side: Side):
    _config, marker = await waiting(store, side)
    other_args = marker_for(MARK_STEP, {"summary": "something else"})
    refused(store, "a1", "launch", {}, "unknown signal 'launch'")
    refused(store, "a1", "approve", {}, "needs a payload")
    refused(store, "a1", "approve", "tool/2/0/create_ticket", "needs a payload")
    refused(store, "a1", "approve", {"marker": other_args}, "no tool call with marker")
    refused(store, "a1", "approve", {"marker": "tool/9/0/create_ticket#abc"}, "no tool call")
    refused(store, "a1", "approve", {"marker": "tool/2/1/create_ticket#abc"}, "no tool call")
    refused(store, "a1", "approve", {"marker": "tool/2/0/send_email#abc"}, "no tool call")
    refused(store, "a1", "deny", {"marker": "llm/2#abc"}, "no tool call")
    refused(
        store, "a1", "approve", {"marker": "tool/1/0/lookup_policy#" + "0" * 12}, "no tool call"
    )
    lookup = marker_for("tool/1/0/lookup_policy", {"topic": "access"})
    refused(store, "a1", "approve", {"marker": lookup}, "already has a result")
    refused(store, "a1", "reconcile", {"step": MARK_STEP, "outcome": "maybe"}, "'done' or")
    refused(store, "a1", "reconcile", {"step": MARK_STEP, "outcome": "done"}, "needs the result")
    refused(
        store, "a1", "reconcile", {"step": MARK_STEP, "outcome": "done", "result": " "}, "needs"
    )
    refused(store, "a1", "reconcile", {"step": MARK_STEP, "outcome": "retry"}, "never started")
    refused(
        store,
        "a1",
        "reconcile",
        {"step": "tool/1/0/lookup_policy", "outcome": "retry"},
        "already has a result",
    )
    refused(store, "a1", "reconcile", "oops", "needs a payload")
    refused(store, "a1", "approve", {"marker": marker}, "by must be", by=5)

    signal(store, "a1", "approve", {"marker": marker}, by="alice")
    refused(store, "a1", "approve", {"marker": marker}, "already approved by alice")


async def test_deny_records_an_error_result_and_the_run_goes_on(store: FileStore, side: Side):
    config, marker = await waiting(store, side)
    rec = signal(store, "a1", "deny", {"marker": marker}, by="bob", reason="use the portal")
    assert rec.type == "signal" and rec.step == MARK_STEP
    assert rec.data == {
        "name": "deny",
        "payload": {"marker": marker},
        "by": "bob",
        "reason": "use the portal",
    }
    refused(store, "a1", "approve", {"marker": marker}, "already denied by bob")

    out = await run(config, "a1", None)

    assert out.status == Status.COMPLETED
    assert side.tickets() == []
    result = [r for r in store.load("a1") if r.step == MARK_STEP and r.type == "step.completed"]
    assert result[0].data == {"content": "denied by bob: use the portal", "is_error": True}
    started = [r for r in store.load("a1") if r.step == MARK_STEP and r.type == "step.started"]
    # A refusal touches nothing: its start says so, with the gate's class (a denied write is
    # still a write), and it is never indeterminate.
    assert started[0].data == {"write": True, "refused": True}
    assert out.message is not None and "denied by bob" in out.message.content


async def test_deny_after_approve_wins_before_the_call_runs(store: FileStore, side: Side):
    config, marker = await waiting(store, side)
    signal(store, "a1", "approve", {"marker": marker})
    signal(store, "a1", "deny", {"marker": marker}, reason="changed my mind")
    out = await run(config, "a1", None)
    assert out.status == Status.COMPLETED
    assert side.tickets() == []


async def test_signals_on_a_completed_run_are_refused(store: FileStore, side: Side):
    config, marker = await waiting(store, side)
    signal(store, "a1", "approve", {"marker": marker})
    await run(config, "a1", None)
    refused(store, "a1", "deny", {"marker": marker}, "is completed")
    refused(store, "a1", "reconcile", {"step": MARK_STEP, "outcome": "retry"}, "is completed")


async def test_reconcile_of_a_read_is_refused(store: FileStore, side: Side):
    from durableagent import Record

    store.append("r", Record.make("run.started", data={"input": [INPUT[0].to_dict()]}))
    store.append(
        "r", Record.make("step.started", "tool/1/0/lookup_policy", "tool", {"write": False})
    )
    refused(
        store, "r", "reconcile", {"step": "tool/1/0/lookup_policy", "outcome": "retry"}, "is a read"
    )


async def test_two_pending_calls_in_one_turn_need_both_decisions(store: FileStore):
    def model(messages):
        if any(m.role == "tool" for m in messages):
            return Message("assistant", "done")
        return Message(
            "assistant",
            tool_calls=(
                ToolCall("a", "create_ticket", {"summary": "one"}),
                ToolCall("b", "send_email", {"to": "x@example.com"}),
            ),
        )

    from durableagent import AgentConfig, Config, ScriptedModel, Tool

    ran = []
    tools = [
        Tool(n, fn=lambda a, n=n: ran.append(n) or "ok") for n in ("create_ticket", "send_email")
    ]
    config = Config(
        AgentConfig(ScriptedModel(model), tools),
        PolicyGate(writes={"create_ticket", "send_email"}),
        store,
    )
    out = await run(config, "two", [Message("user", "hi")])
    assert [p.tool for p in out.pending] == ["create_ticket", "send_email"]
    assert view_store(store, "two").status == RunStatus.AWAITING_APPROVAL

    signal(store, "two", "approve", {"marker": out.pending[0].marker})
    view = view_store(store, "two")
    assert view.status == RunStatus.AWAITING_APPROVAL
    assert [p.tool for p in view.pending] == ["send_email"]
    again = await run(config, "two", None)
    assert [p.tool for p in again.pending] == ["send_email"]  # nothing of the turn ran
    assert ran == []

    signal(store, "two", "approve", {"marker": out.pending[1].marker})
    assert view_store(store, "two").status == RunStatus.READY
    assert (await run(config, "two", None)).status == Status.COMPLETED
    assert ran == ["create_ticket", "send_email"]


TICKET_A, TICKET_B = "tool/1/1/create_ticket", "tool/1/2/create_ticket"
DENY_B = marker_for(TICKET_B, {"summary": "b"})


def lookup_and_two_tickets(store: FileStore, *, deny_b_while_looking: bool, gated: bool):
    """One turn asks for a lookup and tickets a and b, then answers; the lookup itself may
    record a human's deny of ticket b (a decision landing while the turn runs). The Config,
    and the summaries of the tickets filed."""
    from durableagent import AgentConfig, Config, ScriptedModel, Tool

    filed: list[str] = []

    def model(messages):
        done = [m.content for m in messages if m.role == "tool"]
        if done:
            return Message("assistant", " | ".join(done))
        return Message(
            "assistant",
            tool_calls=(
                ToolCall("l", "lookup", {}),
                ToolCall("a", "create_ticket", {"summary": "a"}),
                ToolCall("b", "create_ticket", {"summary": "b"}),
            ),
        )

    def lookup(args):
        if deny_b_while_looking:
            signal(store, "d", "deny", {"marker": DENY_B}, by="bob", reason="one is enough")
        return "policy"

    def create_ticket(args):
        filed.append(args["summary"])
        return f"TICKET-{args['summary']}"

    tools = [Tool("lookup", fn=lookup), Tool("create_ticket", fn=create_ticket)]
    gate = PolicyGate(writes={"create_ticket"}, approve={"create_ticket"} if gated else ())
    return Config(AgentConfig(ScriptedModel(model), tools), gate, store), filed


def results(store: FileStore, run_id: str) -> dict[str, object]:
    return {r.step: r.data for r in store.load(run_id) if r.type == "step.completed"}


@pytest.mark.parametrize("when", ["before_the_run_resumes", "while_the_turn_runs"])
async def test_a_deny_refuses_only_the_call_it_names(store: FileStore, when: str):
    """A human denies ticket b, before the run resumes or while the turn's lookup runs:
    ticket a, the other call of that turn, is filed all the same."""
    before = when == "before_the_run_resumes"
    config, filed = lookup_and_two_tickets(store, deny_b_while_looking=not before, gated=before)
    out = await run(config, "d", [Message("user", "two tickets")])
    if before:
        assert [p.marker for p in out.pending] == [marker_for(TICKET_A, {"summary": "a"}), DENY_B]
        signal(store, "d", "approve", {"marker": out.pending[0].marker}, by="ana")
        signal(store, "d", "deny", {"marker": DENY_B}, by="bob", reason="one is enough")
        out = await run(config, "d", None)
    assert out.status == Status.COMPLETED
    assert "a" in filed
    assert results(store, "d")[TICKET_A] == {"content": "TICKET-a", "is_error": False}
    if before:
        assert filed == ["a"]
        refusal = {"content": "denied by bob: one is enough", "is_error": True}
        assert results(store, "d")[TICKET_B] == refusal


async def test_a_deny_that_lands_while_the_turn_runs_stops_a_later_call_of_that_turn(
    store: FileStore,
):
    config, filed = lookup_and_two_tickets(store, deny_b_while_looking=True, gated=False)
    out = await run(config, "d", [Message("user", "two tickets")])
    assert out.status == Status.COMPLETED
    assert filed == ["a"]
    refusal = {"content": "denied by bob: one is enough", "is_error": True}
    assert results(store, "d")[TICKET_B] == refusal


async def test_a_signal_pinned_to_an_old_seq_is_refused_under_the_lock(
    store: FileStore, side: Side
):
    from durableagent import RunChangedError

    _, marker = await waiting(store, side)
    seen = store.load("a1")[-1].seq
    signal(store, "a1", "approve", {"marker": marker}, by="alice", expect_seq=seen)
    before = store.path("a1").read_bytes()
    with pytest.raises(RunChangedError) as e:
        signal(store, "a1", "deny", {"marker": marker}, by="bob", expect_seq=seen)
    assert (e.value.expected, e.value.actual) == (seen, seen + 1)
    assert "changed since you looked" in str(e.value)
    assert store.path("a1").read_bytes() == before


async def test_deciding_on_a_call_whose_step_already_started_is_refused(
    store: FileStore, side: Side
):
    config, marker = await waiting(store, side)
    signal(store, "a1", "approve", {"marker": marker}, by="alice")

    def dies(args):
        side.note("tickets", "TICKET-1")
        raise ConnectionError("reset after the ticket was filed")

    from durableagent import AgentConfig, Config, Tool

    tools = [Tool(t.name, fn=dies) if t.name == "create_ticket" else t for t in config.agent.tools]
    broken = Config(AgentConfig(config.agent.model, tools), config.gate, store)
    with pytest.raises(ConnectionError):
        await run(broken, "a1", None)
    assert view_store(store, "a1").status == RunStatus.INDETERMINATE
    for name in ("approve", "deny"):
        refused(store, "a1", name, {"marker": marker}, f"too late to {name}.*approved by alice")


@pytest.mark.parametrize("by", ["", "   ", "\t"])
async def test_a_decision_by_nobody_is_refused_and_writes_nothing(
    store: FileStore, side: Side, by: str
) -> None:
    import subprocess
    import sys

    config, _ = helpdesk(store, side)
    out = await run(config, "a1", INPUT)
    before = store.path("a1").read_bytes()
    marker = out.pending[0].marker
    with pytest.raises(SignalError, match="must name someone"):
        signal(store, "a1", "deny", {"marker": marker}, by=by)
    p = subprocess.run(
        [sys.executable, "-m", "durableagent.cli", "deny", "a1", marker, "--by", by,
         "--store", str(store.root)],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert p.returncode == 2 and "--by must name someone" in p.stderr
    assert "Traceback" not in p.stderr
    assert store.path("a1").read_bytes() == before


async def test_a_deadlines_deny_never_overrules_an_approval_a_humans_may(
    store: FileStore, side: Side
):
    _config, marker = await waiting(store, side)
    signal(store, "a1", "approve", {"marker": marker}, by="ana")
    refused(
        store,
        "a1",
        "deny",
        {"marker": marker},
        "approved by ana before its deadline",
        by="deadline",
    )
    signal(store, "a1", "deny", {"marker": marker}, by="bo", reason="wrong account")
    assert view_store(store, "a1").status == RunStatus.READY


async def test_a_paused_run_awaiting_approval_says_it_is_held_after_the_decision(
    store: FileStore, side: Side
):
    _config, marker = await waiting(store, side)
    signal(store, "a1", "pause", {}, by="ana", reason="vendor outage")
    view = view_store(store, "a1")
    assert view.status == RunStatus.AWAITING_APPROVAL  # a human is still asked first
    assert view.waiting_on == "approve create_ticket · then held: paused"
    (row,) = [s for s in store.summaries() if s.run_id == "a1"]
    assert row.waiting_on == view.waiting_on
    signal(store, "a1", "approve", {"marker": marker}, by="ana")
    assert view_store(store, "a1").status == RunStatus.PAUSED

"""The recovery plan: what the next attempt does with each step and where it stops (SPEC §9),
read off small hand-made journals; and, over any journal, that it never promises a replay
without a result nor a re-run of a write that is not idempotent."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durableagent import (
    Message,
    Outcome,
    Pending,
    PlanAction,
    PlanEnding,
    PolicyGate,
    Record,
    Status,
    ToolCall,
    marker_for,
    plan,
)

REPLAY, RERUN, BLOCKED = PlanAction.REPLAY, PlanAction.RERUN, PlanAction.BLOCKED
DONE, AGAIN, WAITING = PlanAction.HUMAN_DONE, PlanAction.RUN_AGAIN, PlanAction.WAITING
RUN, REFUSED, UNREACHED = PlanAction.RUN, PlanAction.REFUSED, PlanAction.NOT_REACHED

LOOKUP = ToolCall("c1", "lookup_policy", {"topic": "access"})
TICKET = ToolCall("c2", "create_ticket", {"summary": "billing"})
EMAIL = ToolCall("c3", "send_email", {"to": "boss"})
T1, T2, T3 = "tool/1/0/lookup_policy", "tool/2/0/create_ticket", "tool/2/1/send_email"


class J:
    """A hand-made journal: each method appends records with the next seq."""

    def __init__(self) -> None:
        self.records: list[Record] = []
        self.add("run.started", data={"input": [Message("user", "help").to_dict()]})

    def add(self, type: str, step: str = "", kind: str = "", data: Any = None) -> J:
        n = len(self.records) + 1
        self.records.append(Record(n, type, step, kind, {} if data is None else data, 100.0 + n))
        return self

    def model(self, turn: int, *calls: ToolCall, answer: str = "", done: bool = True) -> J:
        self.add("step.started", f"llm/{turn}", "model")
        if done:
            reply = Message("assistant", answer, tool_calls=calls).to_dict()
            self.add("step.completed", f"llm/{turn}", "model", reply)
        return self

    def start(self, step: str, *, write: bool = False, idempotent: bool = False) -> J:
        data: dict[str, Any] = {"write": write}
        if idempotent:
            data["idempotent"] = True
        return self.add("step.started", step, "tool", data)

    def result(self, step: str, content: str = "ok") -> J:
        return self.add("step.completed", step, "tool", {"content": content, "is_error": False})

    def signal(self, step: str, name: str, payload: dict[str, Any], by: str = "ann") -> J:
        return self.add("signal", step, "", {"name": name, "payload": payload, "by": by})

    def decide(self, name: str, step: str, call: ToolCall) -> J:
        return self.signal(step, name, {"marker": marker_for(step, call.arguments)})

    def reconcile(self, step: str, outcome: str, result: str | None = None) -> J:
        return self.signal(step, "reconcile", {"step": step, "outcome": outcome, "result": result})

    def ticket_turn(self) -> J:
        """Turn 1 looked the policy up; turn 2 asked for a ticket."""
        return self.model(1, LOOKUP).start(T1).result(T1).model(2, TICKET)


def awaiting(*steps_calls: tuple[str, ToolCall]) -> Outcome:
    pending = tuple(
        Pending(marker_for(s, c.arguments), s, c.name, c.arguments) for s, c in steps_calls
    )
    return Outcome(Status.AWAITING_APPROVAL, pending=pending)


def actions(p: Any) -> list[tuple[str, PlanAction]]:
    return [(s.step, s.action) for s in p.steps]


CASES = [
    pytest.param(J(), {}, [("llm/1", RUN)], PlanEnding.CONTINUES, None, id="fresh"),
    pytest.param(
        J().model(1, LOOKUP).start(T1).result(T1).model(2, done=False),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", RERUN)],
        PlanEnding.CONTINUES,
        None,
        id="model-call-cut-off",
    ),
    pytest.param(
        J().model(1, LOOKUP).start(T1),
        {},
        [("llm/1", REPLAY), (T1, RERUN), ("llm/2", RUN)],
        PlanEnding.CONTINUES,
        None,
        id="read-cut-off",
    ),
    pytest.param(
        J().ticket_turn().start(T2, write=True),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, BLOCKED)],
        PlanEnding.INDETERMINATE,
        T2,
        id="open-write",
    ),
    pytest.param(
        J().ticket_turn().start(T2, write=True, idempotent=True),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, RERUN), ("llm/3", RUN)],
        PlanEnding.CONTINUES,
        None,
        id="idempotent-write",
    ),
    pytest.param(
        J().ticket_turn().start(T2, write=True).reconcile(T2, "done", "TICKET-9"),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, DONE), ("llm/3", RUN)],
        PlanEnding.CONTINUES,
        None,
        id="reconciled-done",
    ),
    pytest.param(
        J().ticket_turn().start(T2, write=True).reconcile(T2, "retry"),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, AGAIN), ("llm/3", RUN)],
        PlanEnding.CONTINUES,
        None,
        id="reconciled-retry",
    ),
    pytest.param(
        # Retried, started again, cut off again: the old reconcile no longer counts.
        J().ticket_turn().start(T2, write=True).reconcile(T2, "retry").start(T2, write=True),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, BLOCKED)],
        PlanEnding.INDETERMINATE,
        T2,
        id="reconcile-before-the-latest-start",
    ),
    pytest.param(
        J().ticket_turn(),
        {"outcome": awaiting((T2, TICKET))},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, WAITING)],
        PlanEnding.AWAITING_APPROVAL,
        T2,
        id="waiting-by-outcome",
    ),
    pytest.param(
        J().ticket_turn(),
        {"gate": PolicyGate(writes={"create_ticket"})},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, WAITING)],
        PlanEnding.AWAITING_APPROVAL,
        T2,
        id="waiting-by-gate",
    ),
    pytest.param(
        J().ticket_turn().decide("approve", T2, TICKET),
        {"outcome": awaiting((T2, TICKET))},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, RUN)],
        PlanEnding.CONTINUES,
        None,
        id="approved",
    ),
    pytest.param(
        J().ticket_turn().decide("approve", T2, TICKET).decide("deny", T2, TICKET),
        {"outcome": awaiting((T2, TICKET))},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, REFUSED)],
        PlanEnding.CONTINUES,
        None,
        id="deny-wins-over-approve",
    ),
    pytest.param(
        J().model(1, LOOKUP).start(T1).result(T1).model(2, TICKET, EMAIL),
        {"outcome": awaiting((T3, EMAIL)), "gate": PolicyGate(writes={"send_email"})},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, WAITING), (T3, WAITING)],
        PlanEnding.AWAITING_APPROVAL,
        T2,
        id="one-pending-call-holds-its-turn",
    ),
    pytest.param(
        J().model(1, LOOKUP).start(T1).result(T1).model(2, answer="Filed TICKET-3."),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY)],
        PlanEnding.COMPLETES,
        None,
        id="answered-not-yet-completed",
    ),
    pytest.param(
        J()
        .ticket_turn()
        .start(T2, write=True)
        .result(T2, "TICKET-3")
        .model(3, answer="ok")
        .add("run.completed", data={"message": {"role": "assistant", "content": "ok"}}),
        {},
        [("llm/1", REPLAY), (T1, REPLAY), ("llm/2", REPLAY), (T2, REPLAY), ("llm/3", REPLAY)],
        PlanEnding.COMPLETED,
        None,
        id="completed",
    ),
]


@pytest.mark.parametrize(("journal", "kw", "want", "ending", "stops_at"), CASES)
def test_the_plan_of_a_hand_made_journal(
    journal: J, kw: dict[str, Any], want: list[Any], ending: PlanEnding, stops_at: str | None
) -> None:
    p = plan(journal.records, **kw)
    assert actions(p) == want
    assert p.ending == ending
    assert p.stops_at == stops_at
    assert p.why and all(s.why for s in p.steps)


def test_steps_after_the_stop_are_not_reached() -> None:
    # Hand-made: a later turn recorded past an open write (a worker never does this).
    j = J().ticket_turn().start(T2, write=True).model(3, answer="done")
    p = plan(j.records)
    assert actions(p)[-2:] == [(T2, BLOCKED), ("llm/3", UNREACHED)]


def test_each_step_says_why_in_words_a_human_can_act_on() -> None:
    j = J().ticket_turn().start(T2, write=True).reconcile(T2, "done", "TICKET-9")
    by_step = {s.step: s for s in plan(j.records).steps}
    assert "reconciled done by ann" in by_step[T2].why and "'TICKET-9'" in by_step[T2].why
    assert "has a result (seq 3)" in by_step["llm/1"].why
    blocked = plan(J().ticket_turn().start(T2, write=True).records)
    assert blocked.why == f"it stops at {T2}: an open write nobody reconciled (indeterminate)"
    waiting = plan(J().ticket_turn().records, outcome=awaiting((T2, TICKET)))
    assert waiting.why == "it stops at turn 2: waiting for a human to approve or deny create_ticket"


def test_the_plan_is_plain_json() -> None:
    import json

    p = plan(J().ticket_turn().start(T2, write=True).records)
    d = json.loads(json.dumps(p.to_dict()))
    assert d["ending"] == "indeterminate" and d["stops_at"] == T2
    assert d["steps"][-1] == {
        "step": T2,
        "kind": "tool",
        "action": "blocked",
        "why": p.steps[-1].why,
        "tool": "create_ticket",
        "write": True,
        "idempotent": False,
        "marker": marker_for(T2, TICKET.arguments),
        "seq": 8,
        "classified_by": None,
    }


def test_a_tools_class_says_where_it_came_from() -> None:
    j = J().ticket_turn()
    j.add(
        "step.started", T2, "tool", {"write": True, "idempotent": True, "classified_by": "override"}
    )
    [step] = [s for s in plan(j.records).steps if s.step == T2]
    assert step.action == RERUN and step.classified_by == "override"
    assert step.why.startswith("an idempotent write (class from override) started at seq 8")
    pending = awaiting((T2, TICKET))
    pending = Outcome(
        Status.AWAITING_APPROVAL,
        pending=tuple(
            Pending(
                p.marker,
                p.step,
                p.tool,
                p.arguments,
                "write, needs approval · class from annotation",
            )
            for p in pending.pending
        ),
    )
    [waiting] = [s for s in plan(J().ticket_turn().records, outcome=pending).steps if s.step == T2]
    assert waiting.why.endswith("; write, needs approval · class from annotation")


def test_no_records_no_plan() -> None:
    p = plan([])
    assert p.steps == () and p.ending == PlanEnding.NOT_STARTED


# -- any journal --------------------------------------------------------------------------------

STEPS = ["llm/1", "llm/2", T1, T2, T3, "tool/3/0/lookup_policy"]


def _record(draw: Any) -> tuple[str, str, str, Any]:
    step = draw(st.sampled_from(STEPS))
    kind = "model" if step.startswith("llm") else "tool"
    what = draw(st.sampled_from(["start", "result", "reconcile", "approve", "deny", "junk"]))
    if what == "start":
        data: Any = {} if kind == "model" else {"write": draw(st.booleans())}
        if kind == "tool" and draw(st.booleans()):
            data["idempotent"] = draw(st.booleans())
        return "step.started", step, kind, data
    if what == "result":
        if kind == "model":
            calls = draw(st.lists(st.sampled_from([LOOKUP, TICKET, EMAIL]), max_size=2))
            data = Message("assistant", "x", tool_calls=tuple(calls)).to_dict()
            data = draw(st.sampled_from([data, "not a message", {"role": 3}]))
        else:
            data = {"content": "ok", "is_error": False}
        return "step.completed", step, kind, data
    if what == "reconcile":
        payload = {"step": step, "outcome": draw(st.sampled_from(["done", "retry", "?"]))}
        return "signal", step, "", {"name": "reconcile", "payload": payload}
    if what in ("approve", "deny"):
        call = draw(st.sampled_from([LOOKUP, TICKET, EMAIL]))
        payload = {"marker": marker_for(step, call.arguments)}
        return "signal", step, "", {"name": what, "payload": payload}
    return "signal", step, "", {"name": "approve", "payload": "junk"}


@st.composite
def journals(draw: Any) -> list[Record]:
    n = draw(st.integers(0, 14))
    records = [Record(1, "run.started", "", "", {"input": []}, 1.0)]
    for i in range(n):
        t, step, kind, data = _record(draw)
        records.append(Record(i + 2, t, step, kind, data, float(i + 2)))
    return records


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    journals(),
    st.sampled_from([None, PolicyGate(writes={"create_ticket", "send_email"})]),
    st.sampled_from([None, awaiting((T2, TICKET)), awaiting((T3, EMAIL))]),
)
def test_the_plan_never_promises_what_the_journal_cannot_keep(
    records: list[Record], gate: PolicyGate | None, outcome: Outcome | None
) -> None:
    p = plan(records, gate=gate, outcome=outcome)
    results = {r.step for r in records if r.type == "step.completed"}
    latest: dict[str, Any] = {}
    for r in records:
        if r.type == "step.started":
            latest[r.step] = r.data
    names = [s.step for s in p.steps]
    assert len(names) == len(set(names))  # each step once
    for s in p.steps:
        if s.action == REPLAY:
            assert s.step in results  # never a replay without a result
        if s.action == RERUN:
            data = latest.get(s.step, {})
            assert s.step not in results
            # never a re-run of a write that is not idempotent
            assert not (data.get("write") is True and data.get("idempotent") is not True)
        if s.action == BLOCKED:
            data = latest[s.step]
            assert data.get("write") is True and data.get("idempotent") is not True
    stops = [i for i, s in enumerate(p.steps) if s.action in (BLOCKED, WAITING)]
    if p.ending in (PlanEnding.INDETERMINATE, PlanEnding.AWAITING_APPROVAL):
        assert p.stops_at == p.steps[stops[0]].step
        after = p.steps[stops[0] + 1 :]
        assert all(s.action in (UNREACHED, WAITING) for s in after)
    else:
        assert p.stops_at is None


@pytest.mark.parametrize(
    "outcome, result, want",
    [("done", "T-9", DONE), ("retry", None, AGAIN), ("nonsense", None, AGAIN)],
)
async def test_the_plan_says_what_the_journal_does_with_an_open_idempotent_write_a_human_settled(
    outcome: str, result: str | None, want: PlanAction
) -> None:
    """The plan rests on the journal's own index and rules: an idempotent write reconciled
    done gets the human's result (not a re-run with its key), whatever else runs it again."""
    from durableagent import Journal, StepKind
    from durableagent.stores import FileStore

    j = J().ticket_turn().start(T2, write=True, idempotent=True).reconcile(T2, outcome, result)
    (step,) = [s for s in plan(j.records).steps if s.step == T2]
    assert step.action == want
    called: list[str] = []

    async def call() -> Any:
        called.append("called")
        return {"content": "T-again", "is_error": False}

    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        got = await Journal(FileStore(tmp), "r", list(j.records)).run_step(
            T2, StepKind.TOOL, call, write=True, idempotent=True
        )
    assert (called == []) == (want == DONE)
    assert got["content"] == ("T-9" if want == DONE else "T-again")


# -- controls: a cancel, a pause, the budget (SPEC §10) --------------------------------------


def budgeted(limits: dict[str, Any]) -> J:
    j = J()
    j.records[0].data["budget"] = limits
    return j


def test_a_cancelled_run_plans_nothing_but_its_replays() -> None:
    j = J().model(1, LOOKUP).start(T1).signal("", "cancel", {})
    j.records[-1].data["reason"] = "looping"
    p = plan(j.records)
    assert p.ending == PlanEnding.CANCELLED and p.stops_at is None
    assert actions(p) == [("llm/1", REPLAY), (T1, UNREACHED), ("llm/2", UNREACHED)]
    assert "cancelled by ann" in p.why and "looping" in p.why


def test_a_paused_run_says_no_attempt_starts_then_what_it_would_do() -> None:
    j = J().model(1, LOOKUP).start(T1).signal("", "pause", {})
    p = plan(j.records)
    assert p.ending == PlanEnding.PAUSED
    assert p.why.startswith("no attempt starts until it is resumed (it paused by ann")
    assert ("llm/1", REPLAY) in actions(p) and (T1, RERUN) in actions(p)
    resumed = plan(j.signal("", "resume", {}).records)
    assert resumed.ending == PlanEnding.CONTINUES


def test_the_plan_stops_where_the_budget_stops_the_attempt() -> None:
    j = budgeted({"model_calls": 1}).model(1, LOOKUP).start(T1).result(T1)
    p = plan(j.records)
    assert p.ending == PlanEnding.OVER_BUDGET and p.stops_at == "llm/2"
    assert actions(p)[-1] == ("llm/2", PlanAction.OVER_BUDGET)
    assert "model calls: 1 made of a limit of 1" in p.why
    # A raised limit lets it go on; a tool-call limit stops at the tool.
    raised = j.signal("", "budget", {"add": {"model_calls": 1}})
    assert plan(raised.records).ending == PlanEnding.CONTINUES
    tools = budgeted({"tool_calls": 0}).model(1, LOOKUP)
    p = plan(tools.records)
    assert (p.ending, p.stops_at) == (PlanEnding.OVER_BUDGET, T1)


def test_a_deadline_is_checked_at_the_given_now() -> None:
    j = budgeted({"deadline": 60}).model(1, LOOKUP)
    started = j.records[0].at
    assert plan(j.records, now=started + 30).ending == PlanEnding.CONTINUES
    late = plan(j.records, now=started + 61)
    assert (late.ending, late.stops_at) == (PlanEnding.OVER_BUDGET, T1)
    assert "deadline" in late.why

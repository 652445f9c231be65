"""The recovery plan: what the next attempt of a run will do with each of its steps, and where
it will stop (SPEC §9). A pure fold over the run's records, like ``view_run``; nothing here
is read by replay, which decides the same things step by step as it goes (``Journal``).

The next attempt runs the agent loop again from the recorded input. A step with a result is
replayed. A read (a model call, or a tool call recorded as no write) that started and never
finished is run again, and so is an idempotent write (its system deduplicates on the step's
key). A write that started and never finished stops the attempt as indeterminate, unless a
human reconciled it: done (their result is recorded, the tool is not called) or retry (it runs
again). Before any tool call of a turn runs, the turn's calls that need a human are checked:
one still undecided holds the whole turn, and the attempt stops awaiting approval.
"""

from __future__ import annotations

import enum
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from .budget import over_budget
from .calls import Call, requested_calls
from .control import Controls
from .deploys import Code, asked_of, verdict
from .gate import PolicyGate
from .messages import Message
from .outcome import Outcome, Status
from .record import RUN_COMPLETED, SIGNAL, Record, signal_fields
from .step_index import StepIndex
from .steps import model_step, model_turn, step_tool_name, step_turn


class PlanAction(enum.StrEnum):
    """What the next attempt does with a step."""

    REPLAY = "replay"  # has a result: returned from the journal, nothing is called
    RERUN = "re-run"  # a read, or an idempotent write, that started and never finished
    BLOCKED = "blocked"  # an open write nobody reconciled: the attempt stops here
    HUMAN_DONE = "done by a human"  # reconciled done: the human's result is recorded
    RUN_AGAIN = "run again"  # reconciled retry: the write runs again
    WAITING = "waiting"  # needs (or is held by) a human's approval: the attempt stops here
    RUN = "run"  # never started: runs for the first time
    REFUSED = "refused"  # denied: its refusal is recorded as the call's error result
    NOT_REACHED = "not reached"  # after the step the attempt stops at
    OVER_BUDGET = "over budget"  # starting it would break a limit: the attempt stops here
    INCOMPATIBLE = "incompatible"  # the new code cannot run it: the attempt runs nothing


class PlanEnding(enum.StrEnum):
    """Where the next attempt ends up."""

    COMPLETED = "completed"  # the run is completed already: nothing runs
    COMPLETES = "completes"  # the attempt records the model's answer
    INDETERMINATE = "indeterminate"  # it stops at an open write
    AWAITING_APPROVAL = "awaiting_approval"  # it stops at calls waiting for a human
    CONTINUES = "continues"  # it goes past the journal's end into new steps
    NOT_STARTED = "not_started"  # no records: nothing to plan
    CANCELLED = "cancelled"  # the run is cancelled: nothing runs, ever
    PAUSED = "paused"  # no attempt starts until it is resumed
    OVER_BUDGET = "over_budget"  # it stops before a step that would break a limit
    INCOMPATIBLE = "incompatible"  # the agent's code cannot take over a call: nothing runs


@dataclass(frozen=True)
class PlanStep:
    """One step of the plan. ``write`` is None when neither the journal nor a gate says;
    ``seq`` is the record the action rests on (the result, or the latest start);
    ``classified_by`` where a tool's class came from, as its latest start recorded it
    (``annotation``, ``override``, ``default``, ``gate``), or None."""

    step: str
    kind: str
    action: PlanAction
    why: str
    tool: str | None = None
    write: bool | None = None
    idempotent: bool = False
    marker: str | None = None
    seq: int | None = None
    classified_by: str | None = None
    changed_since: str | None = None  # replays though its tool or prompt changed since (a version)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "step": self.step,
            "kind": self.kind,
            "action": str(self.action),
            "why": self.why,
            "tool": self.tool,
            "write": self.write,
            "idempotent": self.idempotent,
            "marker": self.marker,
            "seq": self.seq,
            "classified_by": self.classified_by,
        }
        if self.changed_since is not None:  # only under a new version's code (plan --agent)
            d["changed_since"] = self.changed_since
        return d


@dataclass(frozen=True)
class Plan:
    """What the next attempt will do with each step, in order, and where it ends:
    ``stops_at`` names the step it stops at (None when it does not stop), ``why`` says so in
    one line."""

    steps: tuple[PlanStep, ...]
    ending: PlanEnding
    stops_at: str | None
    why: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "ending": str(self.ending),
            "stops_at": self.stops_at,
            "why": self.why,
            "steps": [s.to_dict() for s in self.steps],
        }


@dataclass
class _Step:
    name: str
    kind: str
    start: Record | None  # the latest step.started
    result: Record | None  # the first step.completed
    index: StepIndex  # the journal's index, whose rules decide what replay does


_Call = Call


def plan(
    records: Sequence[Record],
    *,
    gate: PolicyGate | None = None,
    outcome: Outcome | None = None,
    now: float | None = None,
    code: Code | None = None,
) -> Plan:
    """What the next attempt of the run with these ``records`` will do. ``gate`` (the agent's
    policy) says which calls that never started are writes and need approval; ``outcome`` (the
    last attempt's) says which calls were left waiting for a human. Without them the plan says
    only what the journal says. A cancel, a pause or the budget (checked at ``now``, a
    budget's deadline being a time) says where it stops first. No I/O; never raises on a
    hand-made journal. ``code`` (a new version's, deploys.py) marks the replayed steps whose
    tool or prompt changed since the version that made them, and stops the plan before any
    step when the code cannot take over a call (``incompatible``)."""
    if not records:
        return Plan((), PlanEnding.NOT_STARTED, None, "the run has no records: nothing to plan")
    # The journal's own index of its steps: the plan reads the records exactly as the next
    # attempt's Journal will (the same latest start, first result, reconcile that counts).
    index = StepIndex(records)
    planned = _planned(records, index, gate, outcome)
    if planned.ending == PlanEnding.COMPLETED:
        return planned
    controlled = _controlled(planned, index.controls, time.time() if now is None else now)
    return controlled if code is None else _deployed(controlled, records, code, gate, outcome)


def _deployed(
    p: Plan, records: Sequence[Record], code: Code, gate: PolicyGate | None, outcome: Outcome | None
) -> Plan:
    """The plan under a new version's code: replayed steps changed since are marked; a call it
    cannot take over stops the attempt before any step (deploys.verdict, the rule run() uses)."""
    v = verdict(records, code, gate or PolicyGate(), pending=asked_of(outcome))
    since = v.was or "the run started"
    changed = set(v.changed)
    steps = tuple(
        replace(s, changed_since=since, why=f"{s.why}; changed since {since}")
        if s.step in changed and s.action == PlanAction.REPLAY
        else s
        for s in p.steps
    )
    if not v.blockers:
        return replace(p, steps=steps)
    blocked = {b.step: b for b in v.blockers}
    marked = tuple(
        replace(s, action=PlanAction.INCOMPATIBLE, why=blocked[s.step].line)
        if s.step in blocked
        else s
        for s in steps
    )
    first = v.blockers[0].step
    why = f"stops before any step, incompatible with {code.version}: {v.why}"
    return Plan(marked, PlanEnding.INCOMPATIBLE, first, why)


def _planned(
    records: Sequence[Record],
    index: StepIndex,
    gate: PolicyGate | None,
    outcome: Outcome | None,
) -> Plan:
    steps = {
        name: _Step(name, kind, index.started.get(name), index.completed.get(name), index)
        for name, kind in index.kinds.items()
        if name
    }
    decided: dict[str, Record] = {}  # marker -> its first deny, else its first approval
    for r in records:
        if r.type == SIGNAL:
            name, payload, _, _ = signal_fields(r)
            marker = str(payload.get("marker"))
            if name == "approve":
                decided.setdefault(marker, r)
            elif name == "deny":
                first = decided.get(marker)
                if first is None or signal_fields(first)[0] != "deny":
                    decided[marker] = r  # a deny wins over an approval
    if any(r.type == RUN_COMPLETED for r in records):
        done = tuple(_replay(e) for e in steps.values() if e.result is not None)
        why = "the run is completed: run() returns its recorded answer and no step runs"
        return Plan(done, PlanEnding.COMPLETED, None, why)

    calls = requested_calls(records)
    pending = {
        p.marker: p.policy
        for p in (outcome.pending if outcome and outcome.status == Status.AWAITING_APPROVAL else ())
    }

    def needs_human(call: _Call) -> bool:
        if call.marker is None or call.marker in decided:
            return False
        if call.marker in pending:
            return True
        return gate is not None and gate.needs_approval(call.tool) and not gate.is_denied(call.tool)

    waiting_turns = {
        _turn(c.step)
        for c in calls.values()
        if (e := steps.get(c.step)) is None or e.result is None
        if needs_human(c)
    }
    order = list(steps)
    order += [name for name in calls if name not in steps]  # asked for, never started

    out: list[PlanStep] = []
    stop: PlanStep | None = None
    asked: list[str] = []  # the tools of the calls a human is asked about
    for name in order:
        s, call = steps.get(name), calls.get(name)
        if call is not None and _turn(name) in waiting_turns and (s is None or s.result is None):
            # Every call of the turn is held, the ones before the first pending one too.
            p = _waiting(name, call, needs_human(call), s, pending.get(call.marker or "", ""))
            if needs_human(call):
                asked.append(call.tool)
        elif stop is not None:
            out.append(_not_reached(name, s, call, stop.step))
            continue
        elif s is None:
            p = _fresh(name, call, gate, decided)
        else:
            p = _journaled(s, call)
        out.append(p)
        if stop is None and p.action in (PlanAction.BLOCKED, PlanAction.WAITING):
            stop = p
    nxt = _next_step(steps, calls)
    if stop is None and nxt is not None and nxt not in steps:
        out.append(_fresh(nxt, None, gate, decided))
    if stop is not None and stop.action == PlanAction.BLOCKED:
        why = f"it stops at {stop.step}: an open write nobody reconciled (indeterminate)"
        return Plan(tuple(out), PlanEnding.INDETERMINATE, stop.step, why)
    if stop is not None:
        tools = ", ".join(dict.fromkeys(asked)) or stop.step
        why = f"it stops at turn {_turn(stop.step)}: waiting for a human to approve or deny {tools}"
        return Plan(tuple(out), PlanEnding.AWAITING_APPROVAL, stop.step, why)
    answer = _answered(steps)
    if answer is not None:
        why = f"{answer} answered: the attempt records the answer and the run completes"
        return Plan(tuple(out), PlanEnding.COMPLETES, None, why)
    moves = next((p for p in out if p.action != PlanAction.REPLAY), None)
    start = f" from {moves.step} ({moves.action})" if moves is not None else ""
    why = f"it runs on{start}; new steps follow as the model decides"
    return Plan(tuple(out), PlanEnding.CONTINUES, None, why)


# -- the controls ------------------------------------------------------------------------------

# What the attempt calls something for: the budget is checked before these.
_CALLS = (PlanAction.RUN, PlanAction.RERUN, PlanAction.RUN_AGAIN)


def _controlled(p: Plan, controls: Controls, now: float) -> Plan:
    """``p`` as a cancel, a pause or the budget changes it: a cancelled run runs nothing; a
    paused one starts no attempt until resumed; a step that would break a limit (with what
    was spent, before its own reservation) is where the attempt stops."""
    if controls.cancelled is not None:
        steps = tuple(_halted(s, "the run is cancelled") for s in p.steps)
        why = f"nothing runs: the run {controls.cancelled.says()}"
        return Plan(steps, PlanEnding.CANCELLED, None, why)
    if controls.paused is not None:
        why = f"no attempt starts until it is resumed (it {controls.paused.says()}); then {p.why}"
        return Plan(p.steps, PlanEnding.PAUSED, p.stops_at, why)
    if not controls.budget.limited:
        return p
    for i, s in enumerate(p.steps):
        if s.action not in _CALLS:
            if s.action in (PlanAction.BLOCKED, PlanAction.WAITING):
                return p  # it stops for a human before it spends anything more
            continue
        broke = over_budget(
            controls.budget,
            controls.spend,
            step=s.step,
            kind=s.kind,
            started_at=controls.started_at,
            now=now,
        )
        if broke is None:
            return p  # the next call fits; what comes after, the model decides
        stop = PlanStep(s.step, s.kind, PlanAction.OVER_BUDGET, f"not called: {broke}", s.tool)
        after = f"after {s.step}, where the attempt stops"
        rest = tuple(
            PlanStep(x.step, x.kind, PlanAction.NOT_REACHED, after, x.tool, x.write, x.idempotent)
            for x in p.steps[i + 1 :]
        )
        ending = f"it stops before {s.step}, over budget: {broke} (a raised limit lets it go on)"
        return Plan((*p.steps[:i], stop, *rest), PlanEnding.OVER_BUDGET, s.step, ending)
    return p


def _halted(s: PlanStep, why: str) -> PlanStep:
    if s.action == PlanAction.REPLAY:
        return s
    return PlanStep(s.step, s.kind, PlanAction.NOT_REACHED, why, s.tool, s.write, s.idempotent)


# -- the steps ---------------------------------------------------------------------------------


def _next_step(steps: dict[str, _Step], calls: dict[str, _Call]) -> str | None:
    """The model call the attempt makes after the journal's end: llm/1 for a run that never
    called the model, llm/t+1 when turn t's calls all started; None otherwise (a model call
    still open, an answer, or calls of the last turn that never started)."""
    turns = [t for name in steps if (t := _model_turn(name)) is not None]
    if not turns:
        return model_step(1)
    last = max(turns)
    s = steps[model_step(last)]
    msg = _message(s.result.data) if s.result is not None else None
    if msg is None or not msg.tool_calls:
        return None
    if any(name not in steps for name in calls if _turn(name) == last):
        return None
    return model_step(last + 1)


def _answered(steps: dict[str, _Step]) -> str | None:
    """The last model step, when it has a result that calls no tool: the run's answer."""
    turns = [t for name in steps if (t := _model_turn(name)) is not None]
    if not turns:
        return None
    s = steps[model_step(max(turns))]
    msg = _message(s.result.data) if s.result is not None else None
    return s.name if msg is not None and not msg.tool_calls else None


def _replay(s: _Step) -> PlanStep:
    assert s.result is not None
    write, idem = _flags(s.start)
    return PlanStep(
        s.name,
        s.kind,
        PlanAction.REPLAY,
        f"has a result (seq {s.result.seq}): replayed, not called again",
        tool=_tool(s.name),
        write=write,
        idempotent=idem,
        seq=s.result.seq,
        classified_by=_source(s.start),
    )


def _journaled(s: _Step, call: _Call | None) -> PlanStep:
    """A step the journal has: replayed, re-run, reconciled or blocked."""
    if s.result is not None:
        return _replay(s)
    assert s.start is not None
    start = s.start.seq
    write, idem = _flags(s.start)
    marker = call.marker if call is not None else None

    source = _source(s.start)
    cls = f" (class from {source})" if source else ""

    def step(action: PlanAction, why: str, seq: int = start) -> PlanStep:
        return PlanStep(
            s.name, s.kind, action, why, _tool(s.name), write, idem, marker, seq, source
        )

    if s.kind == "model":
        return step(
            PlanAction.RERUN, f"a model call started at seq {start} with no result: called again"
        )
    if _refused(s.start):
        return step(
            PlanAction.RERUN,
            f"a refused call started at seq {start} with no result: refused again, the tool "
            "is not called",
        )
    # What Journal.run_step does with an open step, rule for rule.
    index = s.index
    if not index.is_write(s.name):
        return step(PlanAction.RERUN, f"a read started at seq {start} with no result: run again")
    verdict = index.reconcile_for(s.name)
    if verdict is None and index.is_idempotent(s.name):
        return step(
            PlanAction.RERUN,
            f"an idempotent write{cls} started at seq {start} with no result: run again with "
            "the same idempotency key, which its system deduplicates on",
        )
    if verdict is None:
        return step(
            PlanAction.BLOCKED,
            f"a write{cls} started at seq {start} with no result and no reconcile: it may or "
            "may not have happened; the attempt stops here until a human reconciles it",
        )
    rec = index.reconciled[s.name]
    by = signal_fields(rec)[2]
    who = f" by {by}" if by else ""
    if verdict.outcome == "done":
        shown = f" {verdict.result!r}" if verdict.result is not None else ""
        return step(
            PlanAction.HUMAN_DONE,
            f"reconciled done{who} (seq {rec.seq}): their result{shown} is recorded as the "
            "write's; the tool is not called",
            rec.seq,
        )
    return step(
        PlanAction.RUN_AGAIN,
        f"reconciled retry{who} (seq {rec.seq}): the write runs again",
        rec.seq,
    )


def _waiting(name: str, call: _Call, asks: bool, s: _Step | None, policy: str = "") -> PlanStep:
    """A call of a turn that waits for a human: asked about, or held with the rest.
    ``policy``: its tool's class as the last outcome described it."""
    if asks:
        why = f"waits for a human to approve or deny it (marker {call.marker})"
        why += f"; {policy}" if policy else ""
    else:
        why = "held: no call of its turn runs until every call that needs a human is decided"
    write, idem = _flags(s.start if s is not None else None)
    seq = s.start.seq if s is not None and s.start is not None else None
    kind = s.kind if s is not None else "tool"
    source = _source(s.start) if s is not None else None
    return PlanStep(
        name, kind, PlanAction.WAITING, why, call.tool, write, idem, call.marker, seq, source
    )


def _fresh(
    name: str, call: _Call | None, gate: PolicyGate | None, decided: dict[str, Record]
) -> PlanStep:
    """A step the journal does not have yet: a call the model asked for, or the next turn."""
    if call is None:
        return PlanStep(
            name, "model", PlanAction.RUN, "the next model call: runs for the first time"
        )
    write = gate.is_write(call.tool) if gate is not None else None
    idem = bool(write) and gate is not None and gate.is_idempotent(call.tool)
    decision = decided.get(call.marker) if call.marker is not None else None
    if decision is not None:
        name_, _, by, reason = signal_fields(decision)
        who = f" by {by}" if by else ""
        if name_ == "deny":
            why = f"denied{who} (seq {decision.seq}): the refusal is recorded as its error result"
            why += f" ({reason})" if reason else ""
            return PlanStep(
                name, "tool", PlanAction.REFUSED, why, call.tool, write, idem, call.marker
            )
        why = f"approved{who} (seq {decision.seq}): runs for the first time"
        return PlanStep(name, "tool", PlanAction.RUN, why, call.tool, write, idem, call.marker)
    if gate is not None and gate.is_denied(call.tool):
        why = "denied by the gate's policy: the refusal is recorded as its error result"
        return PlanStep(name, "tool", PlanAction.REFUSED, why, call.tool, write, idem, call.marker)
    if write is None:
        why = "asked for and never started: runs for the first time (unless the gate asks a human)"
    else:
        what = ("an idempotent write" if idem else "a write") if write else "a read"
        why = f"asked for and never started: {what}, runs for the first time"
    return PlanStep(name, "tool", PlanAction.RUN, why, call.tool, write, idem, call.marker)


def _not_reached(name: str, s: _Step | None, call: _Call | None, stop: str) -> PlanStep:
    write, idem = _flags(s.start if s is not None else None)
    kind = s.kind if s is not None else ("tool" if call is not None else "model")
    tool = call.tool if call is not None else _tool(name)
    return PlanStep(
        name,
        kind,
        PlanAction.NOT_REACHED,
        f"after {stop}, where the attempt stops",
        tool,
        write,
        idem,
        call.marker if call is not None else None,
    )


# -- reading records defensively (a hand-made journal may hold anything) ----------------------


def _flags(start: Record | None) -> tuple[bool | None, bool]:
    """(write, idempotent) as the step's latest start recorded them; write None for a model
    step or when unknown."""
    if start is None or start.kind != "tool":
        return (False if start is not None else None), False
    data = start.data if isinstance(start.data, dict) else {}
    write = data.get("write") is True
    return write, write and data.get("idempotent") is True


def _refused(start: Record) -> bool:
    """The start recorded a call that was refused (it runs nothing)."""
    return isinstance(start.data, dict) and start.data.get("refused") is True


def _source(start: Record | None) -> str | None:
    """Where the tool's class came from, as its start recorded it."""
    data = start.data if start is not None and isinstance(start.data, dict) else {}
    source = data.get("classified_by")
    return source if isinstance(source, str) and source else None


def _message(data: Any) -> Message | None:
    try:
        return Message.from_dict(data)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None


_model_turn = model_turn
_turn = step_turn
_tool = step_tool_name

"""Fork: a new run that replays another run's history up to a step and runs afresh from there.

``fork(store, R, NEW, at_step=S)`` writes NEW's journal: a ``run.started`` with R's input and
``"forked_from": {"run", "seq", "step", "by", "reason", "copied"}``, then copies (new seqs and
crcs, the original ``at``) of R's records before S's first ``step.started``. A worker resuming
NEW replays every copied step (no model or tool call is repeated) and runs S onwards with the
agent it runs now, so a fixed prompt or tool applies from S on. R is never written to.

What is copied: every step record before the cut; a ``run.completed`` never; an approval or a
deny only when the call it names is in the copy with the same marker (the same arguments); a
reconcile only for a write in the copy; no signal at all with ``signals="drop"``. A write in
the copy that started and has no result (and no reconcile "done" that comes with it) refuses
the fork: it may or may not have happened, and NEW would either repeat it or stop on it.

Atomicity. The Store protocol appends one record at a time, so the fork's ``run.started`` says
how many copies follow it (``copied``). The forker holds NEW's lease while it copies (NEW shows
as running); a fork cut short (the forker killed) is *unfinished*: its status is ``corrupt``
with a message saying so, ``run()`` and ``signal()`` refuse it, no worker picks it up, and
running the same fork again finishes it. No runner ever executes a fork with half its history.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from . import hints
from .budget import Budget
from .calls import marker_step, replies, requested_markers
from .control import Controls
from .errors import CorruptJournalError, ForkError, RunNotFoundError
from .ids import check_run_id
from .lineage import ForkedFrom, forked_from, unfinished_fork
from .record import (
    RUN_COMPLETED,
    RUN_STARTED,
    SIGNAL,
    STEP_COMPLETED,
    STEP_STARTED,
    Record,
    signal_fields,
)
from .step_index import StepIndex
from .steps import model_step, model_turn, tool_step
from .stores import Check, Store, default_owner

KEEP = "keep"
DROP = "drop"


@dataclass(frozen=True)
class ForkPlan:
    """What a fork writes: NEW's ``run.started`` and the copies that follow it, and which of
    the original's signals it keeps and which it leaves behind."""

    run_id: str
    new_run_id: str
    at_step: str
    started: Record
    copies: tuple[Record, ...]
    origin: ForkedFrom
    kept_signals: tuple[Record, ...] = ()
    dropped_signals: tuple[Record, ...] = ()


def fork(
    store: Store,
    run_id: str,
    new_run_id: str,
    *,
    at_step: str,
    signals: str = KEEP,
    by: str | None = None,
    reason: str | None = None,
    budget: Budget | None = None,
) -> Record:
    """Fork ``run_id`` at ``at_step`` as ``new_run_id`` (see the module docstring) and return
    NEW's ``run.started``. Refused with ForkError, nothing written, when NEW exists, the step
    is unknown or an open write comes before it; RunNotFoundError for an unknown ``run_id``.
    Running the same fork again after it was cut short finishes it."""
    check_run_id(run_id)
    check_run_id(new_run_id)
    plan = plan_fork(
        store.load(run_id),
        run_id,
        new_run_id,
        at_step=at_step,
        signals=signals,
        by=by,
        reason=reason,
        budget=budget,
    )
    return write_fork(store, plan)


def plan_fork(
    records: Sequence[Record],
    run_id: str,
    new_run_id: str,
    *,
    at_step: str,
    signals: str = KEEP,
    by: str | None = None,
    reason: str | None = None,
    budget: Budget | None = None,
) -> ForkPlan:
    """What forking ``records`` (the journal of ``run_id``) at ``at_step`` would write. Pure:
    no I/O. Raises ForkError for an unknown step or an open write before it.

    NEW's ``run.started`` carries ``budget``, else the original's budget in force as it is
    forked (with every budget signal applied: a human who raised it meant it); the copied
    model steps keep their usage and reservations, so NEW starts with what the original had
    spent before the cut. No control signal is copied (cancel, pause, resume, budget, move):
    NEW starts free."""
    check_run_id(run_id)
    check_run_id(new_run_id)
    if signals not in (KEEP, DROP):
        raise ValueError(f"signals must be {KEEP!r} or {DROP!r}, not {signals!r}")
    if new_run_id == run_id:
        raise ForkError(run_id, "a fork needs a new run id, not the id of the run it forks")
    if not records:
        raise RunNotFoundError(run_id)
    first = records[0]
    if (
        first.type != RUN_STARTED
        or not isinstance(first.data, dict)
        or not isinstance(first.data.get("input"), list)
    ):
        raise CorruptJournalError(run_id, 1, "the first record is not run.started with an input")
    gap = unfinished_fork(records, run_id)
    if gap is not None:
        raise ForkError(run_id, f"run {run_id!r} is {gap}; finish it before forking it")
    cut = _cut(records, run_id, at_step)
    before = [r for r in records[1:] if r.seq < cut and r.type not in (RUN_STARTED, RUN_COMPLETED)]
    requested = requested_markers(before)
    copies: list[Record] = []
    kept: list[Record] = []
    dropped: list[Record] = []
    started: set[str] = set()
    last = first.seq  # the last copied record's seq in the original
    for r in before:
        if r.type == STEP_STARTED:
            started.add(r.step)
        if r.type != SIGNAL:
            copies.append(_copy(r))
            last = r.seq
            continue
        name, payload, _, _ = signal_fields(r)
        if signals == DROP:
            keep = False
        elif name in ("approve", "deny"):
            marker = payload.get("marker")
            keep = isinstance(marker, str) and requested.get(marker_step(marker)) == marker
        else:
            keep = name == "reconcile" and r.step in started
        (kept if keep else dropped).append(r)
        if keep:
            copies.append(_copy(r))
            last = r.seq
    _refuse_open_writes(run_id, at_step, copies, dropped)
    origin = ForkedFrom(run_id, last, at_step, by, reason, len(copies))
    data = {k: v for k, v in first.data.items() if k not in ("forked_from", "budget")}
    data["forked_from"] = origin.to_dict()
    in_force = budget if budget is not None else _budget_of(records)
    if in_force.limited:
        data["budget"] = in_force.to_dict()
    return ForkPlan(
        run_id=run_id,
        new_run_id=new_run_id,
        at_step=at_step,
        started=Record.make(RUN_STARTED, data=data),
        copies=tuple(copies),
        origin=origin,
        kept_signals=tuple(kept),
        dropped_signals=tuple(dropped),
    )


def write_fork(store: Store, plan: ForkPlan) -> Record:
    """Write a planned fork (or finish one that was cut short) and return its ``run.started``.
    NEW's lease is held while copying, so that NEW shows as running, not unfinished."""
    new = plan.new_run_id
    done = _already_copied(store.load(new), plan)
    with store.lease(new, owner=f"fork:{default_owner()}") as lease:
        existing = store.load(new)  # again, now that nobody else can be copying it
        done = _already_copied(existing, plan)
        if existing:
            first, last = existing[0], existing[-1].seq
        else:
            first = store.append(new, plan.started, check=_must_be_new(new), lease=lease)
            last = first.seq
        todo = plan.copies[done:]
        renewed = time.monotonic()
        for i, r in enumerate(todo):
            if time.monotonic() - renewed > lease.ttl / 3:
                lease.renew()
                renewed = time.monotonic()
            # Only the last append is fsynced: it makes the ones before it durable too, and a
            # crash before it leaves an unfinished fork, which nothing runs.
            stored = store.append(
                new,
                r,
                check=_nothing_since(new),
                since=last,
                lease=lease,
                sync=i == len(todo) - 1,
            )
            last = stored.seq
    if existing:
        # Workers may have counted failures while it was unfinished: give it a fresh budget.
        store.clear_failures(new)
    return first


def fork_points(records: Sequence[Record]) -> list[str]:
    """The steps a fork of this journal may start at: every step it started, in order, then
    the ones that never started but would come next (a pending call, the next model turn)."""
    points: list[str] = []
    for r in records:
        if r.type in (STEP_STARTED, STEP_COMPLETED) and r.step not in points:
            points.append(r.step)
    points += [s for s in _next_steps(records) if s not in points]
    return points


def forks_of(store: Store, run_id: str) -> list[str]:
    """The runs forked from ``run_id`` (from the store's summaries: no journal is read),
    oldest first."""
    forks = [s for s in store.summaries() if s.forked_from and s.forked_from.run == run_id]
    forks.sort(key=lambda s: (s.started_at or 0.0, s.run_id))
    return [s.run_id for s in forks]


# -- the pieces -------------------------------------------------------------------------------


def _budget_of(records: Sequence[Record]) -> Budget:
    """The budget in force: run.started's, with every budget signal applied."""
    controls = Controls()
    for r in records:
        if r.type in (RUN_STARTED, SIGNAL):
            controls.add(r)
    return controls.budget


def _copy(r: Record) -> Record:
    return Record(0, r.type, r.step, r.kind, r.data, r.at)


def _cut(records: Sequence[Record], run_id: str, at_step: str) -> int:
    """The seq before which records are copied: the step's first record, or after the last
    record for a step that would come next."""
    for r in records:
        if r.step == at_step and r.type in (STEP_STARTED, STEP_COMPLETED):
            return r.seq
    nexts = _next_steps(records)
    if at_step in nexts:
        return records[-1].seq + 1
    offer = f" or at {' or '.join(nexts)}, which would come next" if nexts else ""
    raise ForkError(
        run_id,
        f"run {run_id!r} has no step {at_step!r}: fork at a step it started (see 'agentrun "
        f"show {run_id}'){offer}",
    )


_model_results = replies


_turn = model_turn


def _next_steps(records: Sequence[Record]) -> list[str]:
    """Steps that never started but would come next: the calls of the last model turn that
    have not started, else (all of them started) the next model turn. Nothing comes after a
    completed run. (A call that started and never finished is an open step: a fork after it
    copies it, which is refused for a write.)"""
    if any(r.type == RUN_COMPLETED for r in records):
        return []
    touched = {r.step for r in records if r.type in (STEP_STARTED, STEP_COMPLETED)}
    turns = [t for t in map(_turn, touched) if t is not None]
    replies = _model_results(records)
    if not turns:
        return [model_step(1)]
    last = max(turns)
    if last not in replies:
        return []  # the model step itself started and has no reply: fork at it
    calls = [tool_step(last, i, c.name) for i, c in enumerate(replies[last].tool_calls)]
    if not calls:
        return []  # the answer: the run ends there (fork at that model step to ask again)
    waiting = [s for s in calls if s not in touched]
    return waiting or [model_step(last + 1)]


def _refuse_open_writes(
    run_id: str, at_step: str, copies: list[Record], dropped: list[Record]
) -> None:
    """An open write in the copy (started, no result, no reconcile "done" copied with it)
    refuses the fork."""
    index = StepIndex(copies)
    for step, start in index.started.items():
        if step in index.completed or not index.is_write(step):
            continue
        verdict = index.reconcile_for(step)
        if verdict is not None and verdict.outcome == "done":
            continue
        when = time.strftime("%H:%M:%S", time.localtime(start.at))
        head = (
            f"cannot fork {run_id!r} at {at_step!r}: write step {step!r} started at {when} "
            "and never recorded a result"
        )
        if verdict is None and index.is_idempotent(step):
            why = (
                f"; it is an idempotent write whose key belongs to {run_id}: let {run_id} "
                f"resume first (it runs it again with that key), or fork at {step}"
            )
        elif verdict is not None:
            why = (
                f"; it was reconciled as retry and has not run again: let {run_id} resume "
                f"first, or fork at {step}"
            )
        elif any(r.type == SIGNAL and r.step == step for r in dropped):
            why = (
                "; its reconcile is a signal, which --drop-signals leaves behind: keep the "
                f"signals, or fork at {step}"
            )
        else:
            why = (
                f": it may or may not have happened. Reconcile it first "
                f"({hints.reconcile_done(run_id, step)}, or --retry), or fork at {step}"
            )
        raise ForkError(run_id, head + why)


def _already_copied(existing: list[Record], plan: ForkPlan) -> int:
    """How many of the plan's copies an unfinished fork of the same run at the same step
    already holds; ForkError when NEW exists otherwise."""
    new = plan.new_run_id
    if not existing:
        return 0
    origin = forked_from(existing[0])
    have = existing[1:]
    same = (
        origin is not None
        and unfinished_fork(existing) is not None
        and (origin.run, origin.step, origin.copied)
        == (plan.run_id, plan.at_step, len(plan.copies))
        and isinstance(existing[0].data, dict)
        and existing[0].data.get("input") == plan.started.data.get("input")
        and all(_same(a, b) for a, b in zip(have, plan.copies, strict=False))
    )
    if not same:
        raise ForkError(new, f"run {new!r} already exists; pick another id for the fork")
    return len(have)


def _same(a: Record, b: Record) -> bool:
    return (a.type, a.step, a.kind, a.data, a.at) == (b.type, b.step, b.kind, b.data, b.at)


def _must_be_new(new: str) -> Check:
    def check(records: list[Record]) -> None:
        if records:
            raise ForkError(new, f"run {new!r} already exists; pick another id for the fork")

    return check


def _nothing_since(new: str) -> Check:
    def check(records: list[Record]) -> None:
        if records:
            raise ForkError(
                new,
                f"run {new!r} changed while it was being forked (another writer); the copy "
                "stopped there: run the same fork again to finish it",
            )

    return check

"""The commands that show one run: ``show`` (``--follow``) and ``plan``, and the JSON of a
run both print."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from .. import hints
from ..budget import overdue, stopped_at
from ..control import budget_text
from ..deadlines import lapse_text
from ..deploys import fork_step
from ..describe import record_line
from ..fold import Fold, RunStatus
from ..fork import fork_points, forks_of
from ..lineage import ForkedFrom
from ..plan import Plan, PlanEnding, plan
from ..record import Record
from ..stores import Store
from ..view import RunView, view_store
from . import follow
from .common import (
    Refused,
    args_text,
    clean,
    dump,
    hint_store,
    iso,
    one_line,
    require_run,
    stamp,
    status_word,
    store_of,
    versioned,
    with_iso,
)
from .controls import controls_dict, halt_line, pending_dict
from .show_attempts import attempt_dict, attempt_lines, no_worker_line

# `show --follow` exits with this when the run stops for a human (awaiting_approval,
# indeterminate, over_budget, failed), EXIT_STOPPED when a human stopped it (cancelled,
# paused); 0 when it completes (or moved), 1 when its journal does not load, 130 on Ctrl-C.
EXIT_NEEDS_HUMAN = 3
EXIT_STOPPED = 4


def origin_dict(origin: ForkedFrom | None) -> dict[str, Any] | None:
    """A fork's origin as JSON (``forked_from``), None for a run that is no fork."""
    return None if origin is None else origin.to_dict()


def view_dict(
    view: RunView, *, records: bool = True, forks: list[str] | None = None
) -> dict[str, Any]:
    """A RunView as plain JSON: what ``show --json`` prints (with the runs forked from it,
    ``forks``), and without the records what ``ls --json`` prints per run. docs/json.md lists
    every field."""
    d: dict[str, Any] = {
        "run_id": view.run_id,
        "status": str(view.status),
        "needs_human": view.needs_human,
        "waiting_on": view.waiting_on,
        "steps": len(view.steps),
        "model_calls": view.model_calls,
        "started_at": view.started_at,
        "started_at_iso": iso(view.started_at),
        "last_activity": view.last_activity,
        "last_activity_iso": iso(view.last_activity),
        "last_seq": view.last_seq,
        "error": view.error,
        "pending": [pending_dict(p) for p in view.pending],
        "indeterminate": None,
        "answer": None if view.answer is None else view.answer.to_dict(),
        "leased": view.leased,
        "tokens": None if view.tokens is None else view.tokens.to_dict(),
        "forked_from": origin_dict(view.forked_from),
        **controls_dict(
            view.controls.budget, view.controls.spend.to_dict(), view.halt, view.stopping
        ),
    }
    if forks is not None:
        d["forks"] = forks
    if view.indeterminate is not None:
        s = view.indeterminate
        d["indeterminate"] = {
            "step": s.name,
            "tool": s.call.name if s.call else None,
            "arguments": s.call.arguments if s.call else None,
            "started_at": s.started_at,
            "started_at_iso": iso(s.started_at),
            "attempts": s.attempts,
            "hint": s.hint,
            "may_still_land": view.late_write or None,
        }
    if records:
        d["input"] = [m.to_dict() for m in view.input]
        d["step_views"] = [
            {
                "name": s.name,
                "kind": s.kind,
                "write": s.write,
                "idempotent": s.idempotent,
                "hint": s.hint,
                "classified_by": s.classified_by,
                "started": s.started,
                "completed": s.completed,
                "result": s.result,
                "attempts": s.attempts,
                "started_at": s.started_at,
                "started_at_iso": iso(s.started_at),
                "completed_at": s.completed_at,
                "completed_at_iso": iso(s.completed_at),
                "call": None if s.call is None else s.call.to_dict(),
                "usage": None if s.usage is None else s.usage.to_dict(),
                "model": s.model,
            }
            for s in view.steps
        ]
        d["records"] = [with_iso(r.to_dict(), "at") for r in view.records]
        d["outcome"] = None if view.outcome is None else view.outcome.to_dict()
    return versioned(d)


def timeline_line(r: Record) -> str:
    """One record as a line of ``show``'s timeline."""
    when = time.strftime("%H:%M:%S", time.localtime(r.at))
    step = clean(r.step) if r.step else ""
    return f"  {r.seq:>4}  {when}  {r.type:<14} {step:<28} {record_line(r)}".rstrip()


def cmd_show(args: argparse.Namespace) -> int:
    """Print one run: its lineage, its timeline and what it waits on; ``--follow`` prints
    each record as it lands until the run completes or stops for a human."""
    store = store_of(args)
    require_run(store, args.run)
    view = view_store(store, args.run)
    if view.status == RunStatus.CORRUPT:
        raise Refused(
            view.error if view.forked_from is None else f"run {view.run_id} is {view.error}"
        )
    if args.follow:
        return _follow(args, store, view)
    forks = forks_of(store, view.run_id)
    tried = store.attempts(view.run_id)
    if args.json:
        print(dump({**view_dict(view, forks=forks), "attempts": [attempt_dict(a) for a in tried]}))
        return 0
    print(_header(view, forks))
    for r in view.records:
        print(timeline_line(r))
    print()
    print("\n".join(attempt_lines(tried)))
    print()
    _next_steps(store, view, hint_store(args, store))
    return 0


def _header(view: RunView, forks: list[str]) -> str:
    """The lines above a run's timeline: who it is, its status, where it came from."""
    lines = [f"run      {view.run_id}", f"status   {status_word(view.status)}"]
    if view.forked_from is not None:
        lines.append(f"lineage  {clean(view.forked_from.describe())}")
    if forks:
        lines.append(f"forks    {', '.join(forks)}")
    lines += [
        f"started  {stamp(view.started_at)}",
        f"last     {stamp(view.last_activity)}",
        f"steps    {len(view.steps)}, model calls {view.model_calls}",
    ]
    if view.tokens is not None:
        t = view.tokens
        lines.append(f"tokens   {t.input} in, {t.output} out ({t.total} in all)")
    if view.controls.budget.limited:
        lines.append(f"budget   {budget_text(view.controls)}")
    halt = halt_line(view)
    if halt:
        lines.append(f"{'stopping' if view.stopping else 'control'}  {halt}")
    lines += ["", "timeline"]
    return "\n".join(lines)


def _record_json(run_id: str, r: Record) -> str:
    return dump(versioned({"run_id": run_id, **with_iso(r.to_dict(), "at")}))


def _follow(args: argparse.Namespace, store: Store, view: RunView) -> int:
    """``show --follow``: the timeline, then each record as it lands; then how it stopped.
    Exit 0 completed, 3 stopped for a human (EXIT_NEEDS_HUMAN), 1 its journal went bad."""
    run_id = view.run_id

    def out(line: str) -> None:
        print(line, flush=True)  # a pipe gets each line as it lands, not at exit

    def on_record(r: Record) -> None:
        out(_record_json(run_id, r) if args.json else timeline_line(r))

    if not args.json:
        out(_header(view, forks_of(store, run_id)))
    for r in view.records:
        on_record(r)
    fold = Fold()
    for r in view.records:
        fold.add(r)
    status = view.status
    lonely = no_worker_line(store, status) if status not in follow.STOPS else None
    if lonely is not None:  # said once; the follow goes on for when one starts
        print(lonely, file=sys.stderr if args.json else sys.stdout, flush=True)
    if status not in follow.STOPS:
        status = asyncio.run(follow.follow_run(store, run_id, fold, on_record))
    final = view_store(store, run_id)
    if status == RunStatus.CORRUPT:
        raise Refused(final.error or f"the journal of run {run_id} does not load any more")
    if not args.json:
        out("")
        out(f"status   {status_word(status)}")
        if final.status == status:  # else it moved on meanwhile (a worker retrying it)
            _next_steps(store, final, hint_store(args, store))
    if status in (RunStatus.COMPLETED, RunStatus.MOVED):
        return 0
    return EXIT_STOPPED if status in (RunStatus.CANCELLED, RunStatus.PAUSED) else EXIT_NEEDS_HUMAN


def _next_steps(store: Store, view: RunView, where: str | None) -> None:
    """What the run waits on and the commands that move it on (naming the store ``where``,
    when not the default)."""
    run = view.run_id
    if view.status == RunStatus.AWAITING_APPROVAL:
        print(f"waiting for approval ({len(view.pending)}):")
        for p in view.pending:
            print(f"  marker     {clean(p.marker)}")
            print(f"  tool       {clean(p.tool)}")
            if p.policy:
                print(f"  class      {one_line(p.policy, 200)}")
            print(f"  arguments  {args_text(p.arguments)}")
            if p.deadline_at is not None:
                print(f"  lapses     {lapse_text(p.deadline_at)}: then it is denied")
            print()
        print(f"approve:  {hints.approve(run, store=where)}   (or --all)")
        print(f"deny:     {hints.deny(run, store=where)}")
    elif view.status == RunStatus.INDETERMINATE and view.indeterminate is not None:
        s = view.indeterminate
        print(f"indeterminate: write step {clean(s.name)} started and never recorded a result")
        if s.classified_by:
            print(f"  class      write, class from {clean(s.classified_by)}")
        if s.call is not None:
            print(f"  tool       {clean(s.call.name)}")
            print(f"  arguments  {args_text(s.call.arguments)}")
        if s.hint:
            print(f"  check      {one_line(s.hint, 200)}")
        if view.late_write:
            print(f"  warning    {clean(view.late_write)}")
        print("it may or may not have happened: check the external system, then")
        print(f"  {clean(hints.reconcile_done(run, s.name, where))}   (it happened)")
        print(f"  {clean(hints.reconcile_retry(run, s.name, where))}         (it did not)")
    elif view.status == RunStatus.FAILED:
        print(f"failed: {clean(view.error)}")
        print(f"fix the cause, then: {hints.retry(run, where)}")
    elif view.status == RunStatus.CANCELLED:
        print(f"{halt_line(view)}: nothing resumes it")
        steps = fork_points(view.records)
        print(f"start afresh from a step: {hints.fork(run, store=where)}")
        if steps:
            print(f"  STEP is one of: {clean(', '.join(steps))}")
    elif view.status == RunStatus.PAUSED:
        print(f"{halt_line(view)}: no worker starts it")
        print(f"resume: {hints.resume(run, where)}")
    elif view.status == RunStatus.INCOMPATIBLE:
        print(clean(view.waiting_on))
        at = fork_step(view.outcome.blocked if view.outcome is not None else ())
        print(f"accept the change: {hints.accept_change(run, store=where)}")
        print(f"  or fork it:      {hints.fork(run, at=at, store=where)}")
        print(f"  or cancel it:    {hints.cancel(run, store=where)}")
    elif view.status == RunStatus.OVER_BUDGET:
        print(clean(view.waiting_on))
        budget = view.controls.budget
        limit = stopped_at(budget, view.waiting_on)
        if limit is not None:
            late = overdue(budget, view.controls.started_at, time.time())
            go_on = hints.raise_budget(run, limit, where, overdue=late)
            print(f"let it go on: {go_on}  (or --set)")
    elif view.status == RunStatus.COMPLETED and view.answer is not None:
        print(f"answer: {clean(view.answer.content)}")
    elif view.status == RunStatus.MOVED:
        there = f" ({clean(hints.show(run, view.moved_to))})" if view.moved_to else ""
        print(f"{clean(view.waiting_on)}: it lives there now{there}")
    elif view.status == RunStatus.READY:
        print(f"ready: a worker will resume it ({hints.worker(where)})")
    elif view.status == RunStatus.RUNNING:
        holder = store.lease_holder(run) or {}
        who = f"pid {holder['pid']} on {holder['host']}" if "pid" in holder else ""
        owner = str(holder.get("owner") or "")
        if owner and owner != f"{holder.get('host')}:{holder.get('pid')}":
            who = f"{who}; owner {owner}" if who else f"owner {owner}"
        print(f"running: a worker holds its lease{clean(f' ({who})' if who else '')}")
        if view.stopping:
            print(f"stopping: {halt_line(view)}; the attempt ends at its next step")
        stuck = holder.get("stuck")
        if isinstance(stuck, int | float):
            print(
                f"stuck: it has not renewed its lease for {stuck:.0f}s (paused or hung); it "
                "still holds it, so no other worker takes the run over: end that process "
                "(its death frees the lease) or let it go on"
            )


def plan_dict(view: RunView, p: Plan) -> dict[str, Any]:
    """What ``plan --json`` prints. docs/json.md lists every field."""
    return versioned({"run_id": view.run_id, "status": str(view.status), **p.to_dict()})


def cmd_plan(args: argparse.Namespace) -> int:
    """Print what the run's next attempt will do with each step, and where it will stop."""
    store = store_of(args)
    where = hint_store(args, store)
    require_run(store, args.run)
    view = view_store(store, args.run)
    if view.status == RunStatus.CORRUPT:
        raise Refused(view.error)
    code, gate = None, None
    if getattr(args, "agent", None):
        from .deploys import _code_of
        from .serve import load_agent

        code, gate = _code_of(load_agent(args.agent, Path(str(getattr(store, "root", ".")))))
    p = plan(view.records, outcome=view.outcome, gate=gate, code=code)
    if args.json:
        print(dump(plan_dict(view, p)))
        return 0
    print(f"run      {view.run_id}")
    print(f"status   {status_word(view.status)}")
    print(f"next     {clean(p.why)}")
    print()
    width = max((len(clean(s.step)) for s in p.steps), default=4)
    for s in p.steps:
        mark = "→" if s.step == p.stops_at else " "
        print(f"{mark} {s.action:<15} {clean(s.step):<{width}}  {clean(s.why)}")
    if view.status == RunStatus.RUNNING:
        print()
        print("running: a worker holds its lease; this is what an attempt starting now would do")
    elif p.stops_at is not None and view.status == RunStatus.INDETERMINATE:
        print()
        print(f"reconcile it: {clean(hints.reconcile_done(view.run_id, p.stops_at, where))}")
        print(f"          or: {clean(hints.reconcile_retry(view.run_id, p.stops_at, where))}")
    elif p.ending == PlanEnding.OVER_BUDGET:
        limit = stopped_at(view.controls.budget, p.why)
        if limit is not None:
            late = overdue(view.controls.budget, view.controls.started_at, time.time())
            print()
            print(f"let it go on: {hints.raise_budget(view.run_id, limit, where, overdue=late)}")
    elif p.ending == PlanEnding.INCOMPATIBLE:
        print()
        at = fork_step(view.outcome.blocked if view.outcome is not None else ())
        print(f"accept the change: {hints.accept_change(view.run_id, store=where)}")
        print(f"  or fork it:      {hints.fork(view.run_id, at=at, store=where)}")
        print(f"  or cancel it:    {hints.cancel(view.run_id, store=where)}")
    elif p.stops_at is not None and view.status == RunStatus.AWAITING_APPROVAL:
        print()
        print(f"decide: {hints.approve(view.run_id, store=where)}")
        print(f"    or: {hints.deny(view.run_id, store=where)}")
    return 0

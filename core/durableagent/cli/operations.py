"""The operations commands: ``fork`` (a new run from a step of another) and ``audit`` (every
human decision in a store)."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from .. import actions
from ..audit import Decision, audit
from ..budget import Budget, BudgetError, parse_budget
from ..durations import parse_duration
from ..fork import DROP, KEEP
from ..ids import check_run_id
from ..record import STEP_COMPLETED, Record, signal_fields
from .common import (
    Parents,
    Refused,
    Usage,
    clean,
    describe,
    dump,
    one_line,
    require_run,
    stamp,
    store_of,
    versioned,
    with_iso,
)


def since_arg(text: str, now: float | None = None) -> float:
    """``--since``: ISO-8601 (``2026-11-30``, ``2026-11-30T09:00``, ``...Z`` or ``+02:00``;
    without a zone, local time) or a time ago (``45s``, ``30m``, ``2h``, ``1d``, ``1w``), as
    epoch seconds."""
    text = text.strip()
    try:
        ago = parse_duration(text)
    except ValueError:
        pass
    else:
        return (time.time() if now is None else now) - ago
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a time: use ISO-8601 (2026-11-30T09:00:00Z) or a time ago "
            "(30m, 2h, 1d, 1w)"
        ) from None


def _signal_text(r: Record) -> str:
    name, payload, by, _ = signal_fields(r)
    what = payload.get("marker") if name in ("approve", "deny") else payload.get("outcome")
    return clean(f"{name} {what or r.step}" + (f" by {by}" if by else ""))


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork RUN at STEP as NEW: NEW replays RUN's steps before STEP and runs STEP on afresh."""
    store = store_of(args)
    require_run(store, args.run)
    check_run_id(args.new)
    budget = None
    if args.budget is not None:
        try:
            budget = Budget(**parse_budget(args.budget))
        except BudgetError as e:
            raise Usage(str(e)) from None
    existed = bool(store.load(args.new))
    plan = actions.fork(
        store,
        args.run,
        args.new,
        at_step=args.at,
        signals=DROP if args.drop_signals else KEEP,
        by=args.by or None,
        reason=args.reason,
        new_budget=budget,
    )
    origin = plan.origin
    step = clean(origin.step)
    finished = "finished the interrupted fork: " if existed else ""
    print(
        f"{finished}forked {args.run} at {step} as {args.new}: {origin.copied} records copied "
        f"(up to seq {origin.seq} of {args.run})"
    )
    done = {r.step for r in plan.copies if r.type == STEP_COMPLETED}
    for r in plan.kept_signals:
        again = signal_fields(r)[0] == "approve" and r.step not in done
        note = f" ({args.new} runs it without asking again)" if again else ""
        print(f"  kept     {_signal_text(r)}{note}")
    for r in plan.dropped_signals:
        print(f"  dropped  {_signal_text(r)}")
    in_force = Budget.from_dict(plan.started.data.get("budget"))
    if in_force.limited:
        print(f"  budget   {in_force.describe()} (what {args.run} spent before {step} counts)")
    print(
        f"a worker resumes {args.new}: the copied steps replay, {step} and what follows run "
        "with the agent the worker runs now"
    )
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    """Every human decision in the store (or one run), oldest first: a table or JSON lines.
    Exit 1 (after listing the rest) when a journal could not be read."""
    store = store_of(args)
    if args.run is not None:
        require_run(store, args.run)
    found = audit(store, run_id=args.run, since=args.since, by=args.who)
    if args.json:
        for d in found.decisions:
            print(dump(versioned(with_iso(d.to_dict(), "at"))))
    elif not found.decisions:
        narrowed = args.run or args.since is not None or args.who is not None
        print(f"no decisions in {describe(store)}" + (" that match" if narrowed else ""))
    else:
        _audit_table(found.decisions)
    for run_id, why in found.unreadable:
        print(f"agentrun audit: run {run_id} left out: {clean(why)}", file=sys.stderr)
    if found.unreadable:
        raise Refused(
            f"{len(found.unreadable)} journal(s) could not be read: the audit is incomplete"
        )
    return 0


def _audit_table(decisions: Sequence[Decision]) -> None:
    rows = [("TIME", "BY", "RUN", "STEP", "DIGEST", "DECISION", "EFFECT", "REASON", "NOTE")]
    for d in decisions:
        note = d.note + (f"; copied from {d.copied_from}" if d.copied_from else "")
        if d.result is not None:
            note = f"result {one_line(d.result, 40)}; {note}"
        rows.append(
            (
                stamp(d.at),
                one_line(d.by or "-", 20),
                d.run_id,
                one_line(d.step, 40),
                d.digest or "-",
                d.decision,
                d.effect,
                one_line(d.reason, 50) if d.reason else "-",
                one_line(note, 80),
            )
        )
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    line = "  ".join(f"{{:<{w}}}" for w in widths)
    sys.stdout.write("\n".join(line.format(*r).rstrip() for r in rows) + "\n")


def register(sub: Any, parents: Parents) -> None:
    """Add fork and audit to the subcommands."""
    s = sub.add_parser(
        "fork",
        parents=[parents.store],
        help="a new run that replays a run up to a step and runs afresh from there",
        description=(
            "Fork RUN at STEP as NEW. NEW starts with RUN's input and copies of RUN's records "
            "before STEP's first start (its model calls and tool results replay, nothing is "
            "called again); a worker runs STEP and what follows with the agent it runs now, "
            "so a fixed prompt or tool applies from STEP on. Approvals and denials carry over "
            "for calls with the same arguments (--drop-signals: none does). A write before "
            "STEP that never recorded a result refuses the fork: reconcile it first. RUN is "
            "not changed. STEP is one of RUN's steps (see 'agentrun show RUN') or the one that "
            "would come next (a pending call, the next model turn llm/N). Running the same "
            "fork again finishes one that was cut short."
        ),
    )
    s.add_argument("run", metavar="RUN")
    s.add_argument("--at", required=True, metavar="STEP", help="the step NEW runs afresh from")
    s.add_argument("--as", dest="new", required=True, metavar="NEW", help="the new run's id")
    s.add_argument(
        "--drop-signals",
        action="store_true",
        help="copy no approval, denial or reconcile: humans decide again in NEW",
    )
    s.add_argument(
        "--budget",
        metavar="LIMITS",
        help="NEW's budget, e.g. tokens=200000,deadline=2h (default: RUN's at the cut)",
    )
    s.add_argument("--reason", required=True, help="why (recorded in NEW's run.started)")
    s.add_argument("--by", default=None, help="who forks (default: your login name)")
    s.set_defaults(fn=cmd_fork)

    s = sub.add_parser(
        "audit",
        parents=[parents.store, parents.json],
        help="every human decision in the store: who, when, on which call, why",
        description=(
            "List every approve, deny and reconcile in the store, oldest first: when, who, "
            "the run, the step and tool, the marker's digest of the call's arguments, the "
            "decision, what became of it (applied, pending, or overridden: an approval a later "
            "deny beat) and the reason. Reads only the journals that hold signals. Exit 1, "
            "after the rest, when a journal could not be read."
        ),
    )
    s.add_argument("--run", default=None, metavar="RUN", help="only this run")
    s.add_argument(
        "--since",
        type=since_arg,
        default=None,
        metavar="TIME",
        help="only decisions at or after TIME: ISO-8601 (local time without a zone) or ago "
        "(30m, 2h, 1d, 1w)",
    )
    s.add_argument("--by", dest="who", default=None, metavar="WHO", help="only WHO's decisions")
    s.set_defaults(fn=cmd_audit)

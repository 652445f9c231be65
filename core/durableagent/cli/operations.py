"""The operations commands: ``fork`` (a new run from a step of another) and ``audit`` (every
human decision in a store)."""

from __future__ import annotations

import argparse
from typing import Any

from ..fork import DROP, KEEP, plan_fork, write_fork
from ..ids import check_run_id
from ..record import Record, signal_fields
from .common import Parents, clean, require_run, store_of


def _signal_text(r: Record) -> str:
    name, payload, by, _ = signal_fields(r)
    what = payload.get("marker") if name in ("approve", "deny") else payload.get("outcome")
    return clean(f"{name} {what or r.step}" + (f" by {by}" if by else ""))


def cmd_fork(args: argparse.Namespace) -> int:
    """Fork RUN at STEP as NEW: NEW replays RUN's steps before STEP and runs STEP on afresh."""
    store = store_of(args)
    require_run(store, args.run)
    check_run_id(args.new)
    existed = bool(store.load(args.new))
    plan = plan_fork(
        store.load(args.run),
        args.run,
        args.new,
        at_step=args.at,
        signals=DROP if args.drop_signals else KEEP,
        by=args.by or None,
        reason=args.reason,
    )
    write_fork(store, plan)
    origin = plan.origin
    step = clean(origin.step)
    finished = "finished the interrupted fork: " if existed else ""
    print(
        f"{finished}forked {args.run} at {step} as {args.new}: {origin.copied} records copied "
        f"(up to seq {origin.seq} of {args.run})"
    )
    for r in plan.kept_signals:
        print(f"  kept     {_signal_text(r)}")
    for r in plan.dropped_signals:
        print(f"  dropped  {_signal_text(r)}")
    print(
        f"a worker resumes {args.new}: the copied steps replay, {step} and what follows run "
        "with the agent the worker runs now"
    )
    return 0


def register(sub: Any, parents: Parents) -> None:
    """Add fork to the subcommands."""
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
    s.add_argument("--reason", required=True, help="why (recorded in NEW's run.started)")
    s.add_argument("--by", default=None, help="who forks (default: your login name)")
    s.set_defaults(fn=cmd_fork)

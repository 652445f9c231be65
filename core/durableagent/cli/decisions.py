"""The decision commands: ``approve``, ``deny``, ``reconcile`` and ``retry``."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .. import actions
from ..calls import is_marker
from ..journal import Reconcile
from ..record import Record
from ..steps import parse_step
from ..view import view_store
from .bulk import add_bulk, single_or_bulk
from .common import Parents, Refused, Usage, clean, require_run, store_of


def _decide(args: argparse.Namespace, name: str) -> Record:
    """``approve`` or ``deny`` of the call ``args.marker`` names (durableagent.actions)."""
    store = store_of(args)
    require_run(store, args.run)
    if not is_marker(args.marker):
        raise Usage(
            f"{args.marker!r} is not a marker: copy one from 'agentrun show {args.run}' "
            "(like tool/1/0/create_ticket#3f2a9c1b0d4e)"
        )
    decide = actions.approve if name == "approve" else actions.deny
    return decide(store, args.run, args.marker, by=args.by or None, reason=args.reason)


def cmd_approve(args: argparse.Namespace) -> int:
    """Approve one pending call (by marker) or, with --all, every pending call."""
    if args.all == bool(args.marker):
        raise Usage("approve needs a MARKER or --all (not both)")
    if not args.all:
        _decide(args, "approve")
        print(f"approved {args.marker}")
        return 0
    store = store_of(args)
    require_run(store, args.run)
    view = view_store(store, args.run)
    if not view.pending:
        raise Refused(f"run {args.run} has no pending approvals (it is {view.status})")
    for p in view.pending:
        actions.approve(store, args.run, p.marker, by=args.by or None, reason=args.reason)
        print(f"approved {clean(p.marker)}")
    return 0


def cmd_deny(args: argparse.Namespace) -> int:
    """Deny one pending call; the model reads the reason."""
    if not args.marker:
        raise Usage("deny needs a MARKER (see 'agentrun show RUN')")
    _decide(args, "deny")
    print(f"denied {args.marker}")
    return 0


def cmd_reconcile(args: argparse.Namespace) -> int:
    """Settle an indeterminate write: it happened (--done RESULT) or run it again (--retry)."""
    payload: Reconcile
    store = store_of(args)
    require_run(store, args.run)
    if parse_step(args.step) is None:
        raise Usage(
            f"{args.step!r} is not a step: give the write step 'agentrun show {args.run}' "
            "names (like tool/2/0/create_ticket)"
        )
    if args.done is not None and not args.done.strip():
        raise Usage("--done needs the result you found (e.g. the ticket id), not blank text")
    if args.done is not None:
        payload = Reconcile(args.step, "done", args.done)
    else:
        payload = Reconcile(args.step, "retry")
        _confirm_retry(args)
    actions.reconcile(store, args.run, payload, by=args.by or None, reason=args.reason)
    print(f"reconciled {args.step} as {payload.outcome}; a worker will resume {args.run}")
    return 0


def _confirm_retry(args: argparse.Namespace) -> None:
    """A retry of a write whose holder may still be alive (paused, not dead) could run it
    twice: say so, naming the old holder, and go on only on a yes (or --yes)."""
    store = store_of(args)
    require_run(store, args.run)
    view = view_store(store, args.run)
    if not view.late_write or args.yes:
        return
    warning = f"{args.step} of {args.run}: {clean(view.late_write)}"
    if not sys.stdin.isatty():
        raise Refused(f"{warning}. Retry anyway with --yes, or wait and check again")
    print(f"warning: {warning}", file=sys.stderr)
    answer = input(f"retry {args.step} all the same? [y/N] ")
    if answer.strip().lower() not in ("y", "yes"):
        raise Refused("not retried; nothing was written")


def cmd_retry(args: argparse.Namespace) -> int:
    """Give a failed run a fresh budget of worker attempts."""
    store = store_of(args)
    require_run(store, args.run)
    actions.retry(store, args.run, by=args.by, reason=args.reason)
    print(f"run {args.run} will be retried by the next worker that looks (within a second)")
    return 0


def register(sub: Any, parents: Parents) -> None:
    """Add approve, deny, reconcile and retry to the subcommands."""
    common, by = parents.store, parents.by
    s = sub.add_parser("approve", parents=[common, by], help="approve a pending tool call")
    s.add_argument("run", metavar="RUN", nargs="?")
    s.add_argument("marker", metavar="MARKER", nargs="?", help="as printed by 'agentrun show'")
    s.add_argument("--all", action="store_true", help="approve every pending call of the run")
    add_bulk(s, "approve")
    s.set_defaults(fn=single_or_bulk("approve", cmd_approve))

    s = sub.add_parser("deny", parents=[common, by], help="deny a pending tool call")
    s.add_argument("run", metavar="RUN", nargs="?")
    s.add_argument("marker", metavar="MARKER", nargs="?")
    add_bulk(s, "deny")
    s.set_defaults(fn=single_or_bulk("deny", cmd_deny))

    s = sub.add_parser("reconcile", parents=[common, by], help="settle an indeterminate write")
    s.add_argument("run", metavar="RUN")
    s.add_argument("step", metavar="STEP")
    how = s.add_mutually_exclusive_group(required=True)
    how.add_argument("--done", metavar="RESULT", help="it happened; RESULT is what it produced")
    how.add_argument("--retry", action="store_true", help="it did not happen; run it again")
    s.add_argument(
        "--yes",
        action="store_true",
        help="retry without asking even when the write's old holder may still be alive",
    )
    s.set_defaults(fn=cmd_reconcile)

    s = sub.add_parser(
        "retry",
        parents=[common, by],
        help="let workers retry a failed run that used up its attempts",
        description=(
            "Workers retry a failed run with exponential backoff until it has failed "
            "--max-attempts times (one count for all workers, kept in the store), then leave "
            "it failed. Fix the cause, then run this: it records a retry signal (--by, --reason) "
            "in the journal, clears the count, and the next worker tries again within a "
            "second. Any new signal on the run clears the count too."
        ),
    )
    s.add_argument("run", metavar="RUN", nargs="?")
    add_bulk(s, "retry")
    s.set_defaults(fn=single_or_bulk("retry", cmd_retry))

"""The control commands: ``cancel``, ``pause``, ``resume`` and ``budget`` (SPEC §10), and how
a run's controls read in ``show`` and ``--json``."""

from __future__ import annotations

import argparse
import time
from typing import Any

from .. import actions, hints
from ..budget import Budget, BudgetError, parse_budget
from ..control import Control, budget_text
from ..durations import format_duration
from ..fold import RunStatus
from ..gate import Pending
from ..view import RunView, view_store
from .bulk import add_bulk, single_or_bulk
from .common import Parents, Usage, clean, hint_store, iso, require_run, store_of

_NEEDS_REASON = ("cancel", "pause")


def cmd_cancel(args: argparse.Namespace) -> int:
    """Cancel a run: no step starts after this, ever."""
    store = _signalled(args, "cancel", {})
    view = view_store(store, args.run)
    print(f"cancelled {args.run}: no step of it starts again")
    if view.leased:
        print(
            "its attempt in flight stops now: a read is cancelled, a write records its "
            "result first (watch: agentrun show --follow " + args.run + ")"
        )
    return 0


def cmd_pause(args: argparse.Namespace) -> int:
    """Pause a run: no attempt or step starts until it is resumed."""
    store = _signalled(args, "pause", {})
    view = view_store(store, args.run)
    print(f"paused {args.run}; resume it with: {hints.resume(args.run, hint_store(args, store))}")
    if view.leased:
        print("its attempt in flight stops at its next step (a read in flight is cancelled)")
    return 0


def cmd_resume(args: argparse.Namespace) -> int:
    """Lift a run's pause: a worker picks it up again."""
    _signalled(args, "resume", {})
    print(f"resumed {args.run}; a worker will pick it up")
    return 0


def cmd_budget(args: argparse.Namespace) -> int:
    """Show a run's budget and what it spent, or raise (--add) or set (--set) its limits."""
    store = store_of(args)
    require_run(store, args.run)
    if args.add is None and args.set is None:
        print(budget_text(view_store(store, args.run).controls))
        return 0
    if not (args.reason or "").strip():
        raise Usage("changing a budget needs --reason: the journal keeps why")
    how, text = ("add", args.add) if args.add is not None else ("set", args.set)
    try:
        limits = parse_budget(text, lifting=how == "set")
    except BudgetError as e:
        raise Usage(str(e)) from None  # as for submit --budget: the argument does not parse
    actions.budget(store, args.run, how, limits, by=args.by, reason=args.reason)
    view = view_store(store, args.run)
    print(f"budget of {args.run} is now: {view.controls.budget.describe()}")
    if view.status == RunStatus.READY:
        print("a worker will pick it up")
    return 0


def _signalled(args: argparse.Namespace, name: str, payload: dict[str, Any]) -> Any:
    if name in _NEEDS_REASON and not (args.reason or "").strip():
        raise Usage(f"{name} needs --reason: the journal keeps why, for whoever looks next")
    store = store_of(args)
    require_run(store, args.run)
    actions.act(store, args.run, name, payload, by=args.by, reason=args.reason)
    return store


def controls_dict(
    budget: Budget | None, spent: dict[str, Any] | None, halt: Control | None, stopping: str
) -> dict[str, Any]:
    """The controls as ``show --json`` and ``ls --json`` say them: ``budget`` and ``spent``
    (None for a run without one), the ``cancelled`` or ``paused`` signal in force (by, reason,
    at), and ``stopping`` (``cancel``/``pause`` while an attempt winds down, else None)."""
    d: dict[str, Any] = {
        "budget": budget.to_dict() if budget is not None and budget.limited else None,
        "spent": spent if budget is not None and budget.limited else None,
        "stopping": stopping or None,
    }
    for name, key in (("cancel", "cancelled"), ("pause", "paused")):
        c = halt if halt is not None and halt.name == name else None
        d[key] = None if c is None else {"by": c.by, "reason": c.reason, **_at(c.at)}
    return d


def pending_dict(p: Pending) -> dict[str, Any]:
    """A pending call as JSON, with when its approval lapses (``deadline_at``)."""
    d = p.to_dict()
    d.setdefault("deadline_at", None)
    d["deadline_at_iso"] = iso(p.deadline_at)
    return d


def _at(at: float) -> dict[str, Any]:
    return {"at": at, "at_iso": iso(at)}


def halt_line(view: RunView) -> str:
    """``cancelled by ana at 14:02:11: looping`` (or paused), for ``show``'s header; ""."""
    halt = view.halt
    if halt is None:
        return ""
    ago = format_duration(time.time() - halt.at)
    return f"{clean(halt.says())} ({ago} ago)"


def register(sub: Any, parents: Parents) -> None:
    """Add cancel, pause, resume and budget to the subcommands."""
    common, by = parents.store, parents.by
    s = sub.add_parser(
        "cancel",
        parents=[common, by],
        help="cancel a run for good (--reason required)",
        description=(
            "Cancel a run: no step starts after this is recorded. A running attempt hears of "
            "it at once: a read in flight is cancelled (nothing of it is recorded), a write "
            "in flight is never interrupted (it records its result, then the attempt stops). "
            "Nothing resumes a cancelled run; only a write it left open may be reconciled."
        ),
    )
    s.add_argument("run", metavar="RUN", nargs="?")
    add_bulk(s, "cancel")
    s.set_defaults(fn=single_or_bulk("cancel", cmd_cancel))

    s = sub.add_parser(
        "pause",
        parents=[common, by],
        help="hold a run: no attempt or step starts until resume (--reason required)",
        description=(
            "Pause a run: no worker starts an attempt of it, and a running attempt starts no "
            "new step (a read in flight is cancelled; a write records its result first), "
            "until 'agentrun resume'."
        ),
    )
    s.add_argument("run", metavar="RUN", nargs="?")
    add_bulk(s, "pause")
    s.set_defaults(fn=single_or_bulk("pause", cmd_pause))

    s = sub.add_parser("resume", parents=[common, by], help="lift a run's pause")
    s.add_argument("run", metavar="RUN", nargs="?")
    add_bulk(s, "resume")
    s.set_defaults(fn=single_or_bulk("resume", cmd_resume))

    s = sub.add_parser(
        "budget",
        parents=[common, by],
        help="show, raise or set a run's budget",
        description=(
            "Without --add or --set: what the run may spend and what it spent (recorded "
            "usage, plus a reservation for each model call that never recorded its reply). "
            "--add raises limits, --set sets them (NAME=none lifts one); an over_budget run "
            "goes on. Limits: tokens=200000 (or 200k), model_calls=40, tool_calls=100, "
            "cost=5.00, deadline=2h. --reason is required to change a budget."
        ),
    )
    s.add_argument("run", metavar="RUN")
    how = s.add_mutually_exclusive_group()
    how.add_argument("--add", metavar="LIMITS", help="raise limits, e.g. tokens=50000")
    how.add_argument("--set", metavar="LIMITS", help="set limits, e.g. tokens=300k,deadline=4h")
    s.set_defaults(fn=cmd_budget)

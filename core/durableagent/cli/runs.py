"""The run commands: ``ls`` (``--watch``) and ``submit``; ``show`` and ``plan`` are in
show.py."""

from __future__ import annotations

import argparse
import asyncio
import gc
import sys
import time
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from operator import attrgetter
from typing import Any

from ..budget import Budget, BudgetError, parse_budget
from ..bulk import lease_owners
from ..fold import RunStatus, Summary
from ..ids import check_run_id
from ..labels import ATTENTION_RANK, ago
from ..messages import Message
from ..run import submit
from ..steps import step_tool_name
from ..stores import Store
from . import follow
from .bulk import BadQuery, query_of
from .common import (
    Parents,
    Refused,
    Usage,
    describe,
    dump,
    iso,
    one_line,
    status_arg,
    status_word,
    store_of,
    versioned,
)
from .controls import controls_dict, pending_dict
from .show import cmd_plan, cmd_show, origin_dict
from .show_attempts import owners

# `show --follow` exits with this when the run stops for a human (awaiting_approval,


def summary_dict(s: Summary) -> dict[str, Any]:
    """A run's summary as plain JSON: what ``ls --json`` prints, one object per run, from the
    store's summaries (no journal read). docs/json.md lists every field."""
    d: dict[str, Any] = {
        "run_id": s.run_id,
        "status": str(s.status),
        "needs_human": s.needs_human,
        "waiting_on": s.waiting_on,
        "steps": s.steps,
        "model_calls": s.model_calls,
        "started_at": s.started_at,
        "started_at_iso": iso(s.started_at),
        "last_activity": s.last_activity,
        "last_activity_iso": iso(s.last_activity),
        "last_seq": s.last_seq,
        "error": s.error,
        "pending": [pending_dict(p) for p in s.pending],
        "indeterminate": None
        if s.indeterminate is None
        else {"step": s.indeterminate, "tool": step_tool_name(s.indeterminate)},
        "answer": None if not s.answer else {"role": "assistant", "content": s.answer},
        "leased": s.leased,
        "forked_from": origin_dict(s.forked_from),
        **controls_dict(s.budget, s.spent, s.halt, s.stopping),
    }
    return versioned(d)


def attention_order(summaries: list[Summary]) -> list[Summary]:
    """Needs-a-human first, then newest activity first within a status, then by run id.
    Three stable sorts, last key first (a reversed sort keeps ties in order): over 100,000
    runs, half the time of one sort on a (rank, -last activity, run id) tuple."""
    runs = sorted(summaries, key=attrgetter("run_id"))
    runs.sort(key=lambda s: s.last_activity or 0.0, reverse=True)
    runs.sort(key=lambda s: ATTENTION_RANK[s.status])
    return runs


# -- read commands --------------------------------------------------------------------------


def cmd_ls(args: argparse.Namespace) -> int:
    """List runs, needs-attention first (from the store's summaries: no journal is read
    whole); ``--watch`` lists them again at each change."""
    try:
        args.query = query_of(args.where) if getattr(args, "where", None) is not None else None
    except BadQuery as e:
        print(f"agentrun ls: {e}", file=sys.stderr)
        return 2
    store = store_of(args)
    args.owners = {}
    if args.query is not None and args.query.uses_owner:
        args.owners = lease_owners(store, store.summaries())
    if getattr(args, "watch", False):  # (agentrun demo --no-tui lists through here too)
        return _watch(args, store)
    with _no_gc():
        for chunk in _listing(args, store, store.summaries()):
            sys.stdout.write(chunk)
    return 0


@contextmanager
def _no_gc() -> Iterator[None]:
    """The cyclic garbage collector off while a listing is built: 100,000 summaries and
    their rows are a few hundred thousand objects, none in a cycle, and the collections
    they set off (full ones among them) took a sixth of ``agentrun ls``."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _selected(args: argparse.Namespace, summaries: list[Summary]) -> list[Summary]:
    runs = attention_order(summaries)
    if args.status:
        runs = [s for s in runs if any(s.has_status(status) for status in args.status)]
    query = getattr(args, "query", None)
    if query is not None:
        runs = query.select(runs, owners=getattr(args, "owners", {}))
    return runs


def _listing(args: argparse.Namespace, store: Store, summaries: list[Summary]) -> Iterator[str]:
    """What ``ls`` prints, in pieces: the table, or one JSON object per run."""
    runs = _selected(args, summaries)
    held = owners(store, runs)
    if args.json:
        for i in range(0, len(runs), 1000):
            yield "".join(
                dump({**summary_dict(s), "owner": held.get(s.run_id)}) + "\n"
                for s in runs[i : i + 1000]
            )
        return
    if not runs:
        which = " with that status" if args.status else ""
        if getattr(args, "query", None) is not None:
            which = f" matching {args.query.text!r}"
        yield f"no runs in {describe(store)}{which}\n"
        return
    now = time.time()
    words = {status: status_word(status) for status in RunStatus}
    rows = [("STATUS", "RUN", "STEPS", "MODEL CALLS", "WAITING ON", "LAST ACTIVITY")]
    rows += [
        (
            words[s.status],
            s.run_id,
            str(s.steps),
            str(s.model_calls),
            one_line(s.waiting_on, 60)
            if s.waiting_on
            else (f"held by {one_line(held[s.run_id], 48)}" if s.run_id in held else "-"),
            ago(s.last_activity, now),
        )
        for s in runs
    ]
    # One format per row (100,000 rows is a normal store): the widths first, then the lines,
    # written a thousand at a time. The last column is not padded (no trailing blanks), and
    # printf-style formatting is twice as fast as str.format here.
    widths = [max(map(len, column)) for column in zip(*rows, strict=True)]
    line = "".join(f"%-{w}s  " for w in widths[:-1]) + "%s\n"
    for i in range(0, len(rows), 1000):
        yield "".join([line % r for r in rows[i : i + 1000]])


CLEAR = "\x1b[H\x1b[2J"  # cursor home, clear the screen


def _watch(args: argparse.Namespace, store: Store) -> int:
    """``ls --watch``: the listing, then again at each change of it until Ctrl-C. On a
    terminal the screen is cleared and redrawn (also every few seconds, as ages move);
    otherwise each new listing follows a blank line."""
    tty = sys.stdout.isatty()

    def key(summaries: list[Summary]) -> Hashable:
        return tuple(
            (s.run_id, s.status, s.steps, s.model_calls, s.waiting_on, s.last_seq, s.leased)
            for s in _selected(args, summaries)
        )

    def draw(summaries: list[Summary], first: bool) -> None:
        if tty:
            when = time.strftime("%H:%M:%S")
            head = f"agentrun ls --watch  {describe(store)}  {when}  (ctrl+c quits)"
            sys.stdout.write(f"{CLEAR}{head}\n\n")
        elif not first:
            sys.stdout.write("\n")
        for chunk in _listing(args, store, summaries):
            sys.stdout.write(chunk)
        sys.stdout.flush()

    asyncio.run(follow.watch_listing(store, draw, key, redraw_anyway=tty))
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    """Record a new run's input for a worker to execute."""
    if not args.text.strip():
        raise Usage("the run's text is empty: say what the agent should do")
    try:
        args.text.encode()
    except UnicodeEncodeError as e:
        # argv bytes that are not UTF-8 arrive as lone surrogates: refuse before writing.
        bad = args.text[e.start].encode("utf-8", "surrogateescape")
        raise Refused(
            f"the run's text is not valid UTF-8 (byte 0x{bad.hex()} at character {e.start}); "
            "nothing was written"
        ) from None
    budget = None
    if args.budget is not None:
        try:
            budget = Budget(**parse_budget(args.budget))
        except BudgetError as e:
            raise Usage(str(e)) from None
    store = store_of(args, create=True)
    check_run_id(args.run)
    known = bool(store.load(args.run))
    submit(store, args.run, [Message("user", args.text)], budget=budget)
    if known:
        print(f"run {args.run} was already submitted with this text; nothing changed")
    else:
        print(f"submitted {args.run}; a worker will pick it up")
    return 0


def register(sub: Any, parents: Parents) -> None:
    """Add ls, show, plan and submit to the subcommands."""
    s = sub.add_parser(
        "ls", parents=[parents.store, parents.json], help="list runs, needs-attention first"
    )
    s.add_argument(
        "--status",
        action="append",
        type=status_arg,
        metavar="STATUS",
        help=(
            "only runs with this status (repeatable): "
            + ", ".join(str(x) for x in RunStatus)
            + "; or the TUI's short words (awaiting). paused: every run whose pause is in "
            "force, whatever status it shows first"
        ),
    )
    s.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="list again at each change until ctrl+c (a terminal is redrawn in place)",
    )
    s.add_argument(
        "--where",
        metavar="QUERY",
        default=None,
        help=(
            "only runs this query selects, e.g. 'status:failed age>1h run:billing-*' (terms "
            "ANDed, -term negates; fields: status, needs, tool, run, owner, age)"
        ),
    )
    s.set_defaults(fn=cmd_ls)

    s = sub.add_parser(
        "show",
        parents=[parents.store, parents.json],
        help="one run's timeline",
        epilog=(
            "--follow exits 0 when the run completes, 3 when it stops for a human "
            "(awaiting_approval, indeterminate, over_budget or failed), 4 when a human "
            "stopped it (cancelled, paused), 130 on ctrl+c"
        ),
    )
    s.add_argument("run", metavar="RUN")
    s.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="print each record as it lands, until the run completes or stops for a human",
    )
    s.set_defaults(fn=cmd_show)

    s = sub.add_parser(
        "plan",
        parents=[parents.store, parents.json],
        help="what the run's next attempt will do with each step",
        description=(
            "The recovery plan: for each step, whether the next attempt replays it, re-runs "
            "it, stops at it (an open write, a call waiting for approval), records a human's "
            "result for it, or runs it for the first time; and where the attempt stops. "
            "With --agent (a new version about to be deployed), the steps that replay though "
            "their tool or prompt changed since say so, and a call that version cannot take "
            "over stops the plan as incompatible (docs/deploys.md)."
        ),
    )
    s.add_argument("run", metavar="RUN")
    s.add_argument(
        "--agent", metavar="MODULE:ATTR", default=None, help="plan under this agent's code"
    )
    s.set_defaults(fn=cmd_plan)

    s = sub.add_parser("submit", parents=[parents.store], help="submit a new run for a worker")
    s.add_argument("run", metavar="RUN")
    s.add_argument("text", metavar="TEXT", help="the user's request")
    s.add_argument(
        "--budget",
        metavar="LIMITS",
        help=(
            "what the run may spend, e.g. tokens=200000,model_calls=40,deadline=2h "
            "(also tool_calls=N, cost=X in the agent's prices)"
        ),
    )
    s.set_defaults(fn=cmd_submit)

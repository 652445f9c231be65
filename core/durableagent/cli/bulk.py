"""Many runs at once: ``--where QUERY`` on ``cancel``, ``pause``, ``resume``, ``retry``,
``approve`` and ``deny`` (one table of actions: durableagent.bulk), and ``ls --where``.

A bulk command prints what it will do to which runs, asks once (``y``) on a terminal unless
``--yes``, or only prints with ``--dry-run``; then applies each run's action on its own and
reports applied or refused per run (exit 1 if any was refused, or if the query matched
nothing). A query that does not parse is one line naming the fields, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TextIO

from ..bulk import (
    ACTIONS,
    Action,
    Done,
    Target,
    apply_action,
    check_bulk_query,
    plan_action,
    replan,
    select_runs,
)
from ..query import Query, QueryError, parse_query
from .common import Refused, Usage, clean, describe, store_of

WHERE_HELP = (
    "act on every run this query selects instead of one RUN, e.g. "
    "'status:failed age>1h run:billing-*' (terms ANDed, -term negates; fields: status, "
    "needs, tool, run, owner, age; run:* selects every run, an empty query none). Prints "
    "what it will do and asks first"
)
SHOWN = 20  # runs named one by one in the plan; more are counted


class BadQuery(Exception):
    """A --where that does not parse: one line, exit 2."""


def query_of(text: str, *, bulk: bool = False) -> Query:
    """``text`` parsed, or BadQuery with the parser's message (it names the fields). For a
    bulk action (``bulk``) an empty or blank query is refused too: it would select every run."""
    try:
        query = parse_query(text)
        return check_bulk_query(query) if bulk else query
    except QueryError as e:
        raise BadQuery(f"bad --where: {e}") from None


def add_bulk(parser: argparse.ArgumentParser, action: str) -> None:
    """Give a single-run command its bulk form: ``--where``, ``--yes``, ``--dry-run``."""
    how = ACTIONS[action]
    extra = ""
    if how.per_call:
        extra = (
            f" {action.capitalize()} decides every pending call of the selected runs; with "
            f"tool:NAME terms, only the calls of that tool (-tool:NAME: all but that tool)."
        )
    parser.add_argument("--where", metavar="QUERY", default=None, help=WHERE_HELP + "." + extra)
    parser.add_argument(
        "--yes", action="store_true", help="with --where: do it without asking (no terminal needed)"
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="with --where: print what it would do to which runs, and write nothing",
    )


def single_or_bulk(
    action: str, single: Callable[[argparse.Namespace], int]
) -> Callable[[argparse.Namespace], int]:
    """The command's function: the single-run form given a RUN, the bulk one given --where
    (both, or neither, is a usage error)."""

    def command(args: argparse.Namespace) -> int:
        if args.where is None:
            if args.run is None:
                raise Usage(f"{action} needs a RUN or --where QUERY")
            if args.yes or args.dry_run:
                raise Usage("--yes and --dry-run go with --where QUERY")
            return single(args)
        if args.run is not None:
            raise Usage(f"give a RUN or --where QUERY, not both ({args.run!r} and --where)")
        if getattr(args, "marker", None) or getattr(args, "all", False):
            raise Usage(
                f"{action} --where decides the selected runs' pending calls: no MARKER or --all"
            )
        try:
            return run_bulk(args, ACTIONS[action])
        except BadQuery as e:
            print(f"agentrun {action}: {e}", file=sys.stderr)
            return 2

    command.__doc__ = single.__doc__
    return command


def run_bulk(
    args: argparse.Namespace,
    action: Action,
    *,
    stdin: TextIO | None = None,
    out: TextIO | None = None,
) -> int:
    """Select, show, ask, apply, report. ``stdin``/``out`` default to the process's."""
    stdin = sys.stdin if stdin is None else stdin
    out = sys.stdout if out is None else out
    query = query_of(args.where, bulk=True)
    reason = getattr(args, "reason", None)
    if action.needs_reason and not (reason or "").strip():
        raise Usage(f"{action.name} needs --reason: the journal keeps why, for whoever looks next")
    store = store_of(args)
    runs = select_runs(store, query)
    if not runs:
        raise Refused(f"no run in {describe(store)} matches {query.text!r}; nothing was written")
    targets = plan_action(action, runs, query)
    print(plan_text(action, targets, query), file=out, flush=True)
    if args.dry_run:
        print("dry run: nothing was written", file=out)
        return 0
    if not args.yes:
        ask(f"{action.verb} {len(targets)} run(s)? [y/N] ", stdin, out)
        # The human took a while: the runs as they are now (a retry's status, which calls
        # are pending), each one of those shown; a run that no longer matches is refused.
        targets = replan(store, action, targets, query)

    def each(d: Done) -> None:
        word = "applied" if d.applied else "refused"
        print(f"{word}  {clean(d.message)}", file=out)

    done = apply_action(
        store, action, targets, by=getattr(args, "by", None), reason=reason, each=each
    )
    refused = [d for d in done if not d.applied]
    print(f"{len(done) - len(refused)} applied, {len(refused)} refused", file=out)
    return 1 if refused else 0


def plan_text(action: Action, targets: list[Target], query: Query) -> str:
    """``will cancel 3 runs matching 'status:failed':`` and the runs, one a line (the
    first SHOWN of them; the rest counted)."""
    calls = sum(len(t.signals) for t in targets) if action.per_call else 0
    what = f" ({calls} pending call(s))" if action.per_call else ""
    lines = [f"will {action.verb} {len(targets)} run(s){what} matching {query.text!r}:"]
    for t in targets[:SHOWN]:
        line = f"  {t.run_id}  ({t.status})"
        if t.calls:
            line += f"  {', '.join(t.calls)}"
        if t.note:
            line += f"  [will be refused: {t.note}]"
        lines.append(clean(line))
    if len(targets) > SHOWN:
        lines.append(f"  … and {len(targets) - SHOWN} more")
    return "\n".join(lines)


def ask(question: str, stdin: TextIO, out: TextIO) -> None:
    """Go on only on ``y``/``yes`` typed at a terminal; Refused (nothing written) otherwise.
    Without a terminal there is nobody to ask: --yes says it."""
    if not stdin.isatty():
        raise Refused("not a terminal, so nobody to ask: add --yes to do it (nothing was written)")
    print(question, end="", file=out, flush=True)
    answer = stdin.readline()
    if answer.strip().lower() not in ("y", "yes"):
        raise Refused("not confirmed; nothing was written")

"""Many runs at once: the runs a query selects, and one action applied to each on its own.

``select_runs`` evaluates a query on the store's summaries (no journal is read; the lease
holders only when an ``owner:`` term needs them). ``plan_action`` says what an action will do
to each selected run (which signals, or a retry), and ``apply_action`` does it run by run:
every signal goes through :func:`durableagent.signals.signal`, so each is validated under its
journal's lock as a single command's would be, and one run's refusal stops nothing else. A
run refused is reported with the reason; nothing is written for it.

Which call an approve or deny by query decides: every pending call of each selected run whose
tool passes the query's ``tool:`` terms (all of a run's pending calls when there is none).
``retry`` is ``agentrun retry`` for each run: a ``retry`` signal (who and why, for the audit)
and the failed run's worker attempts counted afresh. Every action is the one function of
durableagent.actions that its single-run command and the TUI call too.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from . import actions
from .errors import DurableAgentError
from .fold import RunStatus, Summary
from .query import Query, QueryError
from .stores import Store


@dataclass(frozen=True)
class Action:
    """One bulk action: the signal it writes, what it does in words, and whether a human
    must say why."""

    name: str
    signal: str
    verb: str  # "cancel", "approve", ... as the plan says it ("will cancel 3 runs")
    past: str  # "cancelled", ... as the report says it
    needs_reason: bool = False
    per_call: bool = False  # approve and deny: one signal per pending call


ACTIONS: dict[str, Action] = {
    a.name: a
    for a in (
        Action("cancel", "cancel", "cancel", "cancelled", needs_reason=True),
        Action("pause", "pause", "pause", "paused", needs_reason=True),
        Action("resume", "resume", "resume", "resumed"),
        Action("retry", "retry", "retry", "will be retried"),
        Action("approve", "approve", "approve", "approved", per_call=True),
        Action("deny", "deny", "deny", "denied", per_call=True),
    )
}


@dataclass(frozen=True)
class Target:
    """What an action will do to one run: the signals it writes, in order, and ``calls``,
    the pending calls' tool names an approve or deny decides."""

    run_id: str
    status: RunStatus
    signals: tuple[tuple[str, dict[str, Any]], ...] = ()
    calls: tuple[str, ...] = ()
    note: str = ""  # why it will be refused, when that is known before trying


@dataclass(frozen=True)
class Done:
    """How one run's action went: ``applied``, or refused with ``message`` saying why (for an
    approve or deny, ``written`` of the run's signals were written before the refusal)."""

    run_id: str
    applied: bool
    message: str
    written: int = 0


EVERY_RUN = "run:*"
EMPTY_QUERY = (
    f"an empty query would select every run: name the runs to act on, or write {EVERY_RUN} "
    f"to mean all of them"
)


def check_bulk_query(query: Query) -> Query:
    """``query`` when it has a term; QueryError when it is empty or blank (an unset shell
    variable must not act on a whole store: selecting everything is written ``run:*``)."""
    if not query.terms:
        raise QueryError(EMPTY_QUERY)
    return query


def select_runs(store: Store, query: Query, now: float | None = None) -> list[Summary]:
    """The runs of ``store`` that ``query`` selects, from its summaries, in listing order.
    An empty query is refused (QueryError): a bulk action never selects by omission."""
    check_bulk_query(query)
    summaries = store.summaries()
    owners = lease_owners(store, summaries) if query.uses_owner else {}
    return query.select(summaries, time.time() if now is None else now, owners)


def lease_owners(store: Store, summaries: Iterable[Summary]) -> dict[str, str]:
    """Who holds each leased run's lease (its owner name), for a query's ``owner:`` terms:
    one look per running run, never per run of the store."""
    owners = {}
    for s in summaries:
        if s.leased:
            holder = store.lease_holder(s.run_id) or {}
            owners[s.run_id] = str(holder.get("owner") or "")
    return owners


def plan_action(
    action: Action, runs: Iterable[Summary], query: Query | None = None
) -> list[Target]:
    """What ``action`` will do to each run (approve/deny: the pending calls the query's
    ``tool:`` terms allow; a run with none is a target with a note, refused when applied)."""
    targets = []
    for s in runs:
        if not action.per_call:
            targets.append(Target(s.run_id, s.status, ((action.signal, {}),)))
            continue
        calls = [p for p in s.pending if query is None or query.wants_tool(p.tool)]
        note = "" if calls else _nothing_pending(s, action)
        targets.append(
            Target(
                s.run_id,
                s.status,
                tuple((action.name, {"marker": p.marker}) for p in calls),
                tuple(p.tool for p in calls),
                note,
            )
        )
    return targets


def _nothing_pending(s: Summary, action: Action) -> str:
    if s.pending:
        tools = ", ".join(sorted({p.tool for p in s.pending}))
        return f"run {s.run_id} has no pending call of the query's tools (it waits on {tools})"
    return f"run {s.run_id} has no pending call to {action.verb} (it is {s.status})"


def apply_action(
    store: Store,
    action: Action,
    targets: Iterable[Target],
    *,
    by: str | None = None,
    reason: str | None = None,
    each: Callable[[Done], None] | None = None,
) -> list[Done]:
    """Apply ``action`` to every target, each on its own: a refusal (a SignalError, a run that
    is no longer failed for a retry) is reported for that run and the rest go on. ``each`` is
    called with every run's result as it comes (a command prints them as they happen)."""
    done = []
    for t in targets:
        result = _apply_one(store, action, t, by, reason)
        done.append(result)
        if each is not None:
            each(result)
    return done


def _apply_one(store: Store, action: Action, t: Target, by: str | None, reason: str | None) -> Done:
    if t.note:
        return Done(t.run_id, False, t.note)
    written = 0
    try:
        if action.name == "retry":
            # Failed in the listing the plan was made from (taken just before: see replan);
            # a summary read again here would fold its journal, 10,000 times over.
            actions.retry(store, t.run_id, by=by, reason=reason, status=t.status)
            return Done(
                t.run_id, True, f"{t.run_id} will be retried by the next worker that looks", 1
            )
        for name, payload in t.signals:
            actions.act(store, t.run_id, name, payload, by=by, reason=reason)
            written += 1
    except DurableAgentError as e:
        return Done(t.run_id, False, str(e), written)
    what = f" ({', '.join(t.calls)})" if t.calls else ""
    return Done(t.run_id, True, f"{action.past} {t.run_id}{what}", written)


def replan(store: Store, action: Action, targets: list[Target], query: Query) -> list[Target]:
    """The same runs planned again from a fresh listing (a human took a while to say yes):
    a run that no longer matches the query is refused, saying so, and an approve or deny
    decides only calls that were shown and are still pending (never one that came since)."""
    fresh = {s.run_id: s for s in select_runs(store, query)}
    planned = {t.run_id: t for t in plan_action(action, fresh.values(), query)}
    out = []
    for old in targets:
        new = planned.get(old.run_id)
        if new is None:
            why = f"run {old.run_id} no longer matches {query.text!r}"
            out.append(Target(old.run_id, old.status, note=why))
            continue
        if action.per_call and not new.note:
            shown = {payload["marker"] for _, payload in old.signals}
            pairs = zip(new.signals, new.calls, strict=True)
            kept = [(sig, tool) for sig, tool in pairs if sig[1]["marker"] in shown]
            if not kept:
                why = f"run {old.run_id}'s calls shown were decided meanwhile"
                out.append(Target(old.run_id, new.status, note=why))
                continue
            new = Target(
                new.run_id, new.status, tuple(s for s, _ in kept), tuple(t for _, t in kept)
            )
        out.append(new)
    return out


__all__ = [
    "ACTIONS",
    "EVERY_RUN",
    "Action",
    "Done",
    "Target",
    "apply_action",
    "check_bulk_query",
    "lease_owners",
    "plan_action",
    "replan",
    "select_runs",
]

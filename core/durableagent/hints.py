"""The commands the product suggests to a human (in notices, ``show``, ``plan`` and its
refusals), each built here and nowhere else, so that every one can be run as pasted
(tests/test_hints.py does).

A hint is real text except its placeholders: the words in :data:`PLACEHOLDERS`, in capitals,
which a human fills in (a new run's id, a step, what a write produced, why). Everything else
(the run, its markers and steps, the store, the flags each command requires, a limit's
amount) is real: pasted as it stands, with the placeholders filled, it works."""

from __future__ import annotations

import math
import shlex

# The words a human fills in, and what each stands for.
PLACEHOLDERS = {
    "NEW": "the new run's id",
    "STEP": "one of the run's steps (agentrun show lists them)",
    "MARKER": "a pending call's marker (agentrun show lists them)",
    "RESULT": "what the write produced (e.g. the ticket id)",
    "WHY": "why, in your words (recorded in the journal)",
    "MODULE:ATTR": "the agent a worker runs (e.g. durableagent.demo:demo_agent)",
}

# What ``budget --add`` raises a limit by when the run stopped at it (a deadline: by what
# it is overdue and an hour more, see raise_budget).
RAISE_BY = {"tokens": "100000", "model_calls": "10", "tool_calls": "10", "cost": "1.00"}


def _q(text: str) -> str:
    return shlex.quote(text)


def _where(store: str | None) -> str:
    return "" if store is None else f" --store {_q(store)}"


def approve(run: str, marker: str = "MARKER", store: str | None = None) -> str:
    """Approve one pending call."""
    return f"agentrun approve {_q(run)} {_q(marker)}{_where(store)}"


def deny(run: str, marker: str = "MARKER", store: str | None = None) -> str:
    """Deny one pending call, saying why (the model reads it)."""
    return f"agentrun deny {_q(run)} {_q(marker)} --reason WHY{_where(store)}"


def reconcile_done(run: str, step: str, store: str | None = None) -> str:
    """Settle an open write as done, with what it produced."""
    return f"agentrun reconcile {_q(run)} {_q(step)} --done RESULT{_where(store)}"


def reconcile_retry(run: str, step: str, store: str | None = None) -> str:
    """Settle an open write as not done: run it again."""
    return f"agentrun reconcile {_q(run)} {_q(step)} --retry{_where(store)}"


def retry(run: str, store: str | None = None) -> str:
    """Give a failed run a fresh count of worker attempts."""
    return f"agentrun retry {_q(run)}{_where(store)}"


def show(run: str, store: str | None = None) -> str:
    """The run's timeline and what it waits on."""
    return f"agentrun show {_q(run)}{_where(store)}"


def resume(run: str, store: str | None = None) -> str:
    """Lift a run's pause."""
    return f"agentrun resume {_q(run)}{_where(store)}"


def fork(run: str, at: str = "STEP", new: str = "NEW", store: str | None = None) -> str:
    """A new run that replays ``run`` up to ``at`` and runs afresh from there."""
    return f"agentrun fork {_q(run)} --at {_q(at)} --as {_q(new)} --reason WHY{_where(store)}"


def raise_budget(
    run: str, limit: str, store: str | None = None, *, overdue: float | None = None
) -> str:
    """Raise the ``limit`` the run stopped at (``budget --add`` raises only a limit the run
    has: naming another is refused). A deadline is raised by what it is ``overdue`` (s)
    and an hour more, in whole hours."""
    if limit == "deadline":
        hours = 1 + max(0, math.ceil((overdue or 0.0) / 3600))
        amount = f"{hours}h"
    else:
        amount = RAISE_BY[limit]
    return f"agentrun budget {_q(run)} --add {limit}={amount} --reason WHY{_where(store)}"


def accept_change(run: str, store: str | None = None) -> str:
    """Let an incompatible run go on with the new code (docs/deploys.md)."""
    return f"agentrun accept-change {_q(run)} --reason WHY{_where(store)}"


def cancel(run: str, store: str | None = None) -> str:
    """Cancel a run for good."""
    return f"agentrun cancel {_q(run)} --reason WHY{_where(store)}"


def worker(store: str | None = None) -> str:
    """Start a worker on the store."""
    return f"agentrun worker --agent MODULE:ATTR{_where(store)}"


def workers(store: str | None = None) -> str:
    """The workers registered in the store, live or gone."""
    return f"agentrun workers{_where(store)}"


# Every builder above, by name: what the hints test makes sure it has run.
BUILDERS = (
    approve,
    deny,
    reconcile_done,
    reconcile_retry,
    retry,
    show,
    resume,
    fork,
    raise_budget,
    accept_change,
    cancel,
    worker,
    workers,
)

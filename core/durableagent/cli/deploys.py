"""The deploy commands (issue 25, docs/deploys.md): ``deploy-check``, a read-only dry run of a
new agent against every unfinished run, and ``accept-change``, a human's way out of an
``incompatible`` run."""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

from .. import actions
from ..deploys import CHANGED, CLEAN, INCOMPATIBLE, Code, check_store
from ..gate import PolicyGate
from ..view import view_store
from .common import Parents, clean, dump, one_line, require_run, store_of, versioned


def cmd_deploy_check(args: argparse.Namespace) -> int:
    """Say what the agent would do with every unfinished run; exit 1 if any is incompatible."""
    from .serve import load_agent

    store = store_of(args)
    code, gate = _code_of(load_agent(args.agent, Path(str(getattr(store, "root", ".")))))
    started = time.monotonic()
    checks = check_store(store, code, gate)
    took = time.monotonic() - started
    counts = Counter(c.verdict.kind for c in checks)
    if args.json:
        print(
            dump(
                versioned(
                    {
                        "version": code.version,
                        "fingerprint": code.fingerprint,
                        "runs": [c.to_dict() for c in checks],
                        "counts": {k: counts.get(k, 0) for k in (CLEAN, CHANGED, INCOMPATIBLE)},
                    }
                )
            )
        )
    else:
        width = max((len(c.run_id) for c in checks), default=0)
        for c in checks:
            print(f"{c.run_id:<{width}}  {c.status:<17}  {clean(one_line(c.then, 160))}")
        print(
            f"{len(checks)} unfinished run(s) against version {code.version}: "
            f"{counts.get(CLEAN, 0)} resume cleanly, {counts.get(CHANGED, 0)} changed, "
            f"{counts.get(INCOMPATIBLE, 0)} incompatible ({took:.2f}s)"
        )
    return 1 if counts.get(INCOMPATIBLE) else 0


def _code_of(loaded: Any) -> tuple[Code, PolicyGate]:
    """The code and gate of what ``--agent`` names: an Agent, or what gives one (an async
    context manager, or a function making one: entered once to read its tools, then left)."""
    from ..worker import Agent

    if isinstance(loaded, Agent):
        return loaded.code, loaded.gate

    async def enter() -> tuple[Code, PolicyGate]:
        context = loaded() if callable(loaded) and not hasattr(loaded, "__aenter__") else loaded
        async with context as agent:
            return agent.code, agent.gate

    return asyncio.run(enter())


def cmd_accept_change(args: argparse.Namespace) -> int:
    """Accept a deploy's change for an incompatible run."""
    store = store_of(args)
    require_run(store, args.run)
    record = actions.accept_change(store, args.run, by=args.by, reason=args.reason)
    calls = record.data["payload"]["calls"]
    print(f"accepted the change of version {record.data['payload']['version']} for {args.run}:")
    for c in calls:
        print(f"  {clean(c.get('step'))}: {clean(c.get('reason'))} — answered, never run")
    print("a worker resumes it: the model asks again with the arguments the tool takes now")
    if view_store(store, args.run).pending:
        print("(a gated call waits for a new approval)")
    return 0


def register(sub: Any, parents: Parents) -> None:
    """Add deploy-check and accept-change to the subcommands."""
    s = sub.add_parser(
        "deploy-check",
        parents=[parents.store, parents.json],
        help="before a deploy: what a new agent would do with every unfinished run",
        description=(
            "A dry run of the agent MODULE:ATTR against every unfinished run of the store: "
            "reads only, runs no model and no tool. One line per run (resumes cleanly, "
            "changed: replays steps whose tool or prompt changed, or incompatible: a pending, "
            "approved or open call whose tool is gone or whose arguments the new schema "
            "rejects) and a count. Exits 1 when any run would be incompatible, so CI can gate "
            "a deploy on it (docs/deploys.md)."
        ),
    )
    s.add_argument("--agent", required=True, metavar="MODULE:ATTR", help="the new Agent")
    s.set_defaults(fn=cmd_deploy_check)

    s = sub.add_parser(
        "accept-change",
        parents=[parents.store, parents.by],
        help="let an incompatible run go on with the new code (--reason required)",
        description=(
            "Accept a deploy's change for an incompatible run: each call its last attempt "
            "could not take over is answered with an error naming the change (never run with "
            "the arguments a human saw), and the model asks again under the new code; a gated "
            "tool's new call waits for a new approval. Other ways out: agentrun fork, "
            "agentrun cancel."
        ),
    )
    s.add_argument("run", metavar="RUN")
    s.set_defaults(fn=cmd_accept_change)

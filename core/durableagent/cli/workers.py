"""``agentrun workers``: who is working on the store (SPEC §11), from the workers' registry
(no journal is read)."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from ..durations import format_duration
from ..roster import WorkerInfo
from .common import Parents, clean, describe, dump, one_line, store_of, versioned, with_iso


def worker_row(w: WorkerInfo, now: float) -> dict[str, Any]:
    """A worker as ``workers --json`` prints it."""
    return with_iso(
        {**w.to_dict(), "state": w.state(now), "up": w.up(now)},
        "started_at",
        "beat_at",
    )


def cmd_workers(args: argparse.Namespace) -> int:
    """List the workers registered in the store: live ones first, then those gone."""
    store = store_of(args)
    now = time.time()
    found = store.workers()
    readable = [w for w in found if w.problem is None]
    for w in found:
        if w.problem is not None:
            print(f"agentrun workers: {clean(w.problem)}", file=sys.stderr)
    readable.sort(key=lambda w: (not w.live(now), w.owner))
    if args.json:
        print(dump(versioned({"workers": [worker_row(w, now) for w in readable]})))
        return 0
    if not readable:
        print(f"no worker has registered in {describe(store)} (start one: agentrun worker)")
        return 0
    rows = [("OWNER", "HOST:PID", "AGENT", "VERSION", "UP", "LAST BEAT", "RUNS", "STATE")]
    for w in readable:
        held = ",".join(w.runs) if w.runs else "-"
        rows.append(
            (
                one_line(w.owner, 32),
                one_line(f"{w.host}:{w.pid}", 32),
                one_line(w.agent or "-", 28),
                one_line((w.code or "-") + (" pinned" if w.pinned else ""), 20),
                format_duration(w.up(now)),
                f"{format_duration(now - w.beat_at)} ago",
                one_line(f"{len(w.runs)} {held}" if w.runs else "0", 40),
                w.state(now),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(widths[i]) for i, c in enumerate(r)).rstrip())
    for w in readable:
        if w.waiting and w.live(now):
            waits: dict[str, list[str]] = {}
            for run_id, version in w.waiting:
                waits.setdefault(version, []).append(run_id)
            for version, runs in sorted(waits.items()):
                shown = one_line(", ".join(runs), 60)
                print(f"{one_line(w.owner, 32)} leaves to version {version}: {shown}")
    live = sum(1 for w in readable if w.live(now))
    print(f"{live} live, {len(readable) - live} gone")
    return 0


def register(sub: Any, parents: Parents) -> None:
    """Add workers to the subcommands."""
    s = sub.add_parser(
        "workers",
        parents=[parents.store, parents.json],
        help="the workers registered in the store, live and gone",
        description=(
            "List the workers of the store: owner, host:pid, agent, version, how long it has "
            "been up, its last heartbeat, the runs it holds, and live (a beat within three "
            "heartbeats) or gone. A worker removes itself when it stops cleanly; one killed is "
            "listed as gone for a day, then the next worker to start forgets it."
        ),
    )
    s.set_defaults(fn=cmd_workers)

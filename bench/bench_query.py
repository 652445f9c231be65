"""The TUI's ``/`` filter in the query language at 100,000 runs (issue 16's figure: ≤ 100 ms a
keystroke): ``python bench/bench_query.py [--runs 100000]``.

Each keystroke of a query is typed into the runs model the TUI's table draws from
(``RunRows.set_filter``: what runs on the event loop per key; the table then paints only the
rows on screen), over 100,000 summaries in a helpdesk's mix. A keystroke that leaves a term
unparsed (``status:`` before its value) costs only the parse: the last good filter stays.

Baseline, measured in the same run on the same summaries: the unfiltered listing (every
run's row in table order, what the screen holds with no filter), and the filter as it was
before the query language (a bare word inside the run id or status, over every run).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

from durableagent import Pending, RunStatus, Summary
from durableagent.query import QueryError, parse_query
from durableagent_tui.runs_model import RunRows

NOW = 1_800_000_000.0
QUERIES = (
    "status:failed age>1h",
    "needs:human -status:failed",
    "tool:create_ticket run:billing-*",
    "-status:completed age<30m",
)
MIX = (
    (RunStatus.COMPLETED, 90),
    (RunStatus.AWAITING_APPROVAL, 4),
    (RunStatus.INDETERMINATE, 1),
    (RunStatus.FAILED, 1),
    (RunStatus.READY, 4),
)
KINDS = [status for status, n in MIX for _ in range(n)]
TEAMS = ("billing", "access", "laptop", "vpn", "mail")


def summaries(n: int) -> list[Summary]:
    """``n`` runs over the last two days, statuses mixed through the ids."""
    out = []
    for i in range(n):
        status = KINDS[(i * 37) % len(KINDS)]
        rid = f"{TEAMS[i % len(TEAMS)]}-{i:06d}"
        at = NOW - (i * 2 * 86_400 / n)
        pending: tuple[Pending, ...] = ()
        indeterminate = None
        if status == RunStatus.AWAITING_APPROVAL:
            step = "tool/2/0/create_ticket"
            pending = (Pending(f"{step}#{i:012x}", step, "create_ticket", {}),)
        elif status == RunStatus.INDETERMINATE:
            indeterminate = "tool/2/1/send_email"
        out.append(
            Summary(
                rid,
                status,
                steps=5,
                model_calls=2,
                started_at=at - 60,
                last_activity=at,
                pending=pending,
                indeterminate=indeterminate,
            )
        )
    return out


def timed(fn: object) -> float:
    t = time.perf_counter()
    fn()  # type: ignore[operator]
    return time.perf_counter() - t


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=100_000)
    args = parser.parse_args()
    runs = summaries(args.runs)
    rows = RunRows(lambda: NOW)
    rows.update(runs)
    print(f"{args.runs:,} runs in the model")

    listing = statistics.median(
        timed(lambda: [rows.summaries[rid] for rid in rows.order]) for _ in range(5)
    )

    def bare() -> None:
        rows.set_filter("")
        rows.set_filter("await")

    substring = statistics.median(timed(bare) for _ in range(5))
    rows.set_filter("")
    print(
        f"baseline: the unfiltered listing {1000 * listing:.1f} ms; "
        f"the old filter (a bare word, every run) {1000 * substring:.1f} ms"
    )
    worst_all = 0.0
    for text in QUERIES:
        rows.set_filter("")
        keys = []
        for i in range(1, len(text) + 1):
            typed = text[:i]

            def key(typed: str = typed) -> None:
                with contextlib.suppress(QueryError):  # said under the box; the last good
                    rows.set_filter(typed)  # filter stays

            keys.append(timed(key))
        worst = max(keys)
        worst_all = max(worst_all, worst)
        matches = len(parse_query(text).select(runs, NOW))
        assert len(rows.shown) == matches, (text, len(rows.shown), matches)
        print(
            f"/{text:<36} {matches:>6,} matches   per key: median "
            f"{1000 * statistics.median(keys):5.1f} ms"
            f"  worst {1000 * worst:5.1f} ms   worst/listing {worst / listing:4.1f}x"
            f"  worst/old filter {worst / substring:4.1f}x"
        )
    verdict = "ok" if worst_all <= 0.1 else "MISSED"
    print(f"worst keystroke {1000 * worst_all:.1f} ms   [target ≤ 100 ms: {verdict}]")


if __name__ == "__main__":
    main()

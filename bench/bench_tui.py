"""Figures for ``agentrun tui`` at 1,000, 10,000 and 100,000 runs (the on-call issue's table):
``python bench/bench_tui.py [--runs 1000 10000 100000] [--idle 20]``.

Per store size, in a fresh process each (so that RSS is that size's own):

- first full table: from the app's start to a table holding every run (the store's summary
  index present, as a store written by workers has it); and cold, when the index must first
  be built from every journal;
- RSS of the process once the table is up;
- idle CPU with the change feed on, and what the periodic safety-net rescan costs;
- a change elsewhere: another process approves a run that is not selected; from its append to
  the row on screen, beside the raw watchfiles notice of the same append (same debounce);
- filter keystrokes: each key of ``/await`` and of ``run-0099`` typed into the filter box,
  from the key to the table showing the matches.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from durableagent import Message, Outcome, Pending, Record, Result, Status, ToolCall, marker_for
from durableagent.record import encode_line
from durableagent.stores.file import logs as file_logs

SIZES = (1_000, 10_000, 100_000)
APPENDS = 20
OWNER = "bench-worker:1"

# Per 100 runs: what a busy helpdesk store looks like.
MIX = (
    ("completed", 90),
    ("awaiting", 4),
    ("indeterminate", 1),
    ("failed", 1),
    ("ready", 4),
)
KINDS = [kind for kind, n in MIX for _ in range(n)]


def run_id(i: int) -> str:
    return f"run-{i:05d}"


def _journal(kind: str, i: int, at: float) -> tuple[list[Record], Outcome | None]:
    """The records of run ``i`` of this kind, and its last attempt's outcome."""
    text = f"Request {i}: I need access to the billing dashboard for the Q{i % 4 + 1} close."
    lookup = ToolCall("c1", "lookup_policy", {"topic": "billing"})
    ticket = ToolCall("c2", "create_ticket", {"summary": text[:60], "requester": f"u{i}"})
    recs = [Record(0, "run.started", "", "", {"input": [Message("user", text).to_dict()]}, at)]
    if kind == "ready":
        return recs, None
    asks = Message("assistant", tool_calls=(lookup,)).to_dict()
    policy = Result("Billing access needs a ticket approved by the finance lead.").to_dict()
    recs += [
        Record(0, "step.started", "llm/1", "model", {}, at + 1),
        Record(0, "step.completed", "llm/1", "model", asks, at + 2),
        Record(0, "step.started", "tool/1/0/lookup_policy", "tool", {"write": False}, at + 3),
        Record(0, "step.completed", "tool/1/0/lookup_policy", "tool", policy, at + 4),
        Record(0, "step.started", "llm/2", "model", {}, at + 5),
    ]
    if kind == "failed":
        error = "ServerError: model call failed: 503 Service Unavailable"
        return recs, Outcome(Status.FAILED, error=error, seq=len(recs))
    file_it = Message("assistant", "Filing a ticket.", tool_calls=(ticket,)).to_dict()
    recs.append(Record(0, "step.completed", "llm/2", "model", file_it, at + 6))
    step = "tool/2/0/create_ticket"
    if kind == "awaiting":
        pending = Pending(marker_for(step, ticket.arguments), step, ticket.name, ticket.arguments)
        return recs, Outcome(Status.AWAITING_APPROVAL, pending=(pending,), seq=len(recs))
    recs.append(Record(0, "step.started", step, "tool", {"write": True}, at + 7))
    if kind == "indeterminate":
        return recs, Outcome(Status.INDETERMINATE, step=step, seq=len(recs))
    answer = Message("assistant", f"Filed TICKET-{i} for you; the finance lead approves it.")
    recs += [
        Record(0, "step.completed", step, "tool", Result(f"TICKET-{i}").to_dict(), at + 8),
        Record(0, "step.started", "llm/3", "model", {}, at + 9),
        Record(0, "step.completed", "llm/3", "model", answer.to_dict(), at + 10),
        Record(0, "run.completed", "", "", {"message": answer.to_dict()}, at + 11),
    ]
    return recs, Outcome(Status.COMPLETED, message=answer, seq=len(recs))


def build(root: Path, runs: int) -> None:
    """Write ``runs`` journals and attempt logs directly (no store calls: fast), runs spread
    over the last two days, in the mix above."""
    root.mkdir(parents=True)
    attempts = root / ".attempts"
    attempts.mkdir()
    t0 = time.time() - 2 * 86_400
    spacing = 2 * 86_400 / runs
    for i in range(runs):
        kind = KINDS[(i * 37) % len(KINDS)]  # mixed through the ids, not in blocks
        at = t0 + i * spacing
        recs, outcome = _journal(kind, i, at)
        data = b"".join(encode_line(r, n) for n, r in enumerate(recs, 1))
        rid = run_id(i)
        (root / f"{rid}.jsonl").write_bytes(data)
        if outcome is not None:
            log = file_logs.begin_line(1, OWNER, at, 1) + file_logs.end_line(
                1, recs[-1].at, str(outcome.status), outcome
            )
            (attempts / f"{rid}.jsonl").write_bytes(log)


# -- one size, in its own process ---------------------------------------------------------------

SIGNAL = r"""
import sys, time
from durableagent import FileStore, signal
store = FileStore(sys.argv[1])
for line in sys.stdin:
    rid = line.strip()
    marker = store.summary(rid).pending[0].marker
    signal(store, rid, "approve", {"marker": marker}, by="bench")
    print(time.monotonic(), flush=True)
"""


def rss_now_mb() -> float:
    """The process's resident set now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def measure(root: Path, runs: int, idle: float, cold: bool) -> dict[str, Any]:
    """Open the app on ``root`` headless and take its figures."""
    from watchfiles import awatch

    from durableagent import RunStatus
    from durableagent_tui.app import SupervisorApp

    figures: dict[str, Any] = {"runs": runs}
    started = time.monotonic()
    app = SupervisorApp(root, label="bench", cursor_blink=False)
    scans: list[tuple[float, float]] = []  # (wall, cpu) of each full rescan
    real_scan = app.tracker.scan

    def timed_scan() -> Any:
        w, c = time.monotonic(), time.thread_time()
        try:
            return real_scan()
        finally:
            scans.append((time.monotonic() - w, time.thread_time() - c))

    app.tracker.scan = timed_scan  # type: ignore[method-assign]
    async with app.run_test(size=(120, 36)) as pilot:
        header_seen = ""
        while not (app.loaded and app.table.row_count == runs):
            loading = app.header.loading_since
            if not header_seen and loading is not None and loading[0] is not None:
                header_seen = f"loading {loading[0]:,} runs…"  # what the header says
            await asyncio.sleep(0.005)
        await pilot.pause()
        figures["first_full_table_s"] = time.monotonic() - started
        figures["header_while_loading"] = header_seen or "(loaded before it drew a frame)"
        figures["rss_mb"] = rss_now_mb()
        figures["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        if cold:
            return figures
        # The change feed names every run once it is up: a rescan. Let it pass.
        while len(scans) < 2:
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)

        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(idle)
        figures["idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / (time.monotonic() - wall0)
        figures["rescan_cpu_s"] = scans[-1][1]
        figures["rescan_every_s"] = app.rescan_s
        figures["rescan_share_pct"] = 100 * scans[-1][1] / app.rescan_s
        figures["rss_idle_mb"] = rss_now_mb()

        # A change elsewhere: another process approves a run that is not selected.
        targets = [
            rid
            for rid in app.rows.order
            if app.summaries[rid].status == RunStatus.AWAITING_APPROVAL
        ][1 : APPENDS + 1]
        raw_seen: dict[str, float] = {}
        stop = asyncio.Event()
        want = {str((root / f"{rid}.jsonl").resolve()): rid for rid in targets}

        async def raw() -> None:
            async for batch in awatch(
                root.resolve(), debounce=50, step=10, stop_event=stop, recursive=False
            ):
                now = time.monotonic()
                for _, path in batch:
                    if path in want and want[path] not in raw_seen:
                        raw_seen[want[path]] = now

        raw_task = asyncio.create_task(raw())
        await asyncio.sleep(0.5)
        child = subprocess.Popen(
            [sys.executable, "-c", SIGNAL, str(root)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        app_lat: list[float] = []
        raw_lat: list[float] = []
        for rid in targets:
            child.stdin.write(rid + "\n")
            child.stdin.flush()
            appended = float(await asyncio.to_thread(child.stdout.readline))
            deadline = time.monotonic() + 10
            while app.summaries[rid].status != RunStatus.READY:
                assert time.monotonic() < deadline, f"{rid} never turned ready on screen"
                await asyncio.sleep(0.001)
            on_screen = time.monotonic()
            while rid not in raw_seen:
                assert time.monotonic() < deadline, f"no raw notice for {rid}"
                await asyncio.sleep(0.001)
            app_lat.append(on_screen - appended)
            raw_lat.append(raw_seen[rid] - appended)
            await asyncio.sleep(0.2)  # spaced: no batching across changes
        child.stdin.close()
        child.wait()
        stop.set()
        await raw_task
        added = [a - r for a, r in zip(app_lat, raw_lat, strict=True)]
        figures["change_on_screen_median_ms"] = 1000 * statistics.median(app_lat)
        figures["change_on_screen_p90_ms"] = 1000 * pct(app_lat, 0.9)
        figures["raw_notice_median_ms"] = 1000 * statistics.median(raw_lat)
        figures["after_raw_notice_median_ms"] = 1000 * statistics.median(added)
        figures["after_raw_notice_p90_ms"] = 1000 * pct(added, 0.9)

        # Filter keystrokes: from the key to the table drawing the matches (hooks on the
        # filter and the table's paint; what the Pilot does after that is not counted).
        filtered: list[float] = []
        painted: list[float] = []
        real_filter, real_paint = app.set_filter, app.table.render_lines

        def set_filter(text: str) -> None:
            real_filter(text)
            filtered.append(time.monotonic())

        def render_lines(crop: Any) -> Any:
            out = real_paint(crop)
            painted.append(time.monotonic())
            return out

        app.set_filter = set_filter  # type: ignore[method-assign]
        app.table.render_lines = render_lines  # type: ignore[method-assign]
        app.table.focus()
        for text in ("await", "run-0099"):
            await pilot.press("slash")
            keys: list[float] = []
            for i, key in enumerate(text):
                t = time.monotonic()
                await pilot.press(key)
                while not (app.rows.filter == text[: i + 1] and filtered and painted):
                    await asyncio.sleep(0.0005)
                while painted[-1] < filtered[-1]:
                    await asyncio.sleep(0.0005)
                done = next(p for p in painted if p >= filtered[-1])
                keys.append(done - t)
            figures[f"filter_{text}_worst_key_ms"] = 1000 * max(keys)
            figures[f"filter_{text}_keys_ms"] = [round(1000 * k) for k in keys]
            figures[f"filter_{text}_matches"] = app.table.row_count
            await pilot.press("enter", "escape")  # back to the table, clear the filter
            while app.rows.filter:
                await asyncio.sleep(0.001)
        figures["rss_end_mb"] = rss_now_mb()
    return figures


def one(root: Path, runs: int, idle: float, cold: bool) -> None:
    print(json.dumps(asyncio.run(measure(root, runs, idle, cold))))


def run_child(root: Path, runs: int, idle: float, cold: bool) -> dict[str, Any]:
    args = [sys.executable, __file__, "--one", str(root), "--runs", str(runs)]
    args += ["--idle", str(idle)] + (["--cold"] if cold else [])
    p = subprocess.run(args, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        raise SystemExit(f"bench child failed ({runs} runs):\n{p.stderr[-3000:]}")
    return dict(json.loads(p.stdout.strip().splitlines()[-1]))


ROWS = (
    ("first full table (index present)", "first_full_table_s", "{:.2f} s"),
    ("first full table (cold: index built)", "cold_first_full_table_s", "{:.2f} s"),
    ("header while loading", "header_while_loading", "{}"),
    ("RSS with the table up", "rss_mb", "{:.0f} MB"),
    ("RSS idle / at the end", "rss_idle_end", "{}"),
    ("idle CPU (measured)", "idle_cpu_pct", "{:.2f} %"),
    ("safety-net rescan", "rescan", "{}"),
    ("change elsewhere → on screen (median)", "change_on_screen_median_ms", "{:.0f} ms"),
    ("raw watch notice (median)", "raw_notice_median_ms", "{:.0f} ms"),
    ("after the raw notice: median / p90", "after_raw", "{}"),
    ("filter /await: worst key", "filter_await_worst_key_ms", "{:.0f} ms"),
    ("filter run-0099: worst key", "filter_run-0099_worst_key_ms", "{:.0f} ms"),
)


def table(results: list[dict[str, Any]]) -> str:
    for r in results:
        r["rss_idle_end"] = f"{r['rss_idle_mb']:.0f} / {r['rss_end_mb']:.0f} MB"
        r["rescan"] = (
            f"{r['rescan_cpu_s']:.2f} s CPU every {r['rescan_every_s']:.0f} s "
            f"({r['rescan_share_pct']:.2f} %)"
        )
        r["after_raw"] = (
            f"{r['after_raw_notice_median_ms']:.0f} / {r['after_raw_notice_p90_ms']:.0f} ms"
        )
    head = "| store | " + " | ".join(f"{r['runs']:,} runs" for r in results) + " |"
    lines = [head, "|---|" + "---|" * len(results)]
    for label, key, fmt in ROWS:
        cells = [fmt.format(r[key]) if key in r else "—" for r in results]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--idle", type=float, default=20.0, help="seconds of idle CPU to take")
    parser.add_argument("--dir", help="build the stores here and keep them (default: a temp dir)")
    parser.add_argument("--build", metavar="DIR", help="only build a store of --runs[0] runs")
    parser.add_argument("--one", metavar="DIR", help=argparse.SUPPRESS)
    parser.add_argument("--cold", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        one(Path(args.one), args.runs[0], args.idle, args.cold)
        return 0
    if args.build:
        t = time.monotonic()
        build(Path(args.build), args.runs[0])
        print(f"built {args.runs[0]} runs in {time.monotonic() - t:.1f}s", file=sys.stderr)
        return 0
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-tui-"))
    results = []
    try:
        for runs in args.runs:
            root = base / f"runs-{runs}"
            if root.exists():
                shutil.rmtree(root)
            t = time.monotonic()
            build(root, runs)
            print(f"built {runs:,} runs in {time.monotonic() - t:.1f}s", file=sys.stderr)
            cold = run_child(root, runs, args.idle, cold=True)  # builds the summary index
            figures = run_child(root, runs, args.idle, cold=False)
            figures["cold_first_full_table_s"] = cold["first_full_table_s"]
            results.append(figures)
            print(json.dumps(figures), file=sys.stderr)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)
    print(table(results))
    print(f"(cores: {os.cpu_count()}; load average {os.getloadavg()[0]:.1f})")
    worst = results[-1]
    ok = (
        worst["first_full_table_s"] <= 3
        and worst["rss_mb"] <= 300
        and worst["idle_cpu_pct"] <= 1
        and worst["after_raw_notice_p90_ms"] <= 100
        and worst["filter_await_worst_key_ms"] <= 100
        and worst["filter_run-0099_worst_key_ms"] <= 100
    )
    print("within the issue's goals" if ok else "OUTSIDE the issue's goals")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Figures for ``agentrun tui`` over a store of 10,000 runs: ``python bench/bench_tui.py``.

- time to the first full table, and the memory it takes;
- append (by another process) to row and timeline showing it: median and p90 of 50, beside
  the raw watchfiles notification latency measured in the same run with the same debounce;
- idle CPU with the watcher on.
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from watchfiles import awatch

from durableagent import Message, Outcome, Pending, Record, Status, ToolCall, marker_for
from durableagent.record import encode_line
from durableagent_tui import app as tui_app
from durableagent_tui.app import SupervisorApp

RUNS = 10_000
APPENDS = 50
IDLE_S = 20.0
TARGET = "bench-ready-00000"

CHILD = r"""
import sys, time
from durableagent import FileStore, Record
store = FileStore(sys.argv[1])
for k, line in enumerate(sys.stdin, start=100):
    store.append(sys.argv[2], Record.make("step.started", f"llm/{k}", "model"))
    print(time.monotonic(), flush=True)
"""


def build(root: Path) -> None:
    """Write 10,000 journals directly (8,000 completed, 1,500 awaiting, 500 ready)."""
    root.mkdir()
    (root / ".outcomes").mkdir()
    t0 = time.time() - 86_400
    call = ToolCall("c1", "create_ticket", {"summary": "bench"})
    ask = Message("assistant", tool_calls=(call,)).to_dict()
    answer = Message("assistant", "done").to_dict()
    step = "tool/1/0/create_ticket"
    pending = Pending(marker_for(step, call.arguments), step, call.name, call.arguments)
    for i in range(RUNS):
        kind = "completed" if i < 8000 else "awaiting" if i < 9500 else "ready"
        rid = f"bench-{kind}-{i:05d}" if kind != "ready" else f"bench-ready-{i - 9500:05d}"
        at = t0 + i
        recs = [
            Record(0, "run.started", "", "", {"input": [{"role": "user", "content": "hi"}]}, at)
        ]
        if kind != "ready":
            recs += [
                Record(0, "step.started", "llm/1", "model", {}, at),
                Record(0, "step.completed", "llm/1", "model", ask, at),
            ]
        if kind == "completed":
            recs += [
                Record(0, "step.started", step, "tool", {"write": True}, at),
                Record(
                    0, "step.completed", step, "tool", {"content": "T-1", "is_error": False}, at
                ),
                Record(0, "step.started", "llm/2", "model", {}, at),
                Record(0, "step.completed", "llm/2", "model", answer, at),
                Record(0, "run.completed", "", "", {"message": answer}, at),
            ]
        data = b"".join(encode_line(r, n) for n, r in enumerate(recs, 1))
        (root / f"{rid}.jsonl").write_bytes(data)
        if kind == "awaiting":
            out = Outcome(Status.AWAITING_APPROVAL, pending=(pending,), seq=len(recs))
            (root / ".outcomes" / f"{rid}.json").write_text(json.dumps(out.to_dict()))


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p * (len(ordered) - 1)))]


async def bench(root: Path) -> dict[str, float]:
    figures: dict[str, float] = {}
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    app = SupervisorApp(root, label="bench", cursor_blink=False)
    started = time.monotonic()
    async with app.run_test(size=(160, 48)) as pilot:
        while not (app.loaded and app.table.row_count == RUNS):
            await pilot.pause(0.01)
        figures["first_full_table_s"] = time.monotonic() - started
        figures["rss_growth_mb"] = (
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0
        ) / 1024
        await pilot.pause(0.5)

        # Idle CPU: nothing changes; the watcher, lease checks, retime and rescans run.
        cpu0, wall0 = time.process_time(), time.monotonic()
        await asyncio.sleep(IDLE_S)
        figures["idle_cpu_pct"] = 100 * (time.process_time() - cpu0) / (time.monotonic() - wall0)

        # Latency: the raw watcher sees the same directory with the same settings.
        raw_seen: list[float] = []
        stop = asyncio.Event()
        target_path = str(root / f"{TARGET}.jsonl")

        async def raw() -> None:
            async for batch in awatch(
                root, debounce=tui_app.DEBOUNCE_MS, step=tui_app.STEP_MS, stop_event=stop
            ):
                if any(p == target_path for _, p in batch):
                    raw_seen.append(time.monotonic())

        raw_task = asyncio.create_task(raw())
        await asyncio.sleep(0.5)
        app.table.move_cursor(row=app.table.get_row_index(TARGET), animate=False)
        await pilot.pause(0.2)
        child = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(root), TARGET],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert child.stdin is not None and child.stdout is not None
        app_lat: list[float] = []
        raw_lat: list[float] = []
        for k in range(APPENDS):
            calls_before = app.views[TARGET].model_calls
            rows_before = app.timeline.row_count
            n_raw = len(raw_seen)
            child.stdin.write("go\n")
            child.stdin.flush()
            appended = float(await asyncio.to_thread(child.stdout.readline))
            while not (
                app.views[TARGET].model_calls == calls_before + 1
                and app.table.get_row(TARGET)[3].plain == str(calls_before + 1)
                and app.timeline.row_count == rows_before + 1
            ):
                await asyncio.sleep(0.001)
            app_lat.append(time.monotonic() - appended)
            while len(raw_seen) <= n_raw:
                await asyncio.sleep(0.001)
            raw_lat.append(raw_seen[n_raw] - appended)
            await asyncio.sleep(0.15 if k % 2 else 0.3)  # spaced: no batching across appends
        child.stdin.close()
        child.wait()
        stop.set()
        await raw_task
        figures["app_latency_median_ms"] = 1000 * statistics.median(app_lat)
        figures["app_latency_p90_ms"] = 1000 * pct(app_lat, 0.9)
        figures["raw_watchfiles_median_ms"] = 1000 * statistics.median(raw_lat)
        figures["raw_watchfiles_p90_ms"] = 1000 * pct(raw_lat, 0.9)
        # What the app adds, per append: its latency minus the raw notification's.
        added = [a - r for a, r in zip(app_lat, raw_lat, strict=True)]
        figures["app_adds_median_ms"] = 1000 * statistics.median(added)
        figures["app_adds_p90_ms"] = 1000 * pct(added, 0.9)
        figures["rows_after"] = app.table.row_count
    return figures


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "runs"
        t = time.monotonic()
        build(root)
        print(f"built {RUNS} runs in {time.monotonic() - t:.1f}s", file=sys.stderr)
        figures = asyncio.run(bench(root))
    width = max(map(len, figures))
    for name, value in figures.items():
        print(f"{name:<{width}}  {value:10.2f}")
    ok = figures["app_adds_p90_ms"] <= 100 and figures["idle_cpu_pct"] < 2
    print("within targets" if ok else "OUTSIDE targets", f"(cores: {os.cpu_count()})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

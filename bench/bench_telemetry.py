"""What telemetry costs (issue 18), each figure a ratio measured in the same run, interleaved
(the machines are noisy):

    python bench/bench_telemetry.py [--steps 100] [--rounds 9] [--runs 100000] [--dir DIR]

1. per durable step, tracing on vs off: the per-step time of a read-only run whose worker
   traces to the SDK's in-memory exporter (a SimpleSpanProcessor: every span exported inline,
   the worst case) against the same run with nothing configured; target <= 1.10x.
2. per durable step, tracing off vs main's code path: a worker's run with nothing configured
   (its journal wrapped to put the step on the log lines) against ``run()`` handing the loop
   the bare journal, which is main's path exactly (the only change in it is one
   ``observer is None`` test per attempt); target <= 1.02x. The wrapper's own cost is also
   timed alone, per step, on replayed steps (no disk: the cost with nothing to hide it).
3. ``/metrics`` with ``--runs`` runs in a FileStore (built as bench_tui builds its stores):
   scrape latency over HTTP, median and worst, with the run counts read, and while a
   re-read of the summaries runs in its thread; target <= 50 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from bench_steps import agent
from bench_tui import build
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)

from durableagent import Config, FileStore, Message, PolicyGate, run
from durableagent.journal import _PLACE, Journal
from durableagent.messages import StepKind
from durableagent.record import Record
from durableagent.telemetry import Telemetry
from durableagent.telemetry.metrics import Metrics
from durableagent.telemetry.observe import Observed, RunWatch
from durableagent.telemetry.traces import Traces

M = statistics.median


def per_step(store: FileStore, run_id: str, steps: int, telemetry: Telemetry | None) -> float:
    config = Config(agent(steps, "lookup"), PolicyGate(), store)

    async def go() -> None:
        watch = None
        if telemetry is not None:
            watch = telemetry.watch(run_id, None, store, config.agent.model)
        out = await run(config, run_id, [Message("user", "look it all up")], observer=watch)
        if watch is not None:
            await watch.end(out, None)
        assert out.status == "completed", out

    _PLACE.threads_until = 0.0  # every mode starts with appends on the loop (journal.py)
    t = time.perf_counter()
    asyncio.run(go())
    return (time.perf_counter() - t) / (2 * steps + 1)


def bench_steps(root: Path, steps: int, rounds: int) -> float:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    batched_exporter = InMemorySpanExporter()
    batched = TracerProvider()
    batched.add_span_processor(BatchSpanProcessor(batched_exporter))
    modes: dict[str, Telemetry | None] = {
        "main": None,
        "off": Telemetry(),
        "on": Telemetry(Traces(provider)),
        "on-batch": Telemetry(Traces(batched)),
    }
    store = FileStore(root / "steps")
    per_step(store, "warm", 3, None)
    times: dict[str, list[float]] = {m: [] for m in modes}
    for i in range(rounds):
        names = list(modes)
        turn = i % len(names)
        for mode in names[turn:] + names[:turn]:  # each mode in each place as often
            gc.collect()
            times[mode].append(per_step(store, f"{mode}-{i}", steps, modes[mode]))
        batched.force_flush()
        exporter.clear()
        batched_exporter.clear()
    med = {m: M(v) for m, v in times.items()}

    # Ratios of the rounds' pairs, then their median: each pair saw the same disk weather.
    def ratio(a: str, b: str) -> str:
        pairs = [x / y for x, y in zip(times[a], times[b], strict=True)]
        q1, q2, q3 = statistics.quantiles(pairs, n=4)
        return f"{q2:.3f}x (quartiles {q1:.3f}-{q3:.3f})"

    on_off, off_main = ratio("on", "off"), ratio("off", "main")
    batch_off = ratio("on-batch", "off")
    print(f"per durable step (read-only run of {2 * steps + 1} steps, {rounds} rounds):")
    for m in modes:
        print(f"  {m:>8}: {med[m] * 1e6:8.1f} µs per step")
    print(f"  tracing on / off   = {on_off}   (target <= 1.10x; SimpleSpanProcessor)")
    print(f"  on-batch / off     = {batch_off}   (BatchSpanProcessor, as OTLP runs)")
    print(f"  tracing off / main = {off_main}   (target <= 1.02x)")
    return med["main"]


def bench_span(n: int = 5_000) -> None:
    """One step's span alone (ours around the SDK's), against the SDK's bare span with the
    same attributes: what tracing costs a step, and how much of it is the SDK."""
    from opentelemetry import trace

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    traces = Traces(provider)
    started = Record(1, "run.started", "", "", {"input": []}, 1.0)
    attempt = traces.begin_attempt("r", started, 1, "me")
    context = trace.set_span_in_context(attempt)
    attrs = {
        "durableagent.step": "tool/1/0/lookup",
        "durableagent.step.replayed": False,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup",
        "gen_ai.tool.call.id": "c",
        "durableagent.tool.write": False,
        "durableagent.tool.idempotent": False,
    }
    ours, sdk = [], []
    for _ in range(5):
        t = time.perf_counter()
        for _ in range(n):
            now = time.time_ns()
            traces.step(
                attempt, "tool/1/0/lookup", StepKind.TOOL, start_ns=now, end_ns=now,
                replayed=False, value={"content": "x"}, model="", provider="p",
                call={"id": "c"}, info={"write": False}, recorded=(None, None), error=None,
            )  # fmt: skip
        ours.append((time.perf_counter() - t) / n)
        t = time.perf_counter()
        for _ in range(n):
            span = traces.tracer.start_span(
                "execute_tool lookup", context=context, attributes=attrs, start_time=time.time_ns()
            )
            span.end()
        sdk.append((time.perf_counter() - t) / n)
        exporter.clear()
    print(
        f"one step's span: {M(ours) * 1e6:.1f} µs (the SDK's bare span alone {M(sdk) * 1e6:.1f} µs)"
    )


def bench_wrapper(step_s: float, n: int = 20_000) -> None:
    """The log-fields wrapper's own cost on a replayed step (a dict lookup in the journal):
    the per-step price of 'tracing off' with nothing to hide it."""
    done = Record(2, "step.completed", "tool/1/0/lookup", "tool", {"content": "x"}, 0.0)
    started = Record(1, "step.started", "tool/1/0/lookup", "tool", {"write": False}, 0.0)
    journal = Journal(None, "r", [started, done])  # type: ignore[arg-type]
    watch = RunWatch(Telemetry(), "r", None, None, None)  # type: ignore[arg-type]
    watch.journal = journal
    observed = Observed(journal, watch)

    async def nothing() -> Any:
        return None

    async def loop(runner: Any) -> float:
        t = time.perf_counter()
        for _ in range(n):
            await runner.run_step("tool/1/0/lookup", StepKind.TOOL, nothing)
        return (time.perf_counter() - t) / n

    bare = M([asyncio.run(loop(journal)) for _ in range(5)])
    wrapped = M([asyncio.run(loop(observed)) for _ in range(5)])
    print(f"the wrapper alone, per replayed step: {(wrapped - bare) * 1e6:.2f} µs")
    print(f"  (bare replay {bare * 1e6:.2f} µs, wrapped {wrapped * 1e6:.2f} µs)")
    print(
        f"  = {1 + (wrapped - bare) / step_s:.4f}x of main's {step_s * 1e6:.0f} µs durable step"
        "   (target <= 1.02x)"
    )


def scrape(port: int) -> float:
    t = time.perf_counter()
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        body = r.read()
    assert b"durableagent_runs" in body
    return time.perf_counter() - t


def bench_metrics(root: Path, runs: int) -> None:
    where = root / "many"
    t = time.perf_counter()
    build(where, runs)
    print(f"/metrics with {runs:,} runs (built in {time.perf_counter() - t:.1f}s):")
    store = FileStore(where, create=False)
    t = time.perf_counter()
    store.summaries()  # the summary index, as a store written by workers has it
    print(f"  first listing (builds the summary index): {time.perf_counter() - t:.2f}s")
    metrics = Metrics(store, refresh=3600)
    t = time.perf_counter()
    metrics.runs.read()
    print(f"  one re-read of the run counts (in its thread): {time.perf_counter() - t:.3f}s")
    port = metrics.serve(0)
    try:
        while metrics.runs.counts is None:
            time.sleep(0.01)
        quiet = [scrape(port) for _ in range(50)]
        print(
            f"  scrape: median {M(quiet) * 1e3:.2f} ms, worst {max(quiet) * 1e3:.2f} ms"
            "   (target <= 50 ms)"
        )
        busy: list[float] = []
        for _ in range(5):
            reading = threading.Thread(target=metrics.runs.read)
            reading.start()
            while reading.is_alive():
                busy.append(scrape(port))
            reading.join()
        print(
            f"  scrape while the counts are re-read: median {M(busy) * 1e3:.2f} ms, "
            f"worst {max(busy) * 1e3:.2f} ms ({len(busy)} scrapes)"
        )
    finally:
        metrics.close()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--rounds", type=int, default=21)
    p.add_argument("--runs", type=int, default=100_000)
    p.add_argument("--dir", default=".", help="where the stores go (the disk measured)")
    args = p.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-telemetry-", dir=args.dir))
    try:
        step_s = bench_steps(root, args.steps, args.rounds)
        bench_span()
        bench_wrapper(step_s)
        bench_metrics(root, args.runs)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

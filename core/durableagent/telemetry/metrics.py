"""Prometheus metrics of a worker (SPEC §12; extra ``metrics``), in a registry of its own.

Counters and histograms are kept as the worker's attempts run (``observe.py`` feeds them);
``durableagent_runs{status}`` and ``durableagent_waiting_for_human_seconds`` come from the
store's summaries, which a thread of its own refreshes every ``refresh`` seconds: a scrape
only reads the last counts, so it answers in microseconds however many runs the store holds
(a listing of 100,000 runs takes longer than a scrape may).

Lost attempts are counted by the worker that takes their run over: a killed worker cannot
count its own, and one whose lease was taken over leaves it to the taker, so that across a
fleet each lost attempt is counted once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..fold import NEEDS_HUMAN, RunStatus
from ..messages import StepKind
from ..stores import Store
from ..stores.protocol import LOST

STEP_BUCKETS = (0.005, 0.025, 0.1, 0.5, 1.0, 2.5, 5.0, 15.0, 60.0, 300.0)
APPEND_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5)


class Metrics:
    """The worker's metric families in ``registry`` (a fresh CollectorRegistry by default:
    two workers in one process never share counters)."""

    def __init__(
        self, store: Store, *, registry: CollectorRegistry | None = None, refresh: float = 5.0
    ) -> None:
        self.store = store
        self.registry = registry if registry is not None else CollectorRegistry()
        r = self.registry
        self.steps = Counter(
            "durableagent_steps", "Steps by kind and outcome (ran, replayed, failed)",
            ["kind", "outcome"], registry=r,
        )  # fmt: skip
        self.step_seconds = Histogram(
            "durableagent_step_seconds", "Time of the steps that ran (their appends included)",
            ["kind"], buckets=STEP_BUCKETS, registry=r,
        )  # fmt: skip
        self.tokens = Counter(
            "durableagent_model_tokens", "Model tokens of the steps that ran, by direction",
            ["direction"], registry=r,
        )  # fmt: skip
        self.attempts = Counter(
            "durableagent_attempts", "Attempts by how they ended (lost: counted by the taker)",
            ["ended"], registry=r,
        )  # fmt: skip
        self.takeovers = Counter(
            "durableagent_lease_takeovers", "Runs this worker took over from a lost attempt",
            registry=r,
        )  # fmt: skip
        self.append_seconds = Histogram(
            "durableagent_append_seconds", "Time of each journal append (fsync included)",
            buckets=APPEND_BUCKETS, registry=r,
        )  # fmt: skip
        self.up = Gauge("durableagent_worker_up", "1 while the worker serves", registry=r)
        self.heartbeat = Gauge(
            "durableagent_worker_heartbeat_timestamp_seconds",
            "When the worker's event loop last ticked (Unix time)", registry=r,
        )  # fmt: skip
        for kind in StepKind:
            for outcome in ("ran", "replayed", "failed"):
                self.steps.labels(str(kind), outcome)
            self.step_seconds.labels(str(kind))
        for direction in ("input", "output"):
            self.tokens.labels(direction)
        self.runs = RunCounts(store, refresh)
        r.register(self.runs)
        self._server: Any = None

    # -- fed by observe.py ---------------------------------------------------------------

    def step(self, kind: StepKind, outcome: str, seconds: float, value: Any) -> None:
        self.steps.labels(str(kind), outcome).inc()
        if outcome == "replayed":
            return
        self.step_seconds.labels(str(kind)).observe(seconds)
        if kind == StepKind.MODEL and isinstance(value, dict):
            usage = value.get("usage")
            if isinstance(usage, dict):
                for direction in ("input", "output"):
                    n = usage.get(f"{direction}_tokens")
                    if isinstance(n, int) and n > 0:
                        self.tokens.labels(direction).inc(n)

    def attempt_ended(self, ended: str, took_over: bool) -> None:
        if took_over:
            self.takeovers.inc()
            self.attempts.labels(LOST).inc()
        if ended != LOST:  # the worker that takes the run over counts it
            self.attempts.labels(ended).inc()
        self.runs.poke()  # a run's status changed: count again soon

    def timed(self, store: Store) -> Store:
        """``store`` with its appends timed into ``durableagent_append_seconds``."""
        return TimedStore(store, self.append_seconds)

    # -- serving -------------------------------------------------------------------------

    def serve(self, port: int, host: str = "127.0.0.1") -> int:
        """Serve ``/metrics`` on ``host:port`` from a thread; returns the port (0 picks a
        free one). Raises OSError when the port cannot be had."""
        server, _thread = start_http_server(port, addr=host, registry=self.registry)
        self._server = server
        self.runs.start()
        return int(server.server_address[1])

    def close(self) -> None:
        self.runs.stop()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None


class TimedStore:
    """A store whose ``append`` and ``append_many`` observe their time; the rest is the
    store's own."""

    def __init__(self, store: Store, histogram: Histogram) -> None:
        self._store = store
        self._histogram = histogram

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def append(self, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._store.append(*args, **kwargs)
        finally:
            self._histogram.observe(time.perf_counter() - t)

    def append_many(self, *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        try:
            return self._store.append_many(*args, **kwargs)
        finally:
            self._histogram.observe(time.perf_counter() - t)


class RunCounts(Collector):
    """``durableagent_runs{status}`` and ``durableagent_waiting_for_human_seconds``, from the
    summaries a background thread reads every ``refresh`` seconds (and at once on start)."""

    def __init__(self, store: Store, refresh: float) -> None:
        self.store = store
        self.refresh = refresh
        self.counts: dict[str, int] | None = None  # None until the first listing is read
        self.oldest_waiting: float | None = None  # last_activity of the oldest needs-human run
        self.read_at = 0.0
        self._stop = threading.Event()
        self._poked = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="agentrun-metrics", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._poked.set()

    def poke(self) -> None:
        """Read again soon (an attempt ended), at most every ``SOONEST`` seconds."""
        self._poked.set()

    SOONEST = 0.5

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.read()
            self._poked.wait(self.refresh)
            self._poked.clear()
            self._stop.wait(self.SOONEST)

    def read(self) -> None:
        """List the store's summaries once and keep the counts."""
        try:
            summaries = self.store.summaries()
        except Exception:  # the store out of reach: keep the last counts
            return
        counts = dict.fromkeys((str(s) for s in RunStatus), 0)
        oldest: float | None = None
        for s in summaries:
            counts[str(s.status)] = counts.get(str(s.status), 0) + 1
            if s.status in NEEDS_HUMAN and s.last_activity is not None:
                oldest = s.last_activity if oldest is None else min(oldest, s.last_activity)
        self.counts, self.oldest_waiting, self.read_at = counts, oldest, time.time()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        counts = self.counts
        if counts is not None:
            runs = GaugeMetricFamily(
                "durableagent_runs", "Runs in the store by status", labels=["status"]
            )
            for status, n in sorted(counts.items()):
                runs.add_metric([status], n)
            yield runs
            waiting = self.oldest_waiting
            yield GaugeMetricFamily(
                "durableagent_waiting_for_human_seconds",
                "How long the oldest run needing a human has waited",
                value=0.0 if waiting is None else max(0.0, time.time() - waiting),
            )
            yield GaugeMetricFamily(
                "durableagent_runs_read_timestamp_seconds",
                "When the run counts were last read from the store",
                value=self.read_at,
            )

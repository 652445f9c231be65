"""Prometheus metrics of a worker (SPEC §12; extra ``metrics``), in a registry of its own.

Counters and histograms are kept as the worker's attempts run (``observe.py`` feeds them);
``durableagent_runs{status}`` and ``durableagent_waiting_for_human_seconds`` are counts kept
in memory from the store's summaries (see :class:`RunCounts`): a scrape never lists the store,
so it answers as fast with 100,000 runs as with ten (a listing of 100,000 takes longer than a
scrape may).

Lost attempts are counted by the worker that takes their run over: a killed worker cannot
count its own, and one whose lease was taken over leaves it to the taker, so that across a
fleet each lost attempt is counted once.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from ..fold import NEEDS_HUMAN, RunStatus, Summary
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

    def attempt_ended(self, run_id: str, ended: str, took_over: bool) -> None:
        self.runs.poke(run_id)  # its status changed: read its summary
        if took_over:
            self.takeovers.inc()
            self.attempts.labels(LOST).inc()
        if ended != LOST:  # the worker that takes the run over counts it
            self.attempts.labels(ended).inc()

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
    """``durableagent_runs{status}`` and ``durableagent_waiting_for_human_seconds``, kept in
    memory: a scrape reads counts, never the store.

    They come from a full listing of the summaries (the worker's own periodic look hands its
    listing over: :meth:`take`; else a thread of its own lists them when the last one is
    older than ``refresh`` seconds, and never spends more than a tenth of its time at it), and
    between listings from one run's summary each time an attempt of this worker ends
    (:meth:`poke`), which is a single journal's fold."""

    SHARE = 10  # wait at least this many times as long as a listing took

    def __init__(self, store: Store, refresh: float) -> None:
        self.store = store
        self.refresh = refresh
        self.counts: dict[str, int] | None = None  # None until the first listing is read
        self.read_at = 0.0
        self._status: dict[str, str] = {}
        self._waiting: dict[str, float] = {}  # needs-human run -> its last activity
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._poked: set[str] = set()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._took = 0.0  # how long the last listing took

    def start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="agentrun-metrics", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()

    def poke(self, run_id: str) -> None:
        """``run_id``'s status may have changed (an attempt of it ended): read its summary."""
        with self._lock:
            self._poked.add(run_id)
        self._wake.set()

    def _loop(self) -> None:
        while not self._stop.is_set():
            due = self.read_at + max(self.refresh, self.SHARE * self._took)
            if time.time() >= due:
                self.read()
            self._wake.wait(max(0.05, due - time.time()))
            self._wake.clear()
            with self._lock:
                poked, self._poked = self._poked, set()
            for run_id in sorted(poked):
                try:
                    summary = self.store.summary(run_id)
                except Exception:  # advisory: the next listing corrects it
                    continue
                if summary is not None:
                    self._update(summary)

    def read(self) -> None:
        """List the store's summaries once and count them."""
        t = time.monotonic()
        try:
            summaries = self.store.summaries()
        except Exception:  # the store out of reach: keep the last counts
            return
        self.take(summaries)
        self._took = time.monotonic() - t

    def take(self, summaries: Iterable[Summary]) -> None:
        """Count a full listing (the worker's, or :meth:`read`'s)."""
        counts = dict.fromkeys((str(s) for s in RunStatus), 0)
        status: dict[str, str] = {}
        waiting: dict[str, float] = {}
        for s in summaries:
            key = str(s.status)
            status[s.run_id] = key
            counts[key] = counts.get(key, 0) + 1
            if s.status in NEEDS_HUMAN and s.last_activity is not None:
                waiting[s.run_id] = s.last_activity
        with self._lock:
            self.counts, self._status, self._waiting = counts, status, waiting
            self.read_at = time.time()

    def _update(self, s: Summary) -> None:
        with self._lock:
            if self.counts is None:
                return
            old = self._status.get(s.run_id)
            if old is not None:
                self.counts[old] -= 1
            key = str(s.status)
            self._status[s.run_id] = key
            self.counts[key] = self.counts.get(key, 0) + 1
            if s.status in NEEDS_HUMAN and s.last_activity is not None:
                self._waiting[s.run_id] = s.last_activity
            else:
                self._waiting.pop(s.run_id, None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            counts = None if self.counts is None else dict(self.counts)
            oldest = min(self._waiting.values(), default=None)
            read_at = self.read_at
        if counts is None:
            return
        runs = GaugeMetricFamily(
            "durableagent_runs", "Runs in the store by status", labels=["status"]
        )
        for status, n in sorted(counts.items()):
            runs.add_metric([status], n)
        yield runs
        yield GaugeMetricFamily(
            "durableagent_waiting_for_human_seconds",
            "How long the oldest run needing a human has waited",
            value=0.0 if oldest is None else max(0.0, time.time() - oldest),
        )
        yield GaugeMetricFamily(
            "durableagent_runs_read_timestamp_seconds",
            "When the run counts were last read whole from the store",
            value=read_at,
        )

#!/usr/bin/env python3
"""A chaos run with real processes: N ``agentrun worker`` processes serve M runs of a
fence-honouring agent (``scripts/chaos_agent.py``) on one store while faults land at random:

- SIGKILL of a worker (a new one is started in its place);
- SIGSTOP of a worker for 3-6 s, then SIGCONT (past the lease's ttl);
- on PostgreSQL, ``pg_terminate_backend`` of a worker's own connections (found by their
  ``application_name``, ``durableagent pid <PID> <host>``), and one server restart.

Some faults are aimed at a worker that is inside a write. The ledger is a folder on this
host, whichever the store (so a server restart never touches it). No write is gated; a human
reconciles every indeterminate write as the SPEC has them do: look in the ledger under the
step's idempotency key; found: ``done`` with what was found, else ``retry`` (pinned to the
journal looked at). ``--human fenced`` first raises the ledger's fence for the run above
every epoch it has had, so that a holder paused inside the write cannot land it afterwards.
When every run has completed, the workers are stopped and the store and the ledger are
checked:

- doubled writes: an idempotency key effected twice in the ledger;
- writes refused by the ledger's fence (a stale holder's), and writes that landed although a
  later attempt had already taken the run over (the fence lets one through when the new
  holder has not written yet: if a human said retry meanwhile, that is a doubled write);
- records appended by a holder after it lost its lease: every step result names the epoch of
  the attempt that made it, and the store's attempt log gives each attempt's first seq; a
  record of epoch E must lie in E's attempt's range, below the first seq of the next
  attempt (seqs are given at append under the run's lock, so a record at or past that seq
  was appended after the next attempt took the lease);
- corrupt or lost records: every journal loads (crc, consecutive seqs), and every write the
  journal says happened is in the ledger under its key;
- unwarned reconciles: the human read the run (``view_store``) just before deciding; when
  the write's holder was a worker still alive (paused, say) and had not been taken over,
  the run must have said its write may still land (``late_write``).

Exit 1 on any doubled write, unfinished run, stale record, corrupt journal, lost effect,
unwarned reconcile, worker that exited on its own, or error the human met.

    python scripts/chaos.py --store DIR_OR_URL --workers 4 --runs 100 --kills 50 \\
        --stops 10 --terminates 20 --restart

A ``postgresql://`` URL without ``?schema=`` gets a fresh schema, dropped afterwards.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import math
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from durableagent import (
    CorruptJournalError,
    Message,
    Reconcile,
    RunStatus,
    SignalError,
    Store,
    StoreError,
    idempotency_key,
    open_store,
    submit,
    view_store,
)
from durableagent import signal as send_signal
from durableagent.record import STEP_COMPLETED, STEP_STARTED, Record
from durableagent.stores import is_url
from durableagent.worker import reset_attempts

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # chaos_agent, here and in the workers (see Worker)

from chaos_agent import Ledger  # noqa: E402

HUMAN = "chaos human"


@dataclass
class Options:
    store: str
    workers: int = 4
    runs: int = 100
    kills: int = 50
    stops: int = 10
    terminates: int = 0
    restart: bool = False
    lease_ttl: float = 2.0
    concurrency: int = 4
    fault_every: float = 0.5  # mean seconds between faults
    stop_for: tuple[float, float] = (3.0, 6.0)
    aim: float = 0.5  # the share of faults aimed at a worker inside a write
    pace: float = 0.1  # each step sleeps up to this (a write: twice)
    seed: int | None = None
    workdir: Path | None = None
    timeout: float = 600.0  # seconds for the runs to finish once the faults are over
    human: str = "literal"  # or "fenced": raise the ledger's fence before each lookup
    quiet: bool = False


@dataclass
class Report:
    """What the chaos run found (see the module docstring)."""

    store: str = ""
    seconds: float = 0.0
    runs: int = 0
    finished: int = 0
    unfinished: dict[str, str] = field(default_factory=dict)
    faults: Counter[str] = field(default_factory=Counter)
    connections_terminated: int = 0
    effects: int = 0
    write_steps: int = 0
    doubled: list[str] = field(default_factory=list)
    refused: int = 0
    landed_after_takeover: int = 0
    stale_records: list[str] = field(default_factory=list)
    corrupt: list[str] = field(default_factory=list)
    lost_effects: list[str] = field(default_factory=list)
    records: int = 0
    attempts: int = 0
    attempts_ended: Counter[str] = field(default_factory=Counter)
    reconciled: Counter[str] = field(default_factory=Counter)
    warned: int = 0  # reconciles the run warned of: its write's holder may still write
    unwarned: list[str] = field(default_factory=list)  # a live, silent holder, no warning
    failed_retried: list[str] = field(default_factory=list)
    worker_exits: list[str] = field(default_factory=list)
    start_refused: list[str] = field(default_factory=list)  # the store down when it started
    human_errors: list[str] = field(default_factory=list)
    log_lines: Counter[str] = field(default_factory=Counter)
    workdir: str = ""

    @property
    def ok(self) -> bool:
        return not (
            self.doubled
            or self.unfinished
            or self.stale_records
            or self.corrupt
            or self.lost_effects
            or self.unwarned
            or self.worker_exits
            or self.human_errors
        )

    def text(self) -> str:
        def kv(c: Counter[str]) -> str:
            return ", ".join(f"{k} {v}" for k, v in sorted(c.items())) or "none"

        lines = [
            f"store: {self.store}",
            f"elapsed: {self.seconds:.0f}s; workdir: {self.workdir}",
            f"faults: {kv(self.faults)}"
            + (
                f" ({self.connections_terminated} connections terminated)"
                if self.faults.get("terminate")
                else ""
            ),
            f"runs: {self.runs}; finished: {self.finished}; unfinished: {len(self.unfinished)}",
            f"records: {self.records}; attempts: {self.attempts} ({kv(self.attempts_ended)})",
            f"write steps: {self.write_steps}; write effects: {self.effects}",
            f"doubled writes (a key effected twice): {len(self.doubled)}",
            f"writes refused by the fence: {self.refused}",
            f"writes that landed after their holder's lease was taken over: "
            f"{self.landed_after_takeover}",
            f"records appended by a holder after it lost its lease: {len(self.stale_records)}",
            f"corrupt journals: {len(self.corrupt)}; lost effects (journal says written, "
            f"ledger has nothing): {len(self.lost_effects)}",
            f"human: reconciled {kv(self.reconciled)}; failed runs retried "
            f"{len(self.failed_retried)}",
            f"reconciles warned that the holder may still write: {self.warned}; with a live "
            f"holder and no warning: {len(self.unwarned)}",
            f"worker exits not caused by the chaos run: {len(self.worker_exits)}; workers "
            f"that found the store down when they started (and exited 1): "
            f"{len(self.start_refused)}",
            f"errors met by the human: {len(self.human_errors)}",
            f"worker log: {kv(self.log_lines)}",
        ]
        for title, items in (
            ("unfinished", [f"{k}: {v}" for k, v in sorted(self.unfinished.items())]),
            ("doubled", self.doubled),
            ("stale record", self.stale_records),
            ("corrupt", self.corrupt),
            ("lost effect", self.lost_effects),
            ("unwarned reconcile", self.unwarned),
            ("failed run retried", self.failed_retried),
            ("worker exit", self.worker_exits),
            ("worker start refused", self.start_refused),
            ("human error", self.human_errors),
        ):
            lines += [f"  {title}: {item}" for item in items[:20]]
            if len(items) > 20:
                lines.append(f"  ... and {len(items) - 20} more")
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)


# -- workers -----------------------------------------------------------------------------


class Worker:
    """One ``agentrun worker`` child; its log in the workdir."""

    def __init__(self, chaos: Chaos, number: int) -> None:
        self.number = number
        self.log = chaos.workdir / "workers" / f"w{number:03d}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self._file = open(self.log, "w")  # noqa: SIM115 - closed when the child is reaped
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH")]))
        env["CHAOS_LEDGER"] = str(chaos.ledger.folder)
        env["CHAOS_PACE"] = str(chaos.opts.pace)
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "durableagent.cli",
                "worker",
                "--agent",
                "chaos_agent:chaos",
                "--store",
                chaos.spec,
                "--lease-ttl",
                str(chaos.opts.lease_ttl),
                "--concurrency",
                str(chaos.opts.concurrency),
                "--rescan",
                "0.5",
                "--backoff",
                "0.2",
                "--max-backoff",
                "2",
                "--grace",
                "5",
            ],
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self._file,
        )
        self.pid = self.proc.pid
        self.stopped_until: float | None = None
        self.killed = False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def reap(self) -> None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)
        self._file.close()


# -- the run -----------------------------------------------------------------------------


class Chaos:
    def __init__(self, opts: Options) -> None:
        self.opts = opts
        self.rng = random.Random(opts.seed)
        self.workdir = opts.workdir or Path(tempfile.mkdtemp(prefix="chaos-"))
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.ledger = Ledger(self.workdir / "ledger")
        self.spec, self.drop_schema = self._store_spec(opts.store)
        self.pg = is_url(self.spec)
        self.store: Store = open_store(self.spec, lease_ttl=opts.lease_ttl)
        self.workers: list[Worker] = []
        self.numbered = 0
        self.report = Report(store=self._describe(), workdir=str(self.workdir))
        self.run_ids: list[str] = []
        self.done: set[str] = set()
        self._human_stop = threading.Event()
        self._wakeups: list[tuple[float, int, Worker]] = []
        self._human: threading.Thread | None = None
        self._started = time.monotonic()

    # -- setting up --------------------------------------------------------------------

    def _store_spec(self, spec: str) -> tuple[str, str | None]:
        if not is_url(spec) or "schema=" in spec:
            return spec, None
        schema = f"chaos_{secrets.token_hex(4)}"
        return f"{spec}{'&' if '?' in spec else '?'}schema={schema}", schema

    def _describe(self) -> str:
        return str(getattr(self.store, "description", self.spec))

    def say(self, text: str) -> None:
        if not self.opts.quiet:
            print(f"[{time.strftime('%H:%M:%S')}] {text}", file=sys.stderr, flush=True)

    def start_worker(self) -> Worker:
        w = Worker(self, self.numbered)
        self.numbered += 1
        self.workers.append(w)
        return w

    # -- faults ------------------------------------------------------------------------

    def _serving(self) -> list[Worker]:
        return [w for w in self.workers if w.alive() and w.stopped_until is None]

    def _target(self) -> Worker | None:
        """A serving worker; one inside a write, when the dice say aim and there is one."""
        serving = self._serving()
        if not serving:
            return None
        if self.rng.random() < self.opts.aim:
            writing = self.ledger.writing()
            inside = [w for w in serving if w.pid in writing]
            if inside:
                return self.rng.choice(inside)
        return self.rng.choice(serving)

    def kill(self, w: Worker) -> None:
        w.killed = True
        w.proc.send_signal(signal.SIGKILL)
        w.reap()
        self.workers.remove(w)
        self.start_worker()
        self.report.faults["kill"] += 1

    def stop(self, w: Worker, *, wake: bool = True) -> None:
        """SIGSTOP ``w``; SIGCONT after ``stop_for`` seconds (``wake=False``: when
        :meth:`wake` says)."""
        # Never every worker at once: someone must be able to take the runs over.
        if len(self._serving()) <= 1:
            self.report.faults["stop skipped"] += 1
            return
        low, high = self.opts.stop_for
        w.proc.send_signal(signal.SIGSTOP)
        w.stopped_until = time.monotonic() + (self.rng.uniform(low, high) if wake else math.inf)
        heapq.heappush(self._wakeups, (w.stopped_until, w.pid, w))
        self.report.faults["stop"] += 1

    def wake(self, w: Worker) -> None:
        w.proc.send_signal(signal.SIGCONT)
        w.stopped_until = None

    def wake_due(self, *, all_now: bool = False) -> None:
        while self._wakeups and (all_now or self._wakeups[0][0] <= time.monotonic()):
            due, _, w = heapq.heappop(self._wakeups)
            if w.stopped_until != due:
                continue  # woken by hand since
            if w.alive():
                w.proc.send_signal(signal.SIGCONT)
            w.stopped_until = None

    def terminate(self, w: Worker) -> None:
        """End the worker's own PostgreSQL sessions (not the server, not the others')."""
        import psycopg

        name = f"durableagent pid {w.pid} {socket.gethostname()}"[:63]
        dsn = self.spec.split("?", 1)[0]
        try:
            with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
                rows = conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    "WHERE application_name = %s",
                    (name,),
                ).fetchall()
        except psycopg.Error as e:
            self.say(f"terminate: {e}")
            return
        self.report.faults["terminate"] += 1
        self.report.connections_terminated += sum(1 for (ok,) in rows if ok)

    def restart_server(self) -> None:
        version = sorted(os.listdir("/etc/postgresql"))[-1]
        self.say(f"restarting PostgreSQL {version}")
        subprocess.run(
            ["pg_ctlcluster", "--skip-systemctl-redirect", version, "main", "restart"],
            check=True,
            capture_output=True,
        )
        self.report.faults["restart"] += 1
        for _ in range(100):
            if subprocess.run(["pg_isready", "-q", "-h", "127.0.0.1"]).returncode == 0:
                return
            time.sleep(0.1)

    def faults(self) -> list[str]:
        kinds = ["kill"] * self.opts.kills + ["stop"] * self.opts.stops
        if self.pg:
            kinds += ["terminate"] * self.opts.terminates
        self.rng.shuffle(kinds)
        if self.pg and self.opts.restart:  # somewhere in the middle half
            n = len(kinds)
            kinds.insert(self.rng.randint(n // 4, max(n // 4, (3 * n) // 4)), "restart")
        return kinds

    def inject(self, kind: str) -> None:
        if kind == "restart":
            self.restart_server()
            return
        if kind == "stop":  # one worker at least must go on serving: wait for a wake-up
            deadline = time.monotonic() + self.opts.stop_for[1] + 1
            while len(self._serving()) < 2 and time.monotonic() < deadline:
                self.wake_due()
                self.reap_exits()
                time.sleep(0.02)
        w = self._target()
        if w is None:
            self.report.faults[f"{kind} skipped"] += 1
            return
        {"kill": self.kill, "stop": self.stop, "terminate": self.terminate}[kind](w)

    def reap_exits(self) -> None:
        """A worker that exited on its own is a finding; start another in its place (as a
        process supervisor would). One that could not reach the store when it started (the
        server restarting) says so and exits 1: counted apart, not a failure."""
        for w in list(self.workers):
            if not w.alive() and not w.killed:
                w.reap()
                tail = w.log.read_text(errors="replace").strip().splitlines()[-3:]
                said = f"pid {w.pid} exit {w.proc.returncode}: {' | '.join(tail)}"
                if w.proc.returncode == 1 and len(tail) == 1 and "store unavailable" in tail[0]:
                    self.report.start_refused.append(said)
                else:
                    self.report.worker_exits.append(said)
                self.workers.remove(w)
                self.start_worker()

    # -- runs --------------------------------------------------------------------------

    def submit_up_to(self, n: int) -> None:
        while len(self.run_ids) < min(n, self.opts.runs):
            run_id = f"c{len(self.run_ids):04d}"
            for _ in range(100):
                try:
                    submit(self.store, run_id, [Message("user", f"chaos run {run_id}")])
                    break
                except StoreError:  # the server restarting: try again
                    time.sleep(0.2)
            self.run_ids.append(run_id)

    def unfinished(self) -> list[str]:
        try:
            summaries = {s.run_id: s for s in self.store.summaries()}
        except StoreError:
            return [r for r in self.run_ids if r not in self.done]
        for r in self.run_ids:
            s = summaries.get(r)
            if s is not None and s.status == RunStatus.COMPLETED:
                self.done.add(r)
        return [r for r in self.run_ids if r not in self.done]

    # -- the human ---------------------------------------------------------------------

    def human(self) -> None:
        """Reconcile indeterminate writes from the ledger; give exhausted failed runs
        another try (noting why they failed)."""
        while not self._human_stop.wait(0.2):
            try:
                summaries = self.store.summaries()
            except StoreError:
                continue
            for s in summaries:
                try:
                    if s.status == RunStatus.INDETERMINATE and s.indeterminate:
                        self.reconcile(s.run_id, s.indeterminate)
                    elif s.status == RunStatus.FAILED:
                        self.retry_failed(s.run_id, s.error)
                except StoreError as e:
                    self.say(f"human: {s.run_id}: {e}")
                except Exception as e:  # a finding, never the end of the human
                    self.report.human_errors.append(f"{s.run_id}: {type(e).__name__}: {e}")

    def reconcile(self, run_id: str, step: str) -> None:
        if self.opts.human == "fenced":
            # Close the door before looking: a holder paused inside the write may still send
            # it; from now on the ledger refuses every epoch the run has had so far.
            attempts = self.store.attempts(run_id)
            self.ledger.close(run_id, max((a.epoch for a in attempts), default=0) + 1)
        self.look_for_the_warning(run_id, step)
        records = self.store.load(run_id)
        key = idempotency_key(run_id, step, records[0] if records else None)
        found = self.ledger.find(key)
        if found:
            how = Reconcile(step, "done", f"L{found[0]['n']}; found by a human")
        else:
            how = Reconcile(step, "retry")
        seen = records[-1].seq if records else 0
        try:
            send_signal(
                self.store, run_id, "reconcile", how, by=HUMAN, reason="chaos", expect_seq=seen
            )
        except SignalError:
            return  # decided already, or the run moved on since the look
        self.report.reconciled[how.outcome] += 1

    def look_for_the_warning(self, run_id: str, step: str) -> None:
        """What the human reads before deciding: while the write's holder is a worker still
        alive (paused, say) and no attempt has taken over, the run must say that its write
        may still land."""
        view = view_store(self.store, run_id)
        if view.late_write:
            self.report.warned += 1
            return
        if self.store.leases_die_with_holder:
            return  # a live holder keeps its flock: the run shows as running, not here
        attempts = self.store.attempts(run_id)
        start = max((r.seq for r in view.records if r.step == step), default=0)
        ran = [a for a in attempts if a.first_seq <= start]
        if not ran or ran[-1] is not attempts[-1] or ran[-1].ended not in (None, "lost"):
            return  # taken over since, or its holder said how it ended
        pid = ran[-1].owner.rpartition(":")[2]
        alive = [w for w in list(self.workers) if str(w.pid) == pid and w.alive()]
        if alive:
            self.report.unwarned.append(f"{run_id} {step}: holder {ran[-1].owner} alive")

    def retry_failed(self, run_id: str, error: str) -> None:
        from durableagent.worker import DEFAULT_MAX_ATTEMPTS, read_attempts

        attempts = read_attempts(self.store, run_id)
        if attempts is None or attempts.failures < DEFAULT_MAX_ATTEMPTS:
            return  # the workers are still retrying it
        if reset_attempts(self.store, run_id):
            self.report.failed_retried.append(f"{run_id}: {error or attempts.error}")

    # -- the whole run -----------------------------------------------------------------

    def start(self) -> None:
        """Start the workers and the human."""
        self._started = time.monotonic()
        self.say(f"chaos on {self._describe()}; workdir {self.workdir}")
        for _ in range(self.opts.workers):
            self.start_worker()
        self._human = threading.Thread(target=self.human, name="chaos-human", daemon=True)
        self._human.start()

    def finish(self, timeout: float) -> Report:
        """Wait (``timeout`` seconds at most) until every run has completed, stop the human
        and the workers, and check the store and the ledger."""
        try:
            deadline = time.monotonic() + timeout
            while self.unfinished() and time.monotonic() < deadline:
                self.wake_due()
                self.reap_exits()
                time.sleep(0.2)
        finally:
            self.abort()
        self.report.seconds = time.monotonic() - self._started
        self.check()
        return self.report

    def abort(self) -> None:
        """Stop the human and the workers (woken first); again is harmless."""
        self._human_stop.set()
        if self._human is not None:
            self._human.join(10)
        self.wake_due(all_now=True)
        self.stop_workers()

    def run(self) -> Report:
        """The chaos run of the command line: faults at random along the runs."""
        opts = self.opts
        self.start()
        try:
            plan = self.faults()
            first = min(opts.runs, opts.workers * opts.concurrency)
            self.submit_up_to(first)
            for i, kind in enumerate(plan):
                deadline = time.monotonic() + self.rng.expovariate(1 / opts.fault_every)
                while time.monotonic() < deadline:
                    self.wake_due()
                    self.reap_exits()
                    time.sleep(0.02)
                # Runs arrive along the faults (the last with the last fault), and a few more
                # whenever the workers ran out of work, so that faults land on busy workers.
                curve = max(first, math.ceil(opts.runs * (i + 1) / len(plan)))
                busy = len(self.done) + 2 * opts.workers
                self.submit_up_to(min(curve + opts.workers, max(curve, busy)))
                if not self.unfinished():
                    self.submit_up_to(len(self.run_ids) + opts.workers)
                if not self.unfinished():
                    self.report.faults[f"{kind} skipped"] += 1
                    continue
                self.inject(kind)
                if (i + 1) % 20 == 0:
                    self.say(
                        f"{i + 1}/{len(plan)} faults; {len(self.done)}/{len(self.run_ids)} "
                        "runs finished"
                    )
            self.submit_up_to(opts.runs)
            self.say("faults over; waiting for every run to finish")
        except BaseException:
            self.abort()
            raise
        return self.finish(opts.timeout)

    def describe_run(self, run_id: str) -> str:
        """A run's state and the workers' last log lines, for a message."""
        lines = [f"run {run_id}: {self.store.summary(run_id)}"]
        lines += [f"  attempt {a}" for a in self.store.attempts(run_id)]
        lines.append(f"  lease: {self.store.lease_holder(run_id)}")
        lines += [f"  {r.seq} {r.type} {r.step} {r.data}" for r in self.store.load(run_id)[1:]]
        for w in sorted(self.workdir.glob("workers/*.log")):
            tail = w.read_text(errors="replace").splitlines()[-15:]
            lines += [f"{w.name}:", *(f"  {t}" for t in tail)]
        lines += [f"human error: {e}" for e in self.report.human_errors]
        return "\n".join(lines)

    def stop_workers(self) -> None:
        for w in self.workers:
            w.stopped_until = None
            if w.alive():
                w.proc.send_signal(signal.SIGCONT)
                w.proc.send_signal(signal.SIGTERM)
        for w in self.workers:
            try:
                w.proc.wait(30)
            except subprocess.TimeoutExpired:
                w.proc.kill()
            w.reap()

    def close(self) -> None:
        self.store.close()
        if self.drop_schema is not None:
            import psycopg
            from psycopg import sql

            with psycopg.connect(self.spec.split("?", 1)[0], autocommit=True) as conn:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(
                        sql.Identifier(self.drop_schema)
                    )
                )

    # -- the checks --------------------------------------------------------------------

    def check(self) -> None:
        rep = self.report
        rep.runs = len(self.run_ids)
        effects = self.ledger.effects()
        rep.effects = len(effects)
        rep.refused = len(self.ledger.refused())
        by_key: dict[str, list[dict[str, Any]]] = {}
        for e in effects:
            by_key.setdefault(e["key"], []).append(e)
        for key, found in sorted(by_key.items()):
            if len(found) > 1:
                how = ", ".join(f"L{e['n']} epoch {e['epoch']} pid {e['pid']}" for e in found)
                rep.doubled.append(f"{key}: {how}")
        for run_id in self.run_ids:
            self.check_run(run_id, by_key)
        for w in self.workdir.glob("workers/*.log"):
            text = w.read_text(errors="replace")
            for what in ("lost the lease", "Traceback", "failed (", "unreachable", "ERROR"):
                rep.log_lines[what] += text.count(what)

    def check_run(self, run_id: str, by_key: dict[str, list[dict[str, Any]]]) -> None:
        rep = self.report
        try:
            records = self.store.load(run_id)
        except CorruptJournalError as e:
            rep.corrupt.append(f"{run_id}: {e}")
            return
        rep.records += len(records)
        if [r.seq for r in records] != list(range(1, len(records) + 1)):
            rep.corrupt.append(f"{run_id}: seqs are not 1..{len(records)}")
        summary = self.store.summary(run_id)
        status = "unknown" if summary is None else str(summary.status)
        if status == RunStatus.COMPLETED:
            rep.finished += 1
        else:
            error = summary.error if summary is not None else ""
            rep.unfinished[run_id] = status + (f" ({error})" if error else "")
        attempts = sorted(self.store.attempts(run_id), key=lambda a: a.number)
        rep.attempts += len(attempts)
        for a in attempts:
            rep.attempts_ended[a.ended or "running"] += 1
        self.check_epochs(run_id, records, attempts)
        self.check_effects(run_id, records, attempts, by_key)

    def check_epochs(self, run_id: str, records: list[Record], attempts: list[Any]) -> None:
        """Every result a worker recorded names its attempt's epoch: it must lie in that
        attempt's range of seqs, below the next attempt's first seq."""
        rep = self.report
        epochs = [a.epoch for a in attempts]
        if epochs != sorted(set(epochs)):
            rep.stale_records.append(f"{run_id}: attempt epochs not increasing: {epochs}")
        ranges: dict[int, tuple[int, float]] = {}
        for a, b in zip(attempts, [*attempts[1:], None], strict=True):
            ranges[a.epoch] = (a.first_seq, math.inf if b is None else b.first_seq)
        for r in records:
            if r.type != STEP_COMPLETED:
                continue
            epoch = result_epoch(r)
            if epoch is None:
                continue  # a human's result (reconciled done)
            if epoch not in ranges:
                rep.stale_records.append(
                    f"{run_id} seq {r.seq} {r.step}: no attempt of epoch {epoch}"
                )
                continue
            low, high = ranges[epoch]
            if not low <= r.seq < high:
                rep.stale_records.append(
                    f"{run_id} seq {r.seq} {r.step}: made at epoch {epoch}, whose attempt "
                    f"covers seqs {low}..{high if high != math.inf else 'end'}"
                )

    def check_effects(
        self,
        run_id: str,
        records: list[Record],
        attempts: list[Any],
        by_key: dict[str, list[dict[str, Any]]],
    ) -> None:
        """Every write the journal says happened is in the ledger under its key, and every
        effect that landed after a later attempt took the run over is counted."""
        rep = self.report
        first = records[0] if records else None
        completed = {r.step: r for r in records if r.type == STEP_COMPLETED}
        writes = {r.step for r in records if r.type == STEP_STARTED and r.data.get("write")}
        for step in sorted(writes):
            rep.write_steps += 1
            if step not in completed:
                continue
            key = idempotency_key(run_id, step, first)
            content = str(completed[step].data.get("content", ""))
            n = content.split(";", 1)[0].removeprefix("L")
            if not any(str(e["n"]) == n for e in by_key.get(key, [])):
                rep.lost_effects.append(f"{run_id} {step}: recorded {content!r}, not in the ledger")
        starts = sorted((a.started_at or 0.0, a.epoch) for a in attempts)
        for key, found in by_key.items():
            if not key.startswith(f"{run_id}:"):
                continue
            for e in found:
                if any(at < e["at"] and epoch > e["epoch"] for at, epoch in starts):
                    rep.landed_after_takeover += 1


def result_epoch(r: Record) -> int | None:
    """The epoch a worker's result names (``... epoch N``), None for a human's."""
    data = r.data if isinstance(r.data, dict) else {}
    text = str(data.get("content", ""))
    _, sep, tail = text.rpartition("epoch ")
    if not sep or not tail.isdigit():
        return None
    return int(tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--store", required=True, help="a FileStore directory or a postgresql:// URL")
    p.add_argument("--workers", type=int, default=4)
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--kills", type=int, default=50)
    p.add_argument("--stops", type=int, default=10)
    p.add_argument("--terminates", type=int, default=0, help="PostgreSQL only")
    p.add_argument("--restart", action="store_true", help="restart the server once (PostgreSQL)")
    p.add_argument("--lease-ttl", type=float, default=2.0)
    p.add_argument("--concurrency", type=int, default=4, help="runs at once per worker")
    p.add_argument("--fault-every", type=float, default=0.5, help="mean seconds between faults")
    p.add_argument("--stop-min", type=float, default=3.0, help="shortest SIGSTOP, seconds")
    p.add_argument("--stop-max", type=float, default=6.0, help="longest SIGSTOP, seconds")
    p.add_argument("--aim", type=float, default=0.5, help="share of faults aimed at a write")
    p.add_argument("--pace", type=float, default=0.1, help="longest sleep inside a step")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--workdir", type=Path, default=None, help="ledger and worker logs")
    p.add_argument("--timeout", type=float, default=600.0)
    p.add_argument(
        "--human",
        choices=("literal", "fenced"),
        default="literal",
        help="literal: look the key up, found: done, else retry; fenced: first make the "
        "ledger refuse every epoch the run has had (a paused holder's late write)",
    )
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    args = p.parse_args(argv)
    if not is_url(args.store) and (args.terminates or args.restart):
        print("note: --terminates and --restart apply to PostgreSQL only", file=sys.stderr)
    opts = Options(
        store=args.store,
        workers=args.workers,
        runs=args.runs,
        kills=args.kills,
        stops=args.stops,
        terminates=args.terminates,
        restart=args.restart,
        lease_ttl=args.lease_ttl,
        concurrency=args.concurrency,
        fault_every=args.fault_every,
        stop_for=(args.stop_min, args.stop_max),
        aim=args.aim,
        pace=args.pace,
        seed=args.seed,
        workdir=args.workdir,
        timeout=args.timeout,
        human=args.human,
    )
    import logging

    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("psycopg.pool").setLevel(logging.CRITICAL)  # says so at every reconnect
    logging.getLogger("durableagent").setLevel(logging.ERROR)
    chaos = Chaos(opts)
    try:
        report = chaos.run()
    finally:
        chaos.close()
    if args.json:
        print(json.dumps(report.__dict__, default=list, indent=2))
    else:
        print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())

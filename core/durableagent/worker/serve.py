"""The worker: resumes every ready run of a store, retries failed ones with bounded backoff.

A worker follows the store's change feed (``Store.changes``: a file watch, or PostgreSQL's
LISTEN/NOTIFY) so that a submitted run or a signal is picked up within a fraction of a second,
and looks at every run periodically as a safety net for missed notices.
Every resume goes through :func:`durableagent.run`, which holds the run's lease: several workers
(in one process or many) never execute the same run at once, and a busy run is simply skipped.
Failed attempts are counted in the store, shared by every worker on it (``retry.py``).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
import time
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

from ..deadlines import lapsed, next_deadline
from ..deploys import Code, code_of, made_by, pending_blocked
from ..errors import (
    DurableAgentError,
    LeaseLostError,
    RunBusyError,
    RunHalted,
    RunStopped,
    StoreUnavailableError,
)
from ..fold import RunStatus, Summary
from ..gate import PolicyGate
from ..journal import steps_still_running
from ..outcome import Outcome
from ..roster import DEFAULT_HEARTBEAT
from ..run import Config, run
from ..stores import Store
from ..stores.protocol import default_owner
from ..telemetry import configure
from ..tools.inflight import calls_in_flight
from ..tools.inflight import watch as watch_calls
from ..turns import AgentLoop
from .heartbeat import Heartbeat
from .holder import Holder, Source, is_lost
from .lapses import deny_lapsed
from .retry import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BACKOFF,
    Attempts,
    _failures_now,
    _signals,
    backoff_delay,
    mark_exhausted,
    note_failure,
    read_attempts,
    reset_attempts,
    retry_after_of,
)

log = logging.getLogger("durableagent.worker")

# `agentrun worker` exits with this when steps still ran after the grace period: the process
# ends so that their threads end with it, and the kernel frees their leases only then.
EXIT_STEPS_ABANDONED = 3
_LOOK_ONE_BY_ONE = 64  # more changed runs than this: read the summaries instead


# The statuses a worker may start an attempt of.
_MAY_RUN = frozenset({RunStatus.READY, RunStatus.FAILED, RunStatus.AWAITING_APPROVAL})


def _where(store: Store) -> str:
    return store.description


@dataclass(frozen=True)
class Agent:
    """What a worker runs: the agent (our own ``AgentConfig``, or an agent that brings its own
    loop: ``AgentLoop``, e.g. ``durableagent.integrations.pydantic_ai.durable``) and the gate
    deciding its writes. ``version`` labels its code (a release name such as ``v2026.12.03``;
    default: a short digest of its fingerprint, see :attr:`code`)."""

    config: AgentLoop
    gate: PolicyGate
    version: str = ""

    @functools.cached_property
    def code(self) -> Code:
        """The version and fingerprint every run and attempt of this agent records."""
        return code_of(self.config, self.version)


# -- the worker -----------------------------------------------------------------------------


class Worker:
    """Resumes the ``ready`` runs of ``store`` with ``agent`` and retries ``failed`` ones.

    ``concurrency`` runs execute at once. A failed run is retried after
    ``backoff * 2**(failures-1)`` seconds (at most ``max_backoff``) until it has failed
    ``max_attempts`` times; then it stays failed until a human signals it or runs
    ``agentrun retry RUN``. ``rescan`` (s) is the safety-net full look; ``grace`` (s) is how
    long in-flight steps may take to finish and record once ``stop`` is set; ``owner`` names
    this worker in leases and attempts (default ``host:pid``).

    ``agent`` may also be an async context manager that yields the Agent, or a function
    returning one: that is how an agent holds the connections its tools use (MCP servers:
    see ``mcp_tools``). ``serve()`` enters it in a task of its own and leaves it when it has
    stopped; given a function, it connects again (after ``backoff``) when the connection is
    gone, starting no run meanwhile (see ``holder.py``).

    Telemetry (SPEC §12): ``tracer_provider`` (an OpenTelemetry TracerProvider) gets a span
    per attempt and per step; without one, the standard ``OTEL_EXPORTER_OTLP_ENDPOINT``
    configures an OTLP/HTTP exporter; with neither, OpenTelemetry is never imported.
    ``capture_content`` records messages and tool arguments on the spans. ``metrics``: a
    ``durableagent.telemetry.metrics.Metrics`` (or True for a new one) that the worker's
    attempts feed (serve it with its ``serve(port)``; ``agentrun worker --metrics-port``).
    """

    def __init__(
        self,
        agent: Agent | Source[Agent],
        store: Store,
        *,
        concurrency: int = 4,
        max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        backoff: float = DEFAULT_BACKOFF,
        max_backoff: float = DEFAULT_MAX_BACKOFF,
        grace: float = 10.0,
        rescan: float = 5.0,
        owner: str | None = None,
        exit_on_abandoned: bool = True,
        tracer_provider: Any = None,
        capture_content: bool = False,
        metrics: Any = None,
        heartbeat: float = DEFAULT_HEARTBEAT,
        agent_name: str = "",
        pin: bool = False,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if backoff < 0 or max_backoff < 0 or grace < 0 or rescan <= 0:
            raise ValueError("backoff, max_backoff and grace must be >= 0, rescan > 0")
        self._agent = agent if isinstance(agent, Agent) else None
        self._holder = None
        if not isinstance(agent, Agent):
            self._holder = Holder(
                agent, check=_agent, changed=self.poke, backoff=backoff, max_backoff=max_backoff
            )
        self.store = store
        self.concurrency = concurrency
        self.max_attempts = max_attempts
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.grace = grace
        self.rescan = rescan
        self.owner = owner
        self._stopping = False
        self._running: dict[str, asyncio.Task[None]] = {}
        self._wakes: dict[str, asyncio.Event] = {}  # each running run's: its journal changed
        self._dirty: set[str] = set()
        self._scan_all = True
        self._wake = asyncio.Event()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._gave_up: set[str] = set()
        self._backlog: set[str] = set()
        # Runs not started again because a call of an earlier attempt of theirs still runs
        # in this process (a thread cannot be stopped): looked at again when it returns.
        self._calls_left: set[str] = set()
        self._denying: set[asyncio.Task[None]] = set()  # lapsed approvals being denied
        # Failures the store could not record (full, read-only), kept in memory: they must
        # still slow the retries down.
        self._seen_failures: dict[str, Attempts] = {}
        self._unreachable = 0  # attempts in a row that found the store out of reach
        self.exit_on_abandoned = exit_on_abandoned
        self.abandoned = 0  # steps still running when serve() ended (see steps_still_running)
        self.telemetry = configure(
            store, tracer_provider=tracer_provider, capture_content=capture_content, metrics=metrics
        )
        # --pin: resume only the runs this agent's version started (deploys.py); the others
        # wait for a worker of theirs: {run id: (the version it waits for, its last seq)}.
        self.pin = pin
        self._not_mine: dict[str, tuple[str, int]] = {}
        self._checked: dict[str, int] = {}  # awaiting runs checked against this code, at seq
        known = self._agent.code.version if self._agent is not None else ""
        # Its registration in the store (SPEC §11): beats every `heartbeat` seconds.
        self._registered = False
        self.heartbeat = Heartbeat(
            store,
            owner or default_owner(),
            lambda: list(self._running),
            heartbeat=heartbeat,
            agent=agent_name,
            concurrency=concurrency,
            code=known,
            pinned=pin,
            waiting=lambda: {r: v for r, (v, _) in self._not_mine.items()},
        )

    # -- public --------------------------------------------------------------------------

    def register(self) -> None:
        """Register in the store now (``serve`` does it first otherwise): OwnerInUseError when
        a live worker has this one's owner, before anything is said or served. ``agentrun
        worker`` calls it before it says it is serving."""
        self.heartbeat.register()
        self._registered = True

    async def serve(self, stop: asyncio.Event) -> None:
        """Run until ``stop`` is set, then stop gracefully: no new run or step starts, steps in
        flight get ``grace`` seconds to record their results, the rest are cancelled.
        OwnerInUseError, before anything runs, when a live worker has this one's owner."""
        if not self._registered:
            await asyncio.to_thread(self.register)
        beating = asyncio.create_task(self.heartbeat.run(stop))
        try:
            await self._serve_agent(stop)
        finally:
            beating.cancel()
            await asyncio.gather(beating, return_exceptions=True)
            await asyncio.to_thread(self.heartbeat.forget)

    async def _serve_agent(self, stop: asyncio.Event) -> None:
        if self._holder is None:
            await self._serve(stop)
            return
        try:
            await self._holder.start()  # AgentStartError: nothing has run
            await self._serve(stop)
        finally:
            await self._holder.close()

    @property
    def agent(self) -> Agent | None:
        """The Agent runs start with now (None while an agent to enter is not connected)."""
        return self._agent if self._holder is None else self._holder.value

    async def _serve(self, stop: asyncio.Event) -> None:
        self._stopping = False
        self._wake = asyncio.Event()
        self._scan_all = True
        self._wake.set()
        loop = asyncio.get_running_loop()

        def call_ended(run_id: str) -> None:  # in the call's thread
            with suppress(RuntimeError):  # the loop has closed: nothing left to start
                loop.call_soon_threadsafe(self._call_ended, run_id)

        ended = watch_calls(call_ended)
        ended.__enter__()
        watch = asyncio.create_task(self._watch(stop))
        stopped = asyncio.create_task(stop.wait())
        beating = asyncio.create_task(self.telemetry.serving())
        try:
            while not stop.is_set():
                woken = asyncio.create_task(self._wake.wait())
                await asyncio.wait([stopped, woken], return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if stop.is_set():
                    break
                self._wake.clear()
                try:
                    await self._dispatch()
                except Exception as e:  # a store hiccup must not end the worker
                    log.warning("looking at %s failed (%s); next look soon", _where(self.store), e)
        finally:
            self._stopping = True
            for handle in self._timers.values():
                handle.cancel()
            self._timers.clear()
            await self._drain()
            for t in (watch, stopped, beating):
                t.cancel()
            await asyncio.gather(watch, stopped, beating, return_exceptions=True)
            ended.__exit__(None, None, None)
            self.telemetry.close()

    def _call_ended(self, run_id: str) -> None:
        """The last call in flight of ``run_id`` in this process returned."""
        if run_id in self._calls_left:
            self._calls_left.discard(run_id)
            log.info("run %s: the call of its earlier attempt has returned", run_id)
            self.poke(run_id)

    def poke(self, run_id: str | None = None) -> None:
        """Look at ``run_id`` (or every run) again soon."""
        if run_id is None:
            self._scan_all = True
        else:
            self._dirty.add(run_id)
        self._wake.set()

    # -- finding work --------------------------------------------------------------------

    async def _watch(self, stop: asyncio.Event) -> None:
        """Mark the runs the store says changed (and every run at each rescan)."""
        try:
            async for ids in self.store.changes(rescan=self.rescan):
                if len(ids) > _LOOK_ONE_BY_ONE:
                    self._scan_all = True
                else:
                    self._dirty |= ids
                for run_id in ids & self._wakes.keys():
                    self._wakes[run_id].set()  # its attempt looks for a cancel or a pause
                self._wake.set()
        except Exception as e:  # the periodic look keeps the worker correct without it
            log.warning(
                "watching %s failed (%s); looking every %ss", _where(self.store), e, self.rescan
            )
            while not stop.is_set():
                await asyncio.sleep(self.rescan)
                self.poke()

    async def _dispatch(self) -> None:
        if self._scan_all or len(self._dirty) > _LOOK_ONE_BY_ONE:
            self._scan_all = False
            self._dirty.clear()
            looks = await asyncio.to_thread(self._look_all)
        else:
            ids = [i for i in sorted(self._dirty) if i not in self._running]
            self._dirty.clear()
            if not ids:
                return
            looks = await asyncio.to_thread(self._look, ids)
        for summary, attempts in looks:
            self._consider(summary, attempts)

    def _look_all(self) -> list[tuple[Summary, Attempts | None]]:
        """Every run that may need this worker, from the store's summaries (no journal is
        read): ready and failed ones, and those whose pending calls have a deadline."""
        wanted = (RunStatus.READY, RunStatus.FAILED)
        summaries = self.store.summaries()
        self.telemetry.listed(summaries)  # the metrics' run counts need no listing of their own
        return [
            (s, self._attempts(s.run_id) if s.status in wanted else None)
            for s in summaries
            if s.run_id not in self._running
            and (s.status in wanted or next_deadline(s.pending) is not None)
        ]

    def _look(self, ids: list[str]) -> list[tuple[Summary, Attempts | None]]:
        out = []
        for run_id in ids:
            summary = self.store.summary(run_id)
            if summary is not None:
                out.append((summary, self._attempts(run_id)))
        return out

    def _attempts(self, run_id: str) -> Attempts | None:
        """The latest failure count: the store's, or this worker's own when it is newer (the
        store could not record it)."""
        recorded = read_attempts(self.store, run_id)
        seen = self._seen_failures.get(run_id)
        if seen is not None and (recorded is None or seen.at > recorded.at):
            return seen
        return recorded

    def _consider(self, summary: Summary, attempts: Attempts | None) -> None:
        run_id = summary.run_id
        if self._stopping or run_id in self._running:
            return
        if self.pin and self._waits_for_another(summary):
            return
        if summary.status == RunStatus.AWAITING_APPROVAL:
            agent = self.agent
            if (
                agent is not None
                and self._checked.get(run_id) != summary.last_seq
                and pending_blocked(agent.code, summary.pending)
            ):
                # A human would be asked to approve what this code may not run: an attempt
                # checks the journal (deploys.verdict) and stops it as incompatible before
                # any step if so. Once per change of the run: a call the run's own code made
                # (its schema unchanged) is no deploy's doing, and stays awaiting.
                self._checked[run_id] = summary.last_seq
                self._start(run_id)
                return
            self._watch_deadlines(summary)
            return
        if summary.status not in (RunStatus.READY, RunStatus.FAILED):
            self._gave_up.discard(run_id)
            return
        failures = _failures_now(attempts, summary.signals)
        if failures >= self.max_attempts:
            if run_id not in self._gave_up:
                self._gave_up.add(run_id)
                # Off the loop (a store write); nothing waits on it.
                asyncio.get_running_loop().run_in_executor(
                    None, mark_exhausted, self.store, run_id, summary.signals
                )
                log.warning(
                    "run %s failed %d times; leaving it failed (fix the cause, then "
                    "'agentrun retry %s')",
                    run_id,
                    failures,
                    run_id,
                )
            return
        self._gave_up.discard(run_id)
        if failures and attempts is not None:
            due = attempts.at + backoff_delay(
                failures, self.backoff, self.max_backoff, attempts.retry_after
            )
            wait = due - time.time()
            if wait > 0:
                if run_id not in self._timers:
                    self._timers[run_id] = asyncio.get_running_loop().call_later(
                        wait, self._due, run_id
                    )
                return
        if self.agent is None:
            return  # not connected: every run is looked at again once it is
        if self._call_in_flight(run_id):
            return
        if len(self._running) >= self.concurrency:
            self._backlog.add(run_id)  # looked at again when a slot frees
            return
        self._start(run_id)

    def _start(self, run_id: str) -> None:
        if self.agent is None or len(self._running) >= self.concurrency:
            self._backlog.add(run_id)  # looked at again when a slot frees
            return
        self._backlog.discard(run_id)
        timer = self._timers.pop(run_id, None)
        if timer is not None:
            timer.cancel()
        self._running[run_id] = asyncio.create_task(self._execute(run_id))

    def _call_in_flight(self, run_id: str) -> bool:
        """True when a call of an earlier attempt of ``run_id`` still runs in this process
        (a thread its attempt could not stop: after a SIGSTOP past the lease, a cancel that
        ended the attempt during a read): starting the run now would hold two attempts of it
        here. It is looked at again when that call returns (``_call_ended``)."""
        said = run_id in self._calls_left
        self._calls_left.add(run_id)  # first, so that a call ending now pokes it
        if not calls_in_flight(run_id):
            self._calls_left.discard(run_id)
            return False
        if not said:
            log.warning(
                "run %s: a call of an earlier attempt is still running in this worker; the "
                "run starts again once it returns",
                run_id,
            )
        return True

    def _waits_for_another(self, summary: Summary) -> bool:
        """Pinned: True when the run was started by another version (it waits for a worker
        of that version, and is listed so). Read once per change of the run."""
        run_id = summary.run_id
        seen = self._not_mine.get(run_id)
        if seen is not None and seen[1] == summary.last_seq:
            return True
        self._not_mine.pop(run_id, None)
        agent = self.agent
        if agent is None or summary.status not in _MAY_RUN:
            return False
        try:
            made = made_by(self.store.load(run_id), self.store.attempts(run_id))
        except DurableAgentError:
            return False
        if made is None or made.version == agent.code.version:
            return False  # new runs (no version yet) are every pinned worker's
        self._not_mine[run_id] = (made.version, summary.last_seq)
        log.info(
            "run %s waits for version %s (this worker is pinned to %s)",
            run_id,
            made.version,
            agent.code.version,
        )
        return True

    def _due(self, run_id: str) -> None:
        self._timers.pop(run_id, None)
        self.poke(run_id)

    # -- approval deadlines --------------------------------------------------------------

    def _watch_deadlines(self, summary: Summary) -> None:
        """Deny the pending calls whose deadline passed; look again at the next one."""
        due = next_deadline(summary.pending)
        if due is None:
            return
        run_id = summary.run_id
        wait = due - time.time()
        if wait > 0:
            if run_id not in self._timers:
                self._timers[run_id] = asyncio.get_running_loop().call_later(
                    wait, self._due, run_id
                )
            return
        calls = lapsed(summary.pending, time.time())
        task = asyncio.create_task(asyncio.to_thread(deny_lapsed, self.store, run_id, calls))
        self._denying.add(task)
        task.add_done_callback(self._denying.discard)

    # -- executing -----------------------------------------------------------------------

    async def _execute(self, run_id: str) -> None:
        agent = self.agent
        if agent is None:  # lost its connection since: looked at again once it is back
            self._running.pop(run_id, None)
            return
        config = Config(agent.config, agent.gate, self.store, agent.code)
        again = True  # look at the run again at once when this attempt ends
        wake = self._wakes[run_id] = asyncio.Event()
        try:
            outcome = await self._attempt(config, run_id, wake, agent)
        except RunBusyError:
            log.debug("run %s is busy elsewhere; skipped", run_id)
        except RunStopped:
            log.info("run %s stopped between steps for shutdown; it resumes later", run_id)
        except RunHalted as e:
            log.info("run %s: %s", run_id, e)  # a human stopped it: nothing to retry
        except LeaseLostError as e:
            log.warning("run %s: %s; leaving it to the new holder", run_id, e)
        except StoreUnavailableError as e:
            # The store's trouble, not the run's: nothing is counted against it. Look again
            # after a backoff that grows while the store stays out of reach.
            self._unreachable += 1
            delay = backoff_delay(self._unreachable, self.backoff, self.max_backoff)
            log.warning("run %s: %s; trying again in %.1fs", run_id, e, delay)
            earlier = self._timers.pop(run_id, None)
            if earlier is not None:
                earlier.cancel()
            self._timers[run_id] = asyncio.get_running_loop().call_later(delay, self._due, run_id)
            again = False
        except asyncio.CancelledError:
            log.warning("run %s cancelled after the grace period", run_id)
            raise
        except Exception as e:
            if self._holder is not None and is_lost(e):
                self._holder.lost(e)
            await asyncio.to_thread(self._count_failure, run_id, e)
        else:
            log.info("run %s: %s", run_id, outcome.status)
            self._unreachable = 0
            self._seen_failures.pop(run_id, None)
            try:
                await asyncio.to_thread(reset_attempts, self.store, run_id)
            except DurableAgentError as e:
                log.warning("run %s: cannot clear its failure count (%s)", run_id, e)
        finally:
            self._running.pop(run_id, None)
            self._wakes.pop(run_id, None)
            # The run may be ready again (a signal arrived meanwhile), and a slot is free.
            if again:
                self._dirty.add(run_id)
            self._dirty |= self._backlog
            self._backlog.clear()
            self._wake.set()

    async def _attempt(
        self, config: Config, run_id: str, wake: asyncio.Event, agent: Agent
    ) -> Outcome:
        """One ``run()`` of the run, watched by the worker's telemetry (its log fields, and
        the traces and metrics when configured)."""
        watch = self.telemetry.watch(run_id, self.owner, self.store, agent.config.model)
        try:
            outcome = await run(
                config,
                run_id,
                None,
                stop=lambda: self._stopping,
                owner=self.owner,
                wake=wake,
                observer=watch,
            )
        except BaseException as e:
            await watch.end(None, e)
            raise
        await watch.end(outcome, None)
        return outcome

    def _count_failure(self, run_id: str, error: BaseException) -> None:
        """Count a failed attempt in the store and in memory. A store that cannot record the
        count (full, read-only) is said once per failure, that is once per backoff step."""
        text = f"{type(error).__name__}: {error}"
        signals = _signals(self.store, run_id)
        failures = _failures_now(self._attempts(run_id), signals) + 1
        try:
            note_failure(self.store, run_id, error, max_attempts=self.max_attempts)
            self._seen_failures.pop(run_id, None)
        except (DurableAgentError, OSError) as e:
            self._seen_failures[run_id] = Attempts(
                failures, signals, time.time(), text, retry_after_of(error)
            )
            log.warning(
                "run %s: cannot record its failure count in the store (%s); counting in "
                "memory and retrying with backoff",
                run_id,
                e,
            )
        if failures < self.max_attempts:
            delay = backoff_delay(failures, self.backoff, self.max_backoff, retry_after_of(error))
            log.warning("run %s failed (%s); retry in %.1fs", run_id, text, delay)
        else:
            log.warning(
                "run %s failed (%s); that was attempt %d of %d", run_id, text, failures, failures
            )

    async def _drain(self) -> None:
        if self._denying:  # a deny in flight is a signal being recorded: let it land
            await asyncio.gather(*self._denying, return_exceptions=True)
        tasks = list(self._running.values())
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=self.grace)
            for t in late:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        self.abandoned = steps_still_running()
        if not self.abandoned:
            return
        # Those steps' threads go on, and their leases are kept until they end (run() keeps
        # them). Waiting would make the worker ignore its stop; releasing would let another
        # worker run the step again while it can still act. Exit: the threads die with the
        # process, and the kernel frees the leases only then.
        log.error(
            "%d step(s) still running after the %.1fs grace period; exiting the process "
            "without releasing their leases, so that no step can act twice (their runs show "
            "as indeterminate if they write: reconcile them)",
            self.abandoned,
            self.grace,
        )
        if self.exit_on_abandoned:
            for handler in logging.getLogger().handlers + log.handlers:
                with suppress(Exception):
                    handler.flush()
            sys.stderr.flush()
            os._exit(EXIT_STEPS_ABANDONED)


def _agent(value: object) -> Agent:
    if not isinstance(value, Agent):
        raise TypeError(f"the agent's context yielded {type(value).__name__}, not an Agent")
    return value


__all__ = ["EXIT_STEPS_ABANDONED", "Agent", "Worker"]

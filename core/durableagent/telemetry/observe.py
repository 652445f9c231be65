"""What a worker sees of each attempt and step, handed to the traces and the metrics.

:class:`Telemetry` is the worker's; for each run it executes it makes a :class:`RunWatch`,
which ``run()`` asks for the attempt's runner once the lease is held (:meth:`RunWatch.attempt`):
the journal itself wrapped in :class:`Observed`, a StepRunner that times each step, tells a
replayed one from one that ran, and puts the step on the log lines' fields. ``run()`` without
an observer hands the loop the bare journal: a library user who configures nothing pays
nothing. Standard library only: OpenTelemetry and prometheus_client are imported by
``traces.py`` and ``metrics.py``, which only a configured worker loads.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from ..errors import IndeterminateError, LeaseLostError, RunHalted, RunStopped
from ..fold import Summary
from ..journal import Journal
from ..messages import StepKind
from ..outcome import Outcome, Status
from ..record import RUN_STARTED, STEP_COMPLETED, Record
from ..steps import model_step, parse_step
from ..stores import Lease, Store
from ..stores.protocol import LOST, STOPPED
from ..turns import StepFn
from . import logs

if TYPE_CHECKING:
    from .metrics import Metrics
    from .traces import Traces

# The worker's decisions on each step (-v: DEBUG), on the worker's logger, each line with its
# step: replayed, ran, re-ran, recorded a human's result, failed, stopped for a human.
log = logging.getLogger("durableagent.worker")


def provider_of(model: object) -> str:
    """``gen_ai.provider.name`` for an agent's model: its ``provider`` attribute when it has
    one, else the adapter's module (``openai``, ``anthropic``), else ``durableagent``."""
    named = getattr(model, "provider", None)
    if isinstance(named, str) and named:
        return named
    module = type(model).__module__
    for known in ("openai", "anthropic"):
        if module.endswith(f".{known}") or module.startswith(f"{known}"):
            return known
    return "durableagent"


class Telemetry:
    """A worker's traces (a :class:`~durableagent.telemetry.traces.Traces`, or None) and
    metrics (a :class:`~durableagent.telemetry.metrics.Metrics`, or None). With neither it
    still puts the run, attempt, step and owner on the worker's log lines."""

    def __init__(self, traces: Traces | None = None, metrics: Metrics | None = None) -> None:
        self.traces = traces
        self.metrics = metrics

    def watch(self, run_id: str, owner: str | None, store: Store, model: object) -> RunWatch:
        """The observer of one execution of ``run_id`` (at most one attempt)."""
        logs.set_run(run_id, owner)
        return RunWatch(self, run_id, owner, store, model)

    async def serving(self) -> None:
        """While the worker serves: its ``up`` and heartbeat (a task on the worker's own
        event loop, so a stuck loop shows as a stale heartbeat)."""
        if self.metrics is None:
            return
        self.metrics.up.set(1)
        try:
            while True:
                self.metrics.heartbeat.set(time.time())
                await asyncio.sleep(1.0)
        finally:
            self.metrics.up.set(0)

    def listed(self, summaries: list[Summary]) -> None:
        """The worker listed every run's summary (its periodic look): the run counts take
        them, so that the metrics need no listing of their own."""
        if self.metrics is not None:
            self.metrics.runs.take(summaries)

    def close(self) -> None:
        """Flush the spans; shut down what this worker created (a provider it was handed is
        the caller's to shut down)."""
        if self.traces is not None:
            self.traces.close()


class RunWatch:
    """One execution of a run by a worker: ``run()`` calls :meth:`attempt` when its lease is
    held (a busy run or a completed one never gets that far), the worker :meth:`end` when
    ``run()`` returned or raised."""

    def __init__(
        self, telemetry: Telemetry, run_id: str, owner: str | None, store: Store, model: object
    ) -> None:
        self.telemetry = telemetry
        self.run_id = run_id
        self.owner = owner
        self.store = store
        self.provider = provider_of(model)
        self.journal: Journal | None = None
        self.epoch = 0
        self.span: Any = None

    def attempt(self, journal: Journal, lease: Lease) -> Observed:
        """The attempt began (the lease is ours): the runner the loop gets."""
        self.journal = journal
        self.epoch = lease.epoch
        self.owner = lease.owner
        logs.set_attempt(lease.epoch)
        traces, metrics = self.telemetry.traces, self.telemetry.metrics
        first = journal.records[0] if journal.records else None
        if traces is not None:
            self.span = traces.begin_attempt(self.run_id, first, lease.epoch, lease.owner)
        if metrics is not None:
            journal.store = metrics.timed(journal.store)
        return Observed(journal, self)

    async def end(self, outcome: Outcome | None, error: BaseException | None) -> None:
        """``run()`` returned ``outcome`` or raised ``error``."""
        if self.journal is None:
            return
        if outcome is not None and log.isEnabledFor(logging.DEBUG):
            self._log_stop(outcome)
        ended = ending(outcome, error)
        traces, metrics = self.telemetry.traces, self.telemetry.metrics
        number, took_over = self.epoch, False
        if traces is not None or metrics is not None:
            try:
                attempts = await asyncio.to_thread(self.store.attempts, self.run_id)
            except Exception:  # advisory: the attempt log is not the journal
                attempts = []
            for i, a in enumerate(attempts):
                if a.epoch == self.epoch:
                    number = a.number
                    took_over = i > 0 and attempts[i - 1].ended == LOST
        if traces is not None and self.span is not None:
            traces.end_attempt(self.span, number, ended, outcome, error)
        if metrics is not None:
            metrics.attempt_ended(self.run_id, ended, took_over)

    def _log_stop(self, outcome: Outcome) -> None:
        """-v: where the attempt stopped, and for whom, with the step it stopped at."""
        run, status = self.run_id, outcome.status
        if status == Status.AWAITING_APPROVAL:
            for p in outcome.pending:
                why = f"{p.tool} waits for a human's approval (agentrun approve {run})"
                log.debug("run %s: %s stopped for a human: %s", run, p.step, why, extra=_at(p.step))
        elif status == Status.INDETERMINATE:
            step = outcome.step
            why = f"a write with no result: a human reconciles it (agentrun reconcile {run})"
            log.debug("run %s: %s stopped for a human: %s", run, step, why, extra=_at(step))
        elif status == Status.OVER_BUDGET:
            step = outcome.step
            why = f"{outcome.error} (agentrun budget {run})"
            log.debug("run %s: %s stopped for a human: %s", run, step, why, extra=_at(step))
        elif status in (Status.CANCELLED, Status.PAUSED):
            step = outcome.step
            what = step or "its next step"
            log.debug("run %s: %s not started: %s", run, what, outcome.error, extra=_at(step))

    def step(
        self,
        name: str,
        kind: StepKind,
        start_ns: int,
        seconds: float,
        value: Any,
        outcome: str,
        info: dict[str, Any],
        error: BaseException | None,
    ) -> None:
        journal = self.journal
        assert journal is not None
        if self.telemetry.metrics is not None:
            self.telemetry.metrics.step(kind, outcome, seconds, value)
        traces = self.telemetry.traces
        if traces is not None and self.span is not None:
            started = journal.index.started.get(name)
            completed = journal.index.completed.get(name)
            recorded = (
                None if started is None else started.at,
                None if completed is None else completed.at,
            )
            call = _call_of(journal, name) if kind == StepKind.TOOL else None
            if kind == StepKind.MODEL and traces.capture_content and started is not None:
                info = info | {"input_messages": conversation(journal.records, started.seq)}
            if kind == StepKind.TOOL and outcome == "replayed":
                index = journal.index
                info = info | {
                    "recorded_class": (index.write_class(name), index.is_idempotent(name))
                }
            traces.step(
                self.span,
                name,
                kind,
                start_ns=start_ns,
                end_ns=start_ns + int(seconds * 1e9),
                replayed=outcome == "replayed",
                value=value,
                model=journal.model,
                provider=self.provider,
                call=call,
                info=info,
                recorded=recorded,
                error=error,
            )


# Raised before a step's function is called: the step did not run, nor fail.
_NOT_RUN = (IndeterminateError, RunStopped, RunHalted, LeaseLostError)


class Observed:
    """The journal as the loop's StepRunner, seen: each step timed, counted and traced (see
    :class:`RunWatch`). Anything else is the journal's own."""

    def __init__(self, journal: Journal, watch: RunWatch) -> None:
        self.journal = journal
        self._watch = watch
        t = watch.telemetry
        self._seen = t.traces is not None or t.metrics is not None  # else: log fields only

    def __getattr__(self, name: str) -> Any:
        return getattr(self.journal, name)

    @property
    def reserves(self) -> bool:
        return self.journal.reserves

    def is_recorded(self, name: str) -> bool:
        return self.journal.is_recorded(name)

    async def run_step(self, name: str, kind: StepKind, fn: StepFn, **kw: Any) -> Any:
        journal = self.journal
        verbose = log.isEnabledFor(logging.DEBUG)
        if name in journal.index.completed:  # replayed: nothing runs
            if verbose:
                run = journal.run_id
                log.debug(
                    "run %s: %s replayed (its result is in the journal)", run, name, extra=_at(name)
                )
            if not self._seen:
                return await journal.run_step(name, kind, fn, **kw)
            start_ns, t = time.time_ns(), time.monotonic()
            value = await journal.run_step(name, kind, fn, **kw)
            seconds = time.monotonic() - t
            self._watch.step(name, kind, start_ns, seconds, value, "replayed", kw, None)
            return value
        token = logs.set_step(name)
        how = _how(journal, name, kw.get("refused") is True) if verbose else ""
        if not self._seen:
            try:
                value = await journal.run_step(name, kind, fn, **kw)
            except BaseException as e:
                if verbose and not isinstance(e, (*_NOT_RUN, asyncio.CancelledError)):
                    log.debug(
                        "run %s: %s failed: %s: %s", journal.run_id, name, type(e).__name__, e
                    )
                raise
            finally:
                logs.reset(token)
            if verbose:
                log.debug("run %s: %s %s", journal.run_id, name, how, extra=_at(name))
            return value
        start_ns, t = time.time_ns(), time.monotonic()
        try:
            value = await journal.run_step(name, kind, fn, **kw)
        except BaseException as e:
            # Stopped before it ran (a halt, a lost lease, an unreconciled write), or with
            # the attempt: not a failure of the step.
            if not isinstance(e, (*_NOT_RUN, asyncio.CancelledError)):
                seconds = time.monotonic() - t
                self._watch.step(name, kind, start_ns, seconds, None, "failed", kw, e)
                if verbose:
                    log.debug(
                        "run %s: %s failed: %s: %s", journal.run_id, name, type(e).__name__, e
                    )
            raise
        finally:
            logs.reset(token)
        seconds = time.monotonic() - t
        if verbose:
            log.debug("run %s: %s %s", journal.run_id, name, how, extra=_at(name))
        self._watch.step(name, kind, start_ns, seconds, value, "ran", kw, None)
        return value


def _at(step: str) -> dict[str, Any]:
    """A log line's ``extra``: the step it is about (the log fields may have moved past it)."""
    return {"step": step or None}


def _how(journal: Journal, name: str, refused: bool) -> str:
    """What running a step that is not replayed does, said before it runs (the index then
    still holds what the journal held): ran, re-ran (and why), a human's result recorded, or
    a refused call's refusal recorded."""
    index = journal.index
    if refused:
        return "refused: not called; the refusal is recorded for the model to read"
    if name not in index.started:
        return "ran"
    if index.is_write(name):
        verdict = index.reconcile_for(name)
        if verdict is not None and verdict.outcome == "done":
            return "recorded the result a human reconciled (the write is not run again)"
        if verdict is not None:
            return "re-ran: a human reconciled its write as not done (retry)"
        return "re-ran: an idempotent write with no result, run again with its key"
    return "re-ran: a read started in an earlier attempt with no result (reads are safe to repeat)"


def _call_of(journal: Journal, name: str) -> dict[str, Any] | None:
    """The call a tool step makes, as its model step recorded it (id, name, arguments)."""
    parsed = parse_step(name)
    if parsed is None or parsed.index is None:
        return None
    asked = journal.index.completed.get(model_step(parsed.turn))
    calls = (
        asked.data.get("tool_calls") if asked is not None and isinstance(asked.data, dict) else None
    )
    if not isinstance(calls, list) or parsed.index >= len(calls):
        return None
    call = calls[parsed.index]
    return call if isinstance(call, dict) else None


def conversation(records: list[Record], before: int) -> list[Any]:
    """The messages a model step was sent (its system prompt aside), as the journal holds
    them: the run's input, then each result recorded before seq ``before``."""
    first = records[0].data if records and records[0].type == RUN_STARTED else {}
    out: list[Any] = list(first.get("input") or []) if isinstance(first, dict) else []
    calls: dict[str, dict[str, Any]] = {}
    for r in records:
        if r.seq >= before:
            break
        if r.type != STEP_COMPLETED or not isinstance(r.data, dict):
            continue
        if r.kind == StepKind.MODEL:
            out.append(r.data)
            for i, c in enumerate(r.data.get("tool_calls") or ()):
                if isinstance(c, dict):
                    calls[f"{r.step}#{i}"] = c
        else:
            parsed = parse_step(r.step)
            call = (
                {} if parsed is None else calls.get(f"{model_step(parsed.turn)}#{parsed.index}", {})
            )
            out.append(
                {
                    "role": "tool",
                    "content": r.data.get("content", ""),
                    "tool_call_id": call.get("id"),
                }
            )
    return out


def ending(outcome: Outcome | None, error: BaseException | None) -> str:
    """How an attempt ended, in ``durableagent_attempts_total{ended}``'s words: the outcome's
    status, ``stopped`` (shut down between steps, or cancelled), ``lost`` (its lease taken
    over), or ``failed``."""
    if outcome is not None:
        return str(outcome.status)
    if isinstance(error, LeaseLostError):
        return LOST
    if isinstance(error, (RunStopped, asyncio.CancelledError)):
        return STOPPED
    return "failed"

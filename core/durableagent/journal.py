"""Journal: the StepRunner that makes the loop durable by recording every step."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

from .budget import Prices, over_budget
from .control import Control, Controls, halts
from .errors import IndeterminateError, LeaseLostError, OverBudgetError, RunHalted, RunStopped
from .messages import StepKind
from .record import STEP_COMPLETED, STEP_STARTED, Record
from .step_index import (
    Reconcile,
    StepIndex,
    denial_of,
    deny_reason,
    halt_reason,
    idempotency_key,
)
from .stores import Lease, Store
from .tools import Cancelled, Result, ToolContext, reset_context, set_context
from .turns import StepFn


class _DeniedMeanwhile(Exception):
    """Internal: a deny for the call landed after the attempt loaded the journal."""

    def __init__(self, reason: str) -> None:
        self.reason = reason


# A read nobody gates records its start only with its result, unless it is still running
# after this many seconds: then on its own, so that a slow model or tool call shows as it runs.
SHOW_AFTER = 0.25

# Steps whose attempt ended (cancelled) while their function still runs: the lease guarding
# each is kept until it finishes (see Lease.keep_until).
_UNFINISHED: set[asyncio.Future[Any]] = set()


def steps_still_running() -> int:
    """How many steps of ended attempts in this process can still act (a tool thread that
    outlived its cancelled attempt). A worker that must stop while this is non-zero exits the
    process rather than let another runner start those runs."""
    return sum(1 for f in _UNFINISHED if not f.done())


class Journal:
    """Runs steps through the store: start recorded before ``fn``, result recorded before it
    is used, completed steps replayed, unrecorded writes never guessed at.

    ``stop``, when given, is asked before each new step starts; once it says True the journal
    raises RunStopped instead of starting one (steps already running finish and record).
    ``lease`` fences every append, and a lease known to be lost (taken over, or not renewed
    within its ttl) stops the run before its next step with LeaseLostError."""

    def __init__(
        self,
        store: Store,
        run_id: str,
        records: list[Record],
        *,
        stop: Callable[[], bool] | None = None,
        lease: Lease | None = None,
        prices: Prices | None = None,
        model: str = "",
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.records = records
        self.index = StepIndex(records)
        self.stop = stop
        self.lease = lease
        self.prices = prices  # what the budget's cost limit counts in (AgentConfig.prices)
        self.model = model  # the model a reservation is for (its prices)
        self.unfinished: asyncio.Future[Any] | None = None  # see steps_still_running
        # Set when a cancel or pause is heard while a step runs (ToolContext.cancelled).
        self.cancelled = Cancelled()
        self._heard: Control | None = None  # the halt the attempt's listener heard of
        self._reading: asyncio.Future[Any] | None = None  # the read in flight, to cancel
        self.calling = asyncio.Event()  # set while a step's function runs (see listen.py)
        self.calling_since = 0.0  # time.monotonic() when it began
        # Every record up to _seen is in this view (loaded, appended, or learnt of at a
        # checked append); _known holds the later ones we have, past a gap someone else filled.
        self._seen = self.last_seq
        self._known: set[int] = set()
        self._key_prefix = ""  # idempotency_key without the step: the same for every step

    @property
    def last_seq(self) -> int:
        return self.records[-1].seq if self.records else 0

    def is_recorded(self, name: str) -> bool:
        return name in self.index.completed

    @property
    def reserves(self) -> bool:
        """The run has a budget: the loop gives each model step its reservation."""
        return self.index.controls.budget.limited

    async def run_step(
        self,
        name: str,
        kind: StepKind,
        fn: StepFn,
        *,
        write: bool = False,
        marker: str | None = None,
        idempotent: bool = False,
        hint: str = "",
        classified_by: str = "",
        refused: bool = False,
        gated: bool = False,
        reserve: Callable[[], int] | None = None,
    ) -> Any:
        """Run one step durably (SPEC §3). ``marker``, for a tool call, binds it to the human
        decisions: the step is recorded under the journal's lock only if no deny for that
        marker has been recorded meanwhile; if one has, the call is refused (an error result
        the model reads), and a write or a ``gated`` read (one that needed an approval) is
        never called: their starts are recorded, checked, before they run.

        A write's start records ``idempotent`` (the external system deduplicates on the
        step's idempotency key: left unfinished, the step is run again instead of waiting for
        a human) and ``hint`` (where a human checks whether it happened); any tool step's
        start records ``classified_by`` when given (where its class came from: the MCP
        server's annotations, the caller's overrides, or the untrusted default). ``refused``:
        ``fn`` only returns the refusal (a denied or unknown call); its start records the
        gate's class and ``refused``, and travels with the refusal. ``fn`` runs with the
        step's :class:`ToolContext` current.

        A write's start is fsynced before ``fn`` runs; a gated read's is recorded before it
        (the deny re-check). A read nobody gates needs neither (an unfinished read is run
        again either way): its start travels with its result, one append and one fsync, and
        is recorded on its own only if the read is still running after ``SHOW_AFTER``
        seconds, so that a slow model or tool call shows as it runs, or if it fails, so that
        its next run is its next attempt. A deny for it that
        landed while it ran refuses its result (the read did nothing to undo).

        Controls (SPEC §10): a cancel, pause or move stops the run before a step starts
        (RunHalted), re-checked under the lock as the start is recorded; one heard while a
        read runs cancels it (:meth:`hear`). In a run with a budget every step's start is
        recorded before it runs, checked under the lock against the limits (OverBudgetError):
        a model step's start carries its reservation (``reserve()`` tokens) and is fsynced."""
        done = self.index.completed.get(name)
        if done is not None:
            return done.data
        if name in self.index.started and self.index.is_write(name):
            verdict = self.index.reconcile_for(name)
            if verdict is None:
                if not self.index.is_idempotent(name):
                    raise IndeterminateError(name)
                # Idempotent: run it again below, with the same key; the system deduplicates.
            elif verdict.outcome == "done":
                result = Result(verdict.result or "").to_dict()
                return (await self.append(Record.make(STEP_COMPLETED, name, kind, result))).data
            # "retry": run it again below; the new start makes the reconcile count no more.
        self._check_lease(name)
        if self.stop is not None and self.stop():
            raise RunStopped(name)
        self._check_halt(name)
        started: dict[str, Any] = {"write": write} if kind == StepKind.TOOL else {}
        budgeted = not refused and self.index.controls.budget.limited
        limit: tuple[str, int] | None = None
        if budgeted:
            tokens = reserve() if reserve is not None and kind == StepKind.MODEL else 0
            if kind == StepKind.MODEL:
                for_model = {"model": self.model} if self.model else {}
                started["reserve"] = {"tokens": tokens} | for_model
            limit = (kind, tokens)
            self._check_budget(name, limit, self.index.controls)
        if kind == StepKind.TOOL and write and idempotent:
            started["idempotent"] = True
        if kind == StepKind.TOOL and write and hint:
            started["hint"] = hint
        if kind == StepKind.TOOL and classified_by:
            started["classified_by"] = classified_by
        if refused:
            started["refused"] = True
            return await self._record_with_start(name, kind, started, await fn())
        start = Record.make(STEP_STARTED, name, kind, started)
        deferred = not write and not gated and not budgeted
        if not deferred:
            sync = write or (budgeted and kind == StepKind.MODEL)  # a reservation is kept
            try:
                await self.append(start, unless_denied=marker, sync=sync, starts=name, limit=limit)
            except _DeniedMeanwhile as e:
                started["refused"] = True
                refusal = Result(e.reason, is_error=True).to_dict()
                return await self._record_with_start(name, kind, started, refusal)
        if not self._key_prefix:
            first = self.records[0] if self.records else None
            self._key_prefix = idempotency_key(self.run_id, "", first)
        key = f"{self._key_prefix}{name}"
        attempt = self.index.starts.get(name, 0) + (1 if deferred else 0)
        fence = None if self.lease is None else (self.run_id, self.lease.epoch)
        token = set_context(ToolContext(self.run_id, name, attempt, key, fence, self.cancelled))
        try:
            self._check_lease(name)  # a holder that may have lost its lease calls nothing
            self.calling_since = time.monotonic()
            self.calling.set()
            value, shown = await self._call(name, fn, start if deferred else None, write)
        finally:
            self.calling.clear()
            reset_context(token)
        # The first execution returns what a replay would: the value passed through JSON.
        value = json.loads(json.dumps(value, allow_nan=False))
        completed = Record.make(STEP_COMPLETED, name, kind, value)
        if deferred and not shown:
            try:
                done_now = await self.extend([start, completed], unless_denied=marker, starts=name)
                return done_now[-1].data
            except _DeniedMeanwhile as e:
                started["refused"] = True
                refusal = Result(e.reason, is_error=True).to_dict()
                return await self._record_with_start(name, kind, started, refusal)
        # Learn what landed while the call ran (a cancel accepted during a write): the next
        # step, a model call whose start is recorded only after it, re-checks it at its start.
        return (await self._append((completed,), None, True, learn=True))[0].data

    def _check_halt(self, name: str) -> None:
        """Stop before ``name`` when a halting signal (a move, a cancel, a pause) is in this
        view or was heard of."""
        halt = self.index.halt or self._heard
        if halt is not None:
            raise RunHalted(self.run_id, halt.name, name, halt_reason(halt))

    def _check_budget(self, name: str, limit: tuple[str, int], controls: Controls) -> None:
        """Stop before ``name`` when it would break a limit of the budget."""
        kind, tokens = limit
        why = over_budget(
            controls.budget,
            controls.spend,
            step=name,
            kind=kind,
            reserve=tokens,
            model=self.model,
            started_at=controls.started_at,
            now=time.time(),
            prices=self.prices,
        )
        if why is not None:
            raise OverBudgetError(self.run_id, name, why)

    def hear(self, halt: Control) -> None:
        """A cancel, pause or move was accepted while the attempt runs (its listener heard
        of it): the read in flight is cancelled (it is unrecorded, so harmless), a write in
        flight goes on and records its result, the step's ``ToolContext.cancelled`` is set,
        and no step starts after this."""
        if self._heard is not None:
            return
        self._heard = halt
        self.cancelled.set()
        reading = self._reading
        if reading is not None and not reading.done():
            reading.cancel()

    def _check_lease(self, name: str) -> None:
        """Stop before ``name`` when the lease may be lost: taken over, or not renewed within
        its ttl by this process's own clock (no round trip: another runner may hold it now)."""
        if self.lease is not None and self.lease.lost:
            raise LeaseLostError(self.run_id, self.lease.epoch, f"before step {name}")

    async def _record_with_start(
        self, name: str, kind: StepKind, started: dict[str, Any], result: Any
    ) -> Any:
        """Record a call that runs nothing (a refusal): its start and its result together."""
        start = Record.make(STEP_STARTED, name, kind, started)
        completed = Record.make(STEP_COMPLETED, name, kind, result)
        return (await self.extend([start, completed]))[-1].data

    async def _call(
        self, name: str, fn: StepFn, deferred: Record | None, write: bool
    ) -> tuple[Any, bool]:
        """Await the step's function. A write's runs in its own task, shielded, so that
        cancelling the attempt does not pretend to stop it: a tool running in a thread goes on
        regardless, and a cancelled attempt leaves the task in ``unfinished`` for run() to
        keep the lease until it ends. A read is cancelled with the attempt.

        ``deferred``: the start of a read not recorded yet. The read is awaited in place
        (cancelling the attempt cancels it: nothing of it is recorded, and a read that goes
        on in a thread acts on nothing); its start is appended, unsynced, if it is still
        running after SHOW_AFTER seconds or if it fails. The second value says whether it
        was.

        A read (deferred or not) that :meth:`hear` cancels ends the attempt with RunHalted."""
        if deferred is None:
            return await self._call_write(name, fn, write), False
        start = deferred
        showing: list[asyncio.Future[Record]] = []

        def show() -> None:
            # Checked like any start: a halt that landed meanwhile refuses it (and so
            # cancels the read), so that no step.started ever follows an accepted cancel.
            shown = asyncio.ensure_future(self.append(start, sync=False, starts=name))
            shown.add_done_callback(self._shown)
            showing.append(shown)

        timer = asyncio.get_running_loop().call_later(SHOW_AFTER, show)
        reading = self._reading = asyncio.ensure_future(fn())
        try:
            value = await reading
        except asyncio.CancelledError:
            for f in showing:
                f.add_done_callback(_retrieve)
            me = asyncio.current_task()
            heard = self._heard
            if heard is not None and reading.cancelled() and (me is None or not me.cancelling()):
                # Cancelled by hear(), not by whoever runs the attempt: the run stops here.
                raise RunHalted(self.run_id, heard.name, name, halt_reason(heard)) from None
            raise
        except Exception:
            # The read failed (its result is not recorded): its start is, so that the next
            # attempt of it counts as the next (ToolContext.attempt) and the failure's
            # outcome is made after the journal's last record.
            # A halt that landed meanwhile refuses that start too, and ends the attempt.
            if not showing:
                shown = self.append(start, sync=False, starts=name)
                showing.append(asyncio.ensure_future(shown))
            (refused,) = await asyncio.gather(showing[0], return_exceptions=True)
            if isinstance(refused, RunHalted):
                raise refused from None
            raise
        finally:
            timer.cancel()
            self._reading = None
        if showing:
            await showing[0]  # the start is in the journal (or the attempt ends here)
        return value, bool(showing)

    def _shown(self, shown: asyncio.Future[Record]) -> None:
        """A read's start, shown while it runs, was refused by a halt: stop the read."""
        if shown.cancelled() or not isinstance(shown.exception(), RunHalted):
            return
        halt = self.index.halt
        if halt is not None:
            self.hear(halt)

    async def _call_write(self, name: str, fn: StepFn, write: bool) -> Any:
        task = asyncio.ensure_future(fn())
        if not write:
            # A gated or budgeted read: cancelling the attempt (or hear()) cancels it, as it
            # does a read whose start is deferred; nothing it did needs its lease kept.
            self._reading = task
        try:
            return await (task if not write else asyncio.shield(task))
        except asyncio.CancelledError:
            heard = self._heard
            if heard is not None and not write and task.cancelled():
                me = asyncio.current_task()
                if me is None or not me.cancelling():
                    raise RunHalted(self.run_id, heard.name, name, halt_reason(heard)) from None
            if write and not task.done():
                self.unfinished = task
                _UNFINISHED.add(task)
                task.add_done_callback(_UNFINISHED.discard)
                task.add_done_callback(_retrieve)
            raise
        finally:
            self._reading = None

    async def append(
        self,
        record: Record,
        *,
        unless_denied: str | None = None,
        sync: bool = True,
        starts: str | None = None,
        limit: tuple[str, int] | None = None,
    ) -> Record:
        """Append a record to the run's journal and to this view of it. ``unless_denied``
        refuses the append (``_DeniedMeanwhile``) when a deny for that marker is recorded,
        whether this view holds it already (learnt at an earlier step's checked append) or it
        landed since. ``starts``: the append starts that step, so a halting signal (a move, a
        cancel, a pause not resumed) that landed meanwhile refuses it (RunHalted); ``limit``
        (the step's kind and reservation) re-checks the budget with any budget signal that
        landed (OverBudgetError). Records others appended meanwhile (signals) join this view
        too."""
        return (await self._append((record,), unless_denied, sync, starts, limit))[0]

    async def extend(
        self,
        records: list[Record],
        *,
        unless_denied: str | None = None,
        sync: bool = True,
        starts: str | None = None,
    ) -> list[Record]:
        """Append records together: one write, one fsync (a read's start with its result)."""
        return await self._append(tuple(records), unless_denied, sync, starts)

    async def _append(
        self,
        records: tuple[Record, ...],
        unless_denied: str | None,
        sync: bool,
        starts: str | None = None,
        limit: tuple[str, int] | None = None,
        *,
        learn: bool = False,
    ) -> list[Record]:
        """``learn``: read what others appended meanwhile into this view (``missed``), as a
        checked append does, refusing nothing."""
        check = None
        missed: list[Record] = []
        loaded = self._seen
        if unless_denied is not None or starts is not None or learn:
            marker, known, index = unless_denied, self._known, self.index
            run_id = self.run_id

            def check(records: list[Record]) -> None:
                missed[:] = [r for r in records if r.seq not in known]
                if starts is not None:
                    controls = index.controls
                    if any(halts(r) for r in missed):
                        controls = controls.copy()
                        for r in missed:
                            controls.add(r)
                    halt = controls.halt
                    if halt is not None:
                        raise RunHalted(run_id, halt.name, starts, halt_reason(halt))
                    if limit is not None:
                        self._check_budget(starts, limit, controls)
                if marker is None:
                    return
                reason = index.denied.get(marker) or denial_of(marker, missed)
                if reason is not None:
                    raise _DeniedMeanwhile(reason)

        try:
            if len(records) == 1:
                one = self.store.append
                args: tuple[Any, ...] = (self.run_id, records[0])
                stored = [await _PLACE.run(one, args, check, self.lease, loaded, sync)]
            else:
                many = self.store.append_many
                args = (self.run_id, records)
                stored = await _PLACE.run(many, args, check, self.lease, loaded, sync)
        finally:
            if missed:
                self._learn(missed)
        self._learn(stored)
        return stored

    def _learn(self, records: list[Record]) -> None:
        """Add records to this view of the journal, in seq order."""
        for r in records:
            self._known.add(r.seq)
            self.index.add(r)
        while self._seen + 1 in self._known:  # a checked append reads only what is past this
            self._seen += 1
            self._known.discard(self._seen)
        tail = self.records[-1].seq if self.records else 0
        self.records.extend(records)
        if records[0].seq < tail:
            self.records.sort(key=lambda r: r.seq)


_T = TypeVar("_T")


class _Placement:
    """Where appends run: on the event loop itself while they are quick (a local fsync, a
    commit next door: a thread hop would cost more than the wait), in a thread for a while
    after one was slow (a loaded disk, a far or failing server), so that the loop, which a
    worker shares between its runs, its lease renewals and its change feed, stays free."""

    SLOW = 0.002  # seconds: an append slower than this moves appends to threads...
    FOR = 10.0  # ...for this long

    def __init__(self) -> None:
        self.threads_until = 0.0

    async def run(
        self,
        fn: Callable[..., _T],
        args: tuple[Any, ...],
        check: Callable[[list[Record]], None] | None,
        lease: Lease | None,
        since: int,
        sync: bool,
    ) -> _T:
        kwargs = {"check": check, "lease": lease, "since": since, "sync": sync}
        t = time.monotonic()
        if t < self.threads_until:
            return await asyncio.to_thread(fn, *args, **kwargs)
        try:
            return fn(*args, **kwargs)
        finally:
            if time.monotonic() - t > self.SLOW:
                self.threads_until = time.monotonic() + self.FOR


_PLACE = _Placement()


def _retrieve(task: asyncio.Future[Any]) -> None:
    """An abandoned step's outcome is nobody's to handle; read it so asyncio does not warn."""
    if not task.cancelled():
        task.exception()


__all__ = [  # what journal.py has always offered: the index's names are re-exported from here
    "Journal",
    "Reconcile",
    "StepIndex",
    "denial_of",
    "deny_reason",
    "halt_reason",
    "idempotency_key",
    "steps_still_running",
]

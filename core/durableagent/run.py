"""Durable runs: ``run`` executes or resumes one, ``signal`` records a human's decision."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .calls import marker_for, marker_step, requested_call
from .errors import (
    CorruptJournalError,
    DurableAgentError,
    ForkError,
    IndeterminateError,
    InputMismatchError,
    LeaseLostError,
    RunChangedError,
    RunHalted,
    RunNotFoundError,
    RunStopped,
    SignalError,
    StoreUnavailableError,
)
from .gate import PolicyGate
from .ids import check_run_id
from .journal import Journal, Reconcile, StepIndex, deny_reason
from .lineage import unfinished_fork
from .loop import AgentConfig, run_loop
from .messages import Message
from .outcome import Outcome, Status
from .record import RUN_COMPLETED, RUN_STARTED, SIGNAL, Record, signal_fields
from .stores import Lease, Store

SIGNALS = ("approve", "deny", "reconcile", "move")
HALTED = {"move": Status.MOVED}  # how an attempt a halting signal stopped ends
_PAST = {"approve": "approved", "deny": "denied"}


@dataclass(frozen=True)
class Config:
    """What a run needs: the agent, the gate deciding writes and approvals, and the store."""

    agent: AgentConfig
    gate: PolicyGate
    store: Store


async def run(
    config: Config,
    run_id: str,
    input: Sequence[Message] | None,
    *,
    stop: Callable[[], bool] | None = None,
    owner: str | None = None,
) -> Outcome:
    """Execute or resume ``run_id``. ``input`` starts a new run (or must equal the recorded
    one); None resumes a known run. Completed runs return their recorded answer.

    ``stop`` is asked before each new step: once True, the attempt ends with RunStopped
    between two steps, saves no outcome, and the run stays ready for the next attempt.
    ``owner`` names this runner in the lease and the attempt log (default ``host:pid``). The
    lease is renewed while the attempt runs; an attempt whose lease was taken over ends with
    LeaseLostError before its next step, having written nothing more."""
    check_run_id(run_id)
    store = config.store
    given = None if input is None else _as_json([m.to_dict() for m in input])
    records = await asyncio.to_thread(store.load, run_id)
    done = _check_start(run_id, records, given)
    if done is not None:
        return done
    with store.lease(run_id, owner=owner) as lease:
        renewing = asyncio.create_task(_keep_renewed(lease))
        journal: Journal | None = None
        try:
            records = await asyncio.to_thread(store.load, run_id)
            done = _check_start(run_id, records, given)
            if done is not None:
                return done
            if not records:
                started = Record.make(RUN_STARTED, data={"input": given})
                records = [await asyncio.to_thread(store.append, run_id, started, lease=lease)]
            journal = Journal(store, run_id, records, stop=stop, lease=lease)
            approved, denied = _decisions(records)
            loop_out = await run_loop(
                config.agent,
                _recorded_input(run_id, records),
                runner=journal,
                gate=config.gate,
                approved=approved,
                denied=denied,
            )
            if loop_out.message is not None:
                final = Record.make(RUN_COMPLETED, data={"message": loop_out.message.to_dict()})
                await journal.append(final)
                outcome = Outcome(Status.COMPLETED, loop_out.message, seq=journal.last_seq)
            else:
                outcome = Outcome(
                    Status.AWAITING_APPROVAL, pending=loop_out.pending, seq=journal.last_seq
                )
        except IndeterminateError as e:
            assert journal is not None
            outcome = Outcome(Status.INDETERMINATE, step=e.step, seq=journal.last_seq)
        except RunHalted as e:
            # A human's control signal stopped it before a step: the attempt ends saying so.
            if journal is None:
                raise  # found before the attempt began: nothing ran
            outcome = Outcome(HALTED[e.signal], error=str(e), seq=journal.last_seq)
        except (RunStopped, LeaseLostError, StoreUnavailableError):
            # Not a failure: the run resumes from its journal next time (stopped, or the store
            # was out of reach), or another runner has it now (lost): either way this attempt
            # has nothing to record.
            raise
        except Exception as e:
            seq = journal.last_seq if journal is not None else (records[-1].seq if records else 0)
            failed = Outcome(Status.FAILED, error=f"{type(e).__name__}: {e}", seq=seq)
            await asyncio.to_thread(store.save_outcome, run_id, failed, lease=lease)
            raise
        except BaseException:
            # Cancelled (a worker out of grace, Ctrl-C) while a step's function still runs:
            # releasing the lease now would let another runner start the run while the step
            # can still act. Keep it until the step really ends.
            if journal is not None and journal.unfinished is not None:
                lease.keep_until(journal.unfinished)
            raise
        finally:
            renewing.cancel()
        await asyncio.to_thread(store.save_outcome, run_id, outcome, lease=lease)
        return outcome


async def _keep_renewed(lease: Lease) -> None:
    """Renew the lease every third of its ttl while the attempt runs. A renewal that fails
    (the store unreachable) is tried again; the lease reports itself lost once its ttl passed
    without one, and the journal stops before its next step."""
    while True:
        await asyncio.sleep(lease.ttl / 3)
        try:
            await asyncio.to_thread(lease.renew)
        except LeaseLostError:
            return
        except (DurableAgentError, OSError):
            continue


def submit(store: Store, run_id: str, input: Sequence[Message]) -> Record:
    """Record a new run's input without executing it (a worker will pick it up). Submitting
    the same input again is harmless and returns the recorded run.started; another input for
    a known id raises InputMismatchError. Nothing is written when it raises."""
    check_run_id(run_id)
    given = _as_json([m.to_dict() for m in input])
    if not given:
        raise ValueError("a run needs at least one input message")
    existing: list[Record] = []

    def check(records: list[Record]) -> None:
        if records:
            _check_start(run_id, records, given)
            existing.append(records[0])
            raise _AlreadySubmitted

    try:
        return store.append(run_id, Record.make(RUN_STARTED, data={"input": given}), check=check)
    except _AlreadySubmitted:
        return existing[0]


class _AlreadySubmitted(Exception):
    """Internal: the same input was submitted before; refuse the append quietly."""


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value, allow_nan=False))


def _check_start(run_id: str, records: list[Record], given: Any) -> Outcome | None:
    """Refuse what must not start; return the recorded answer of a completed run."""
    if not records:
        if given is None:
            raise RunNotFoundError(run_id)
        return None
    first = records[0]
    if (
        first.type != RUN_STARTED
        or not isinstance(first.data, dict)
        or not isinstance(first.data.get("input"), list)
    ):
        raise CorruptJournalError(run_id, 1, "the first record is not run.started with an input")
    if given is not None and first.data["input"] != given:
        raise InputMismatchError(run_id)
    gap = unfinished_fork(records, run_id)
    if gap is not None:
        raise ForkError(run_id, f"run {run_id!r} cannot run: it is {gap}")
    moved = next((r for r in records if r.type == SIGNAL and _is_move(r)), None)
    if moved is not None and not any(r.type == RUN_COMPLETED for r in records):
        raise RunHalted(run_id, "move", "", f"it {_moved_text(moved)}: run it there")
    for r in reversed(records):
        if r.type == RUN_COMPLETED:
            try:
                msg = Message.from_dict(r.data.get("message"))
            except ValueError as e:
                raise CorruptJournalError(run_id, r.seq, f"bad final message: {e}") from None
            return Outcome(Status.COMPLETED, msg, seq=records[-1].seq)
    return None


def _recorded_input(run_id: str, records: list[Record]) -> list[Message]:
    try:
        return [Message.from_dict(m) for m in records[0].data["input"]]
    except ValueError as e:
        raise CorruptJournalError(run_id, 1, f"bad input message: {e}") from None


def _decisions(records: list[Record]) -> tuple[set[str], dict[str, str]]:
    """Approved markers, and denied markers with the reason the model will read."""
    approved: set[str] = set()
    denied: dict[str, str] = {}
    for r in records:
        if r.type != SIGNAL:
            continue
        name, payload, by, why = signal_fields(r)
        marker = str(payload.get("marker"))
        if name == "approve":
            approved.add(marker)
        elif name == "deny":
            denied.setdefault(marker, deny_reason(by, why))
    return approved, denied


# -- signals ---------------------------------------------------------------------------------


def signal(
    store: Store,
    run_id: str,
    name: str,
    payload: Any,
    *,
    by: str | None = None,
    reason: str | None = None,
    expect_seq: int | None = None,
) -> Record:
    """Append a human's decision to the run's journal, validated under the journal's lock.

    ``approve``/``deny`` take ``{"marker": m}``; ``reconcile`` takes a Reconcile (or its dict).
    ``expect_seq`` pins the decision to the journal the human looked at: if its last seq is
    another, RunChangedError. Anything wrong raises (RunNotFoundError, SignalError) and writes
    nothing."""
    check_run_id(run_id)
    if name not in SIGNALS:
        raise SignalError(run_id, f"unknown signal {name!r}; use one of {', '.join(SIGNALS)}")
    if isinstance(payload, Reconcile):
        payload = payload.to_dict()
    if by is not None and not isinstance(by, str):
        raise SignalError(run_id, "by must be a string")
    if by is not None and not by.strip():
        raise SignalError(run_id, "by must name someone: a decision by nobody is refused")
    if reason is not None and not isinstance(reason, str):
        raise SignalError(run_id, "reason must be a string")
    if name == "reconcile":
        step = _reconcile_step(run_id, payload)
        payload = {"step": step, "outcome": payload["outcome"], "result": payload.get("result")}
    elif name == "move":
        step = ""
        payload = {"to": _destination(run_id, payload)}
    else:
        marker = _marker(run_id, name, payload)
        step = marker_step(marker)
        payload = {"marker": marker}

    def check(records: list[Record]) -> None:
        if not records:
            raise RunNotFoundError(run_id)
        if any(r.type == RUN_COMPLETED for r in records):
            raise SignalError(run_id, f"run {run_id!r} is completed; a signal cannot change it")
        moved = next((r for r in records if r.type == SIGNAL and _is_move(r)), None)
        if moved is not None:
            raise SignalError(run_id, f"run {run_id!r} {_moved_text(moved)}; decide on it there")
        gap = unfinished_fork(records, run_id)
        if gap is not None:
            raise SignalError(run_id, f"run {run_id!r} is {gap}; decide on it after that")
        if expect_seq is not None and records[-1].seq != expect_seq:
            raise RunChangedError(run_id, expect_seq, records[-1].seq)
        index = StepIndex(records)
        if name == "reconcile":
            _check_reconcile(run_id, step, index)
        elif name == "move":
            pass  # any run not completed or moved may move
        else:
            _check_decision(run_id, name, payload["marker"], step, records, index)

    data = {"name": name, "payload": payload, "by": by, "reason": reason}
    return store.append(run_id, Record.make(SIGNAL, step, "", data), check=check)


def _destination(run_id: str, payload: Any) -> str:
    to = payload.get("to") if isinstance(payload, dict) else None
    if not isinstance(to, str) or not to.strip():
        raise SignalError(run_id, "move needs a payload {'to': 'the destination store'}")
    return to.strip()


def _is_move(r: Record) -> bool:
    return signal_fields(r)[0] == "move"


def _moved_text(r: Record) -> str:
    """``was moved to DEST by WHO at HH:MM:SS (why)``."""
    _, payload, by, why = signal_fields(r)
    when = time.strftime("%H:%M:%S", time.localtime(r.at))
    who = f" by {by}" if by else ""
    because = f" ({why})" if why else ""
    return f"was moved to {payload.get('to')}{who} at {when}{because}"


def _marker(run_id: str, name: str, payload: Any) -> str:
    marker = payload.get("marker") if isinstance(payload, dict) else None
    if not isinstance(marker, str) or "#" not in marker:
        raise SignalError(
            run_id,
            f"{name} needs a payload {{'marker': 'tool/T/I/NAME#DIGEST'}}; "
            f"copy the marker from 'agentrun show {run_id}'",
        )
    return marker


def _reconcile_step(run_id: str, payload: Any) -> str:
    if not isinstance(payload, dict) or not isinstance(payload.get("step"), str):
        raise SignalError(run_id, "reconcile needs a payload {'step', 'outcome', 'result'}")
    outcome = payload.get("outcome")
    if outcome not in ("done", "retry"):
        raise SignalError(run_id, f"reconcile outcome must be 'done' or 'retry', not {outcome!r}")
    result = payload.get("result")
    if outcome == "done" and (not isinstance(result, str) or not result.strip()):
        raise SignalError(
            run_id, "reconcile done needs the result you found (e.g. the ticket id) as text"
        )
    step: str = payload["step"]
    return step


def _check_reconcile(run_id: str, step: str, index: StepIndex) -> None:
    if step not in index.started:
        raise SignalError(
            run_id,
            f"step {step!r} of run {run_id!r} never started: only a write that started and "
            "never recorded a result can be reconciled",
        )
    if step in index.completed:
        raise SignalError(run_id, f"step {step!r} already has a result; nothing to reconcile")
    if not index.is_write(step):
        raise SignalError(
            run_id, f"step {step!r} is a read: it is re-run on the next attempt, no human needed"
        )
    prior = index.reconcile_for(step)
    if prior is not None:
        raise SignalError(
            run_id,
            f"step {step!r} was already reconciled ({prior.outcome}); "
            "wait for the run to resume before deciding again",
        )


def _check_decision(
    run_id: str, name: str, marker: str, step: str, records: list[Record], index: StepIndex
) -> None:
    call_args = _requested_call(records, step)
    if call_args is None or marker_for(step, call_args) != marker:
        raise SignalError(
            run_id,
            f"run {run_id!r} has no tool call with marker {marker!r}: a marker names one call "
            f"a model step requested, with those exact arguments (see 'agentrun show {run_id}')",
        )
    if step in index.completed:
        raise SignalError(run_id, f"tool call {step!r} already has a result; nothing to {name}")
    if step in index.started:
        started = index.started[step]
        when = time.strftime("%H:%M:%S", time.localtime(started.at))
        approver = next(
            (
                signal_fields(r)[2] or "a human"
                for r in records
                if r.type == SIGNAL
                and signal_fields(r)[0] == "approve"
                and signal_fields(r)[1].get("marker") == marker
            ),
            None,
        )
        how = f" as approved by {approver}" if approver else ""
        raise SignalError(
            run_id,
            f"too late to {name}: tool call {step!r} started at {when}{how} (seq "
            f"{started.seq}); nothing was written. If it never finished, reconcile it instead",
        )
    for r in records:
        if r.type != SIGNAL:
            continue
        earlier, payload, by, _ = signal_fields(r)
        if payload.get("marker") == marker and earlier in (name, "deny"):
            raise SignalError(
                run_id,
                f"tool call {step!r} was already {_PAST[earlier]}"
                + (f" by {by}" if by else "")
                + "; nothing to change",
            )


def _requested_call(records: list[Record], step: str) -> Any:
    """The arguments of the call ``step`` names, from the model step that requested it."""
    call = requested_call(records, step)
    return None if call is None else call.arguments
    return None

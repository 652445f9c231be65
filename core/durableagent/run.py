"""Durable runs: ``run`` executes or resumes one, ``signal`` records a human's decision."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .budget import Budget
from .control import Controls
from .deadlines import with_deadlines
from .deploys import Blocker, Code, accepted_reasons, asked_of, code_of, made_by, verdict
from .errors import (
    CorruptJournalError,
    DurableAgentError,
    ForkError,
    IndeterminateError,
    InputMismatchError,
    LeaseLostError,
    RunHalted,
    RunNotFoundError,
    RunStopped,
    StoreUnavailableError,
)
from .gate import PolicyGate
from .ids import check_run_id
from .journal import Journal, deny_reason, halt_reason
from .lineage import unfinished_fork
from .listen import listen
from .messages import Message
from .outcome import Outcome, Status
from .record import RUN_COMPLETED, RUN_STARTED, SIGNAL, Record, signal_fields
from .stores import Lease, Store
from .telemetry.observe import RunWatch
from .turns import AgentLoop, Turns

# How an attempt a halting signal (or the budget) stopped ends.
HALTED = {
    "move": Status.MOVED,
    "cancel": Status.CANCELLED,
    "pause": Status.PAUSED,
    "budget": Status.OVER_BUDGET,
}


@dataclass(frozen=True)
class Config:
    """What a run needs: the agent (our own ``AgentConfig``, or an agent that brings its own
    loop: see ``AgentLoop``), the gate deciding writes and approvals, and the store."""

    agent: AgentLoop
    gate: PolicyGate
    store: Store
    # The agent's code (version and fingerprint, deploys.py); None: made from ``agent``
    # with its fingerprint's digest as the version.
    code: Code | None = None

    @property
    def code_now(self) -> Code:
        return self.code if self.code is not None else code_of(self.agent)


async def run(
    config: Config,
    run_id: str,
    input: Sequence[Message] | None,
    *,
    stop: Callable[[], bool] | None = None,
    owner: str | None = None,
    budget: Budget | None = None,
    wake: asyncio.Event | None = None,
    observer: RunWatch | None = None,
) -> Outcome:
    """Execute or resume ``run_id``. ``input`` starts a new run (or must equal the recorded
    one); None resumes a known run. Completed runs return their recorded answer. A new run's
    ``run.started`` records ``budget`` (else the agent's): a known run keeps the one it has.

    A cancel, pause or move stops the attempt before its next step (and cancels a read in
    flight: see listen.py), ending it with that status; so does a step that would break the
    budget (``over_budget``). ``wake``, set by whoever follows the store's change feed (a
    worker) when the run changed, lets the attempt hear of a control at once; without it
    the attempt looks every second while a call runs.

    ``stop`` is asked before each new step: once True, the attempt ends with RunStopped
    between two steps, saves no outcome, and the run stays ready for the next attempt.
    ``owner`` names this runner in the lease and the attempt log (default ``host:pid``). The
    lease is renewed while the attempt runs; an attempt whose lease was taken over ends with
    LeaseLostError before its next step, having written nothing more. ``observer`` (a
    worker's telemetry) is handed the attempt once the lease is held, and gives the loop the
    runner that traces and counts its steps; without one the loop gets the journal itself."""
    check_run_id(run_id)
    store = config.store
    code = config.code_now
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
                data = _started(given, budget, config.agent) | code.started(config.gate)
                started = Record.make(RUN_STARTED, data=data)
                records = [await asyncio.to_thread(store.append, run_id, started, lease=lease)]
            journal = Journal(
                store,
                run_id,
                records,
                stop=stop,
                lease=lease,
                prices=config.agent.prices,
                model=_model_name(config.agent),
            )
            runner = journal if observer is None else observer.attempt(journal, lease)
            blocked = await _blocked(store, run_id, records, code, config.gate)
            if blocked:
                # A call this code cannot take over: stop before any step, for a human.
                await _save(store, run_id, _incompatible(blocked, journal.last_seq), code, lease)
                return _incompatible(blocked, journal.last_seq, code)
            listening = asyncio.create_task(listen(store, run_id, journal, wake))
            approved, denied = _decisions(records)
            try:
                turns = Turns(
                    runner,
                    config.gate,
                    approved=approved,
                    denied=denied,
                    tools=config.agent.tools,
                    max_turns=config.agent.max_turns,
                )
                loop_out = await config.agent.run_turns(_recorded_input(run_id, records), turns)
            finally:
                listening.cancel()
            if loop_out.message is not None:
                final = Record.make(RUN_COMPLETED, data={"message": loop_out.message.to_dict()})
                await journal.append(final)
                outcome = Outcome(Status.COMPLETED, loop_out.message, seq=journal.last_seq)
            else:
                pending = with_deadlines(
                    loop_out.pending, journal.index, config.gate, config.agent.approve_within
                )
                outcome = Outcome(Status.AWAITING_APPROVAL, pending=pending, seq=journal.last_seq)
        except IndeterminateError as e:
            assert journal is not None
            outcome = Outcome(Status.INDETERMINATE, step=e.step, seq=journal.last_seq)
        except RunHalted as e:
            # A human's control signal (or the budget) stopped it before a step: the attempt
            # ends saying so.
            if journal is None:
                raise  # found before the attempt began: nothing ran
            outcome = Outcome(HALTED[e.signal], step=e.step, error=e.why, seq=journal.last_seq)
        except (RunStopped, LeaseLostError, StoreUnavailableError):
            # Not a failure: the run resumes from its journal next time (stopped, or the store
            # was out of reach), or another runner has it now (lost): either way this attempt
            # has nothing to record.
            raise
        except Exception as e:
            seq = journal.last_seq if journal is not None else (records[-1].seq if records else 0)
            failed = Outcome(Status.FAILED, error=f"{type(e).__name__}: {e}", seq=seq)
            await _save(store, run_id, failed, code, lease)
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
        outcome = _signed(outcome, code)
        await asyncio.to_thread(store.save_outcome, run_id, outcome, lease=lease)
        return outcome


def _signed(outcome: Outcome, code: Code) -> Outcome:
    """The outcome with the code that ran the attempt (the attempt log keeps it)."""
    return dataclasses.replace(outcome, version=code.version, fingerprint=code.fingerprint)


async def _save(store: Store, run_id: str, outcome: Outcome, code: Code, lease: Lease) -> None:
    await asyncio.to_thread(store.save_outcome, run_id, _signed(outcome, code), lease=lease)


async def _blocked(
    store: Store, run_id: str, records: list[Record], code: Code, gate: PolicyGate
) -> tuple[Blocker, ...]:
    """The calls of the run this code cannot take over (deploys.check), the last attempt's
    pending calls included."""
    last = await asyncio.to_thread(store.last_outcome, run_id)
    made = made_by(records)
    if made is None:  # submitted without an agent: the first attempt that said
        made = made_by(records, await asyncio.to_thread(store.attempts, run_id))
    return verdict(records, code, gate, pending=asked_of(last), made=made).blockers


def _incompatible(blocked: tuple[Blocker, ...], seq: int, code: Code | None = None) -> Outcome:
    out = Outcome(
        Status.INCOMPATIBLE,
        step=blocked[0].step,
        error="; ".join(b.line for b in blocked),
        seq=seq,
        blocked=tuple(b.to_dict() for b in blocked),
    )
    return out if code is None else _signed(out, code)


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


def submit(
    store: Store, run_id: str, input: Sequence[Message], *, budget: Budget | None = None
) -> Record:
    """Record a new run's input without executing it (a worker will pick it up), with its
    ``budget`` if given (else the worker's agent gives it its own when the run starts).
    Submitting the same input again is harmless and returns the recorded run.started; another
    input for a known id raises InputMismatchError. Nothing is written when it raises."""
    check_run_id(run_id)
    given = _as_json([m.to_dict() for m in input])
    if not given:
        raise ValueError("a run needs at least one input message")
    data: dict[str, Any] = {"input": given}
    if budget is not None and budget.limited:
        data["budget"] = budget.to_dict()
    existing: list[Record] = []

    def check(records: list[Record]) -> None:
        if records:
            _check_start(run_id, records, given)
            existing.append(records[0])
            raise _AlreadySubmitted

    try:
        return store.append(run_id, Record.make(RUN_STARTED, data=data), check=check)
    except _AlreadySubmitted:
        return existing[0]


class _AlreadySubmitted(Exception):
    """Internal: the same input was submitted before; refuse the append quietly."""


def _started(given: Any, budget: Budget | None, agent: AgentLoop) -> dict[str, Any]:
    """A new run's run.started data: its input, and its budget (the given one, else the
    agent's) when it has limits."""
    data: dict[str, Any] = {"input": given}
    chosen = budget if budget is not None else agent.budget
    if chosen is not None and chosen.limited:
        data["budget"] = chosen.to_dict()
    return data


def _model_name(agent: AgentLoop) -> str:
    """The agent's model as its prices name it (an adapter's ``model``), else ""."""
    name = getattr(agent.model, "model", None)
    return name if isinstance(name, str) else ""


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
    if not any(r.type == RUN_COMPLETED for r in records):
        controls = Controls()
        for r in records:
            if r.type == SIGNAL:
                controls.signal(r)
        halt = controls.halt
        if halt is not None:
            then = {"move": "run it there", "pause": "resume it first"}.get(halt.name)
            why = halt_reason(halt) + (f"; {then}" if then else "")
            raise RunHalted(run_id, halt.name, "", why)
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
    # A call a human accepted as changed by a deploy is answered, never run (deploys.py).
    for marker, text in accepted_reasons(records).items():
        denied.setdefault(marker, text)
    return approved, denied

"""Copying and moving runs between stores (``agentrun copy [--move]``), so that a run is live
in exactly one store.

A run that can still move (ready, waiting for a human, running) copied as it is would be live
in both stores, and workers on each would run it twice. So a plain copy takes only finished
runs (completed, cancelled: SPEC §7); ``move`` first appends a ``move`` signal to the source
run, after which no worker of the source starts an attempt or a step of it; once its lease is
free it is copied without the ``move`` record, checked, and shows as ``moved`` in the source.
A move cut short is finished by moving again: every step is safe to repeat.
"""

from __future__ import annotations

import time
from dataclasses import replace

from .errors import DurableAgentError, SignalError
from .fold import RunStatus
from .record import SIGNAL, encode_line, signal_fields
from .signals import signal
from .stores import Attempt, Store
from .stores.lines import parse_lines

# Nothing moves them any more (a cancelled run takes no signal but a reconcile, and no worker
# starts it): copied as they are.
FINISHED = frozenset({RunStatus.COMPLETED, RunStatus.CANCELLED})


class CopyError(DurableAgentError):
    """A run was not copied (nothing written to the destination); ``.run_id`` names it."""

    def __init__(self, run_id: str, message: str) -> None:
        self.run_id = run_id
        super().__init__(message)


def where(store: Store) -> str:
    """Where a store is, for messages and a move's destination (never a password)."""
    return store.description


def copy_run(
    src: Store,
    dst: Store,
    run_id: str,
    *,
    move: bool = False,
    by: str | None = None,
    reason: str | None = None,
    wait: float = 30.0,
) -> bool:
    """Copy one run from ``src`` into ``dst`` (its journal and attempts, every crc checked);
    False when ``dst`` already held exactly it. A run that is not finished is refused
    (CopyError) unless ``move``: then it is moved (see the module), waiting up to ``wait``
    seconds for an attempt in flight to stop at its next step."""
    summary = src.summary(run_id)
    if summary is None:
        raise CopyError(run_id, f"no run {run_id!r} in {where(src)}")
    to = where(dst)
    status = summary.status
    if status == RunStatus.CORRUPT:
        src.export_run(run_id)  # raises CorruptJournalError, naming the line
        raise CopyError(run_id, summary.error or f"run {run_id!r} does not load")
    if status == RunStatus.MOVED:
        moved_to = _moved_to(src, run_id)
        if moved_to != to:
            raise CopyError(run_id, f"run {run_id!r} was moved to {moved_to}, not to {to}")
    elif status not in FINISHED:
        if not move:
            raise CopyError(
                run_id,
                f"run {run_id!r} is {status}: copied, it would be live in both stores and run "
                "twice. Move it (agentrun copy --move), or copy once it has finished",
            )
        try:
            signal(src, run_id, "move", {"to": to}, by=by, reason=reason)
        except SignalError:
            # Refused: fine if it finished meanwhile, or another copy moved it there.
            fresh = src.summary(run_id)
            if fresh is None or (fresh.status not in FINISHED and _moved_to(src, run_id) != to):
                raise
    _wait_free(src, run_id, wait)
    lines = _without_moves(run_id, src.export_run(run_id))
    there = dst.export_run(run_id)
    if there and there[: len(lines)] == lines and status == RunStatus.MOVED:
        return False  # moved before (a move cut short after its copy): it went on there
    attempts = with_legacy_outcome(src, run_id, src.attempts(run_id))
    added = dst.import_run(run_id, lines, attempts)
    if added and dst.export_run(run_id) != lines:
        raise CopyError(run_id, f"run {run_id!r} did not read back from {to} as copied")
    return added


def _moved_to(store: Store, run_id: str) -> str | None:
    for r in store.load(run_id):
        if r.type == SIGNAL:
            name, payload, _, _ = signal_fields(r)
            if name == "move":
                return str(payload.get("to"))
    return None


def _wait_free(store: Store, run_id: str, wait: float) -> None:
    """Until no attempt holds the run (one in flight stops before its next step)."""
    deadline = time.monotonic() + wait
    delay = 0.05
    while store.is_leased(run_id):
        if time.monotonic() > deadline:
            holder = store.lease_holder(run_id) or {}
            raise CopyError(
                run_id,
                f"run {run_id!r} is still being executed in {where(store)} by "
                f"{holder.get('owner', 'a worker')} after {wait:g}s (a step in flight): it "
                "stops before its next step; run the same copy --move again to finish",
            )
        time.sleep(delay)
        delay = min(0.5, delay * 2)


def _without_moves(run_id: str, lines: list[bytes]) -> list[bytes]:
    """The journal as the destination takes it: without its ``move`` records (the run is not
    moved there), the records after one renumbered (a write in flight that recorded its
    result after the move), every other line byte for byte."""
    records = parse_lines(run_id, lines)
    out: list[bytes] = []
    for line, r in zip(lines, records, strict=True):
        if r.type == SIGNAL and signal_fields(r)[0] == "move":
            continue
        seq = len(out) + 1
        out.append(line if r.seq == seq else encode_line(replace(r, seq=seq), seq)[:-1])
    return out


def with_legacy_outcome(store: Store, run_id: str, attempts: list[Attempt]) -> list[Attempt]:
    """The attempts, plus the run's last outcome as an attempt of its own when no attempt
    carries it (a FileStore written before attempts were logged kept it beside them)."""
    outcome = store.last_outcome(run_id)
    if outcome is None or any(a.outcome is not None for a in attempts):
        return attempts
    epoch = max((a.epoch for a in attempts), default=0)
    legacy = Attempt(
        number=len(attempts) + 1,
        owner="",
        epoch=epoch,
        started_at=None,
        first_seq=0,
        last_seq=outcome.seq,
        ended=str(outcome.status),
        outcome=outcome,
    )
    return [*attempts, legacy]


__all__ = ["FINISHED", "CopyError", "copy_run", "where", "with_legacy_outcome"]

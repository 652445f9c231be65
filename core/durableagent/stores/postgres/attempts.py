"""The PostgresStore's attempt log: the ``attempts`` rows a lease begins and an outcome
ends (with the run's last outcome and status line), and the workers' failure counts kept on
the run's row. PostgresStore delegates to an ``AttemptLog``; ``import_run`` writes attempts
with ``attempt_args``.
"""

from __future__ import annotations

import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ...errors import StoreError
from ...fold import Fold
from ...ids import check_run_id
from ...outcome import Outcome
from ..protocol import LOST as ATTEMPT_LOST
from ..protocol import Attempt, Lease
from .append import Appender, State, one, outcome_of, row_of, state_of, summary_args
from .connector import LOST, Connector
from .lease import PgLease, fence, mark_lost
from .sql import bound as _q

OUTCOME_TRIES = 8  # stale answers before saving an outcome gives up


class AttemptLog:
    """Attempts, outcomes and failure counts for one store (its connector, its NOTIFY
    channel, and its appender, whose cached run states an outcome reads and updates)."""

    def __init__(self, db: Connector, channel: str, appender: Appender) -> None:
        self._db = db
        self._channel = channel
        self._appender = appender

    def save_outcome(self, run_id: str, outcome: Outcome, *, lease: Lease | None = None) -> None:
        """End the current attempt with ``outcome`` and update the run's summary. With
        ``lease``, a lease that is no longer current raises LeaseLostError."""
        check_run_id(run_id)
        fence(lease)
        for _ in range(OUTCOME_TRIES):
            state = self._appender.take(run_id)
            if state is None:
                state = self._current_state(run_id)
            if state.fold is None:
                state = self._appender.rebuilt(run_id, state)
            assert state.fold is not None
            args = {
                "run_id": run_id,
                "epoch": None if lease is None else lease.epoch,
                "lease": lease is not None,
                "version": state.version,
                "at": time.time(),
                "ended": str(outcome.status),
                "last_seq": outcome.seq,
                "outcome": Jsonb(outcome.to_dict()),
                "summary": Jsonb(summary_args(run_id, state.fold, outcome))
                if state.last_seq
                else None,
                "channel": self._channel,
            }
            try:
                with self._db.connection() as conn:
                    result, last_seq, version, fold, was = row_of(
                        conn.execute(*_q("end_attempt", args))
                    )
            except LOST as e:
                raise self._db.unavailable(f"saving the outcome of run {run_id!r}", e) from None
            except psycopg.Error as e:
                raise self._db.failed(f"saving the outcome of run {run_id!r}", e) from None
            if result == "ok":
                self._appender.keep(run_id, State(state.last_seq, version, state.fold, outcome))
                if isinstance(lease, PgLease):
                    lease.ended = True
                return
            if result == "lost":
                assert lease is not None
                raise mark_lost(lease)
            self._appender.keep(run_id, state_of(last_seq, version, fold, was))
        raise StoreError(f"run {run_id!r} kept changing; its outcome was not saved")

    def _current_state(self, run_id: str) -> State:
        args = {"run_id": run_id}
        got = self._db.read("reading a run", lambda c: c.execute(*_q("state", args)).fetchone())
        return State(0, 0, Fold(), None) if got is None else state_of(*got)

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome (None when there is none or it does not parse)."""
        args = {"run_id": check_run_id(run_id)}
        got = self._db.read(
            "reading a run", lambda c: c.execute(*_q("last_outcome", args)).fetchone()
        )
        return None if got is None else outcome_of(got[0])

    def attempts(self, run_id: str) -> list[Attempt]:
        """Every attempt of the run, oldest first; one that never said how it ended and no
        longer holds the lease is ``lost``."""
        args = {"run_id": check_run_id(run_id)}
        rows = self._db.read(
            "reading attempts", lambda c: c.execute(*_q("attempts", args)).fetchall()
        )
        out = []
        for number, owner, epoch, started, first, ended_at, last, ended, outcome, holder in rows:
            if ended is None and epoch != holder:
                ended = ATTEMPT_LOST
            out.append(
                Attempt(
                    number=number,
                    owner=owner,
                    epoch=epoch,
                    started_at=started,
                    first_seq=first,
                    ended_at=ended_at,
                    last_seq=last,
                    ended=ended,
                    outcome=outcome_of(outcome),
                )
            )
        return out

    # -- the workers' failure counts -----------------------------------------------------

    def read_failures(self, run_id: str) -> dict[str, Any] | None:
        """The workers' shared failure bookkeeping of the run, or None."""
        args = {"run_id": check_run_id(run_id)}
        got = self._db.read(
            "reading failures", lambda c: c.execute(*_q("read_failures", args)).fetchone()
        )
        value = None if got is None else got[0]
        return value if isinstance(value, dict) else None

    def write_failures(self, run_id: str, failures: dict[str, Any]) -> None:
        """Replace the run's failure bookkeeping."""
        self._set_failures(run_id, Jsonb(failures))

    def clear_failures(self, run_id: str) -> bool:
        """Forget the run's failures; True when there were some."""
        return self._set_failures(run_id, None)

    def _set_failures(self, run_id: str, failures: Jsonb | None) -> bool:
        args = {"run_id": check_run_id(run_id), "failures": failures, "channel": self._channel}
        return bool(
            self._db.read("recording failures", lambda c: one(c.execute(*_q("set_failures", args))))
        )


# -- helpers ----------------------------------------------------------------------------------


def attempt_args(run_id: str, a: Attempt) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "number": a.number,
        "owner": a.owner,
        "epoch": a.epoch,
        "started_at": a.started_at,
        "first_seq": a.first_seq,
        "ended_at": a.ended_at,
        "last_seq": a.last_seq,
        # An attempt that never said how it ended stays silent: here too it reads as lost.
        "ended": None if a.ended == ATTEMPT_LOST else a.ended,
        "outcome": None if a.outcome is None else Jsonb(a.outcome.to_dict()),
    }

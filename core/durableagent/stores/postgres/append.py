"""Appending to a run's journal in PostgreSQL: the record, the run's status fold and its
status line, in one transaction on the run's row lock (fenced on the lease's epoch, NOTIFY,
commit).

Without a ``check`` it is one statement, so one round trip: this process computes the line,
the fold and the status line from the run's state as it last saw it (it appended to the run,
or took its lease), and the statement lands only if that is still the run's state. Otherwise
(and with a ``check``) two round trips: BEGIN, lock the row and read the records; check; then
the append and COMMIT. A connection lost mid-append is found out: the append is looked for
under the run's lock on a new connection, and made again only if it did not land.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from ...errors import StoreError, StoreUnavailableError
from ...fold import Fold, summarize
from ...ids import check_run_id
from ...outcome import Outcome
from ...record import Record, encode_line
from ..lines import parse_lines
from ..protocol import Check, Lease
from .connector import LOST, Connection, Connector
from .lease import fence, mark_lost
from .sql import QUERIES
from .sql import bound as _q

log = logging.getLogger("durableagent.stores.postgres")

RECOVER_S = 10.0  # how long an append in doubt keeps trying to learn whether it landed
_STATES = 4096  # runs whose state this process keeps, to append in one round trip
dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass
class State:
    """What an append is computed from: the run's last seq, its row version, the status fold
    of its journal (None: to rebuild from the records) and its last outcome."""

    last_seq: int
    version: int
    fold: Fold | None
    outcome: Outcome | None


def state_of(last_seq: int, version: int, fold: Any, outcome: Any) -> State:
    f = None
    if isinstance(fold, str):
        try:
            f = Fold.from_json(json.loads(fold))
        except (KeyError, TypeError, ValueError, AttributeError):
            f = None
    elif last_seq == 0:
        f = Fold()
    return State(last_seq, version, f, outcome_of(outcome))


def outcome_of(value: Any) -> Outcome | None:
    if not isinstance(value, dict):
        return None
    try:
        return Outcome.from_dict(value)
    except (KeyError, TypeError, ValueError):
        return None


@dataclass
class _Pending:
    """An append sent, its answer not read yet."""

    cursor: psycopg.Cursor[Any]
    stored: list[Record]
    state: State  # the run's state once it lands (its version comes with the answer)


class Appender:
    """Appends for one store, and keeps the state of the runs this process appended to (or
    took the lease of), so that the next append to each is one round trip."""

    def __init__(self, db: Connector, channel: str, description: str) -> None:
        self._db = db
        self._channel = channel
        self._description = description
        self._states: OrderedDict[str, State] = OrderedDict()
        self._states_lock = threading.Lock()
        self._queries: dict[bool, str] = {}

    def append(
        self,
        run_id: str,
        records: tuple[Record, ...],
        *,
        check: Check | None = None,
        lease: Lease | None = None,
        since: int = 0,
        sync: bool = True,
    ) -> list[Record]:
        """Append ``record`` with the next seq; durable when it returns (``sync=False``: the
        commit does not wait for the disk; the next synced commit covers it).

        ``check(records)`` gets the records with seq > ``since`` under the run's row lock and
        may raise to refuse the append (nothing written). ``lease`` fences the append: an
        epoch that no longer holds the run's lease raises LeaseLostError, nothing written.
        A connection lost mid-append is found out: the append is looked for under the run's
        lock on a new connection, and made again only if it did not land."""
        check_run_id(run_id)
        fence(lease)
        deadline = time.monotonic() + RECOVER_S
        while True:
            sent: list[tuple[int, bytes]] = []  # the last (seq, line) a lost connection may hold
            try:
                return self._append_optimistic(run_id, records, check, lease, since, sync, sent)
            except LOST as e:
                self.forget(run_id)
                stored = self._landed(run_id, records, sent, deadline, e)
                if stored is not None:
                    return stored
                if time.monotonic() > deadline:
                    raise self._db.unavailable(f"appending to run {run_id!r}", e) from None
            except psycopg.Error as e:
                self.forget(run_id)
                raise self._db.failed(f"an append to run {run_id!r}", e) from None

    def _append_optimistic(
        self,
        run_id: str,
        records: tuple[Record, ...],
        check: Check | None,
        lease: Lease | None,
        since: int,
        sync: bool,
        sent: list[tuple[int, bytes]],
    ) -> list[Record]:
        """One round trip when this process knows the run's state (it appended to it, or took
        its lease) and nobody moved it since; otherwise under the lock. A ``check`` whose
        caller has seen every record this process knows of gets no records: the statement
        lands only if nobody appended since, and then there were none (if somebody did, the
        append is made under the lock, and the check gets theirs)."""
        state = self.take(run_id)
        if (
            state is not None
            and state.fold is not None
            and (check is None or state.last_seq == since)
        ):
            try:
                if check is not None:
                    check([])
            except Exception:
                # Refused on no records: let the check decide under the lock, on the
                # records there are then (it may be waiting for one to land).
                self.keep(run_id, state)
            else:
                with self._db.connection() as conn:
                    pending = self._send(conn, run_id, records, state, lease, sync, sent)
                    if self._settle(run_id, pending, sent):
                        return pending.stored
        elif state is not None:
            self.keep(run_id, state)
        return self._append_locked(run_id, records, check, lease, since, sync, sent)

    def _append_locked(
        self,
        run_id: str,
        records: tuple[Record, ...],
        check: Check | None,
        lease: Lease | None,
        since: int,
        sync: bool,
        sent: list[tuple[int, bytes]],
    ) -> list[Record]:
        """Two round trips: BEGIN, lock the run's row (made if new) and read the records
        after ``since``; check; then the append and COMMIT."""
        with self._db.connection() as conn:
            try:
                with conn.pipeline() as pipeline:
                    conn.execute(*_q("begin"))
                    cur = conn.execute(*_q("lock_state", {"run_id": run_id}))
                    got = None
                    if check is not None:
                        args = {"run_id": run_id, "after": since}
                        got = conn.cursor(binary=True).execute(*_q("load_since", args))
                    pipeline.sync()
                    last_seq, version, fold, outcome, holder = row_of(cur)
                    if got is not None and check is not None:
                        lines = [bytes(r[0]) for r in got.fetchall()]
                        check(parse_lines(run_id, lines, since + 1, since + 1))
                    if lease is not None and holder != lease.epoch:
                        raise mark_lost(lease)
                    state = self.take(run_id)
                    if state is None or (state.last_seq, state.version) != (last_seq, version):
                        state = state_of(last_seq, version, fold, outcome)
                    if state.fold is None:
                        every = lines_of(conn, "load", {"run_id": run_id})
                        state.fold = fold_of(parse_lines(run_id, every))
                    pending = self._send(conn, run_id, records, state, lease, sync, sent)
                    conn.execute(*_q("commit"))
                # Leaving the pipeline sent them and read the answers: the second round trip.
            except BaseException:
                if not conn.broken and conn.info.transaction_status != TransactionStatus.IDLE:
                    conn.execute(*_q("rollback"))
                raise
            if not self._settle(run_id, pending, sent):
                raise StoreError(f"run {run_id!r} changed under its own row lock")
        return pending.stored

    def _send(
        self,
        conn: Connection,
        run_id: str,
        records: tuple[Record, ...],
        state: State,
        lease: Lease | None,
        sync: bool,
        sent: list[tuple[int, bytes]],
    ) -> _Pending:
        """Send the append computed from ``state`` (which this call consumes); its answer is
        read by ``_settle`` (in a pipeline, after the commit went with it)."""
        assert state.fold is not None
        first = state.last_seq + 1
        stored = [
            Record(seq, r.type, r.step, r.kind, r.data, r.at)
            for seq, r in enumerate(records, first)
        ]
        lines = [encode(r, seq) for seq, r in enumerate(records, first)]
        fold = state.fold
        for r in stored:
            fold.add(r)
        last = stored[-1].seq
        args = {
            "run_id": run_id,
            "first": first,
            "last": last,
            "seqs": list(range(first, last + 1)),
            "lines": lines,
            "epoch": None if lease is None else lease.epoch,
            "version": state.version,
            "fold": dumps(fold.to_json()),
            "channel": self._channel,
            **summary_args(run_id, fold, state.outcome),
        }
        sent[:] = [(last, lines[-1])]
        cur = conn.execute(self._query(conn, sync), QUERIES["append"].bind(args))
        return _Pending(cur, stored, State(last, 0, fold, state.outcome))

    def _query(self, conn: Connection, sync: bool) -> str:
        query = self._queries.get(sync)
        if query is None:
            commit = sql.SQL("NULL" if sync else QUERIES["async_commit"].sql)
            query = sql.SQL(QUERIES["append"].sql).format(commit=commit).as_string(conn)
            self._queries[sync] = query
        return query

    def _settle(self, run_id: str, p: _Pending, sent: list[tuple[int, bytes]]) -> bool:
        """Read an append's answer: True when it landed (the run's new state is kept)."""
        row = p.cursor.fetchone()
        if row is None or row[0] is None:
            sent.clear()
            return False
        p.state.version = row[0]
        self.keep(run_id, p.state)
        return True

    def _landed(
        self,
        run_id: str,
        records: tuple[Record, ...],
        sent: list[tuple[int, bytes]],
        deadline: float,
        error: BaseException,
    ) -> list[Record] | None:
        """After a lost connection: the stored records if the append in flight landed (its
        last line is there: it was one transaction), None if it did not (append again). Waits
        for the server until ``deadline``."""
        delay = 0.05
        while True:
            self._db.recheck()
            try:
                if not sent:
                    with self._db.connection() as conn:
                        conn.execute("SELECT 1")
                    return None
                seq, line = sent[0]
                with self._db.connection() as conn, conn.transaction():
                    conn.execute(*_q("lock_row", {"run_id": run_id}))
                    cur = conn.cursor(binary=True)
                    row = cur.execute(*_q("line_at", {"run_id": run_id, "seq": seq}))
                    found = row.fetchone()
                if found is not None and bytes(found[0]) == line:
                    first = seq - len(records) + 1
                    return [
                        Record(n, r.type, r.step, r.kind, r.data, r.at)
                        for n, r in enumerate(records, first)
                    ]
                return None
            except LOST as e:
                error = e
            if time.monotonic() > deadline:
                raise StoreUnavailableError(
                    f"lost PostgreSQL at {self._description} while appending to run "
                    f"{run_id!r} ({self._db.why(error)}); whether the record landed is known "
                    "once the server is back: the run is reloaded on its next attempt"
                ) from None
            log.warning("PostgreSQL at %s unreachable (%s); retrying", self._description, error)
            time.sleep(delay)
            delay = min(1.0, delay * 2)

    def rebuilt(self, run_id: str, state: State) -> State:
        """``state`` with its fold rebuilt from the journal (the row had none)."""
        records = self._db.read("loading a run", lambda c: lines_of(c, "load", {"run_id": run_id}))
        state.fold = fold_of(parse_lines(run_id, records))
        return state

    # -- the per-run state cache ----------------------------------------------------------

    def take(self, run_id: str) -> State | None:
        """The run's cached state, removed from the cache (its user owns it now)."""
        with self._states_lock:
            return self._states.pop(run_id, None)

    def keep(self, run_id: str, state: State) -> None:
        with self._states_lock:
            self._states[run_id] = state
            while len(self._states) > _STATES:
                self._states.popitem(last=False)

    def forget(self, run_id: str) -> None:
        with self._states_lock:
            self._states.pop(run_id, None)


# -- helpers ----------------------------------------------------------------------------------


def row_of(cur: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    row = cur.fetchone()
    if row is None:
        raise StoreError("PostgreSQL answered nothing where a row was due")
    return tuple(row)


def one(cur: psycopg.Cursor[Any]) -> Any:
    row = cur.fetchone()
    return None if row is None else row[0]


def lines_of(conn: Connection, name: str, args: dict[str, Any]) -> list[bytes]:
    """The journal lines a named query selects (binary: the bytes as stored)."""
    cur = conn.cursor(binary=True)
    return [bytes(r[0]) for r in cur.execute(*_q(name, args)).fetchall()]


def fold_of(records: list[Record]) -> Fold:
    f = Fold()
    for r in records:
        f.add(r)
    return f


def summary_args(run_id: str, fold: Fold, outcome: Outcome | None) -> dict[str, Any]:
    """The run's status line as the ``runs`` columns hold it: as if the lease were free."""
    s = summarize(run_id, fold, outcome)
    return {
        "status": str(s.status),
        "steps": s.steps,
        "model_calls": s.model_calls,
        "started_at": s.started_at,
        "last_activity": s.last_activity,
        "waiting_on": s.waiting_on,
        "error": s.error,
        "answer": s.answer,
        "pending": dumps([p.to_dict() for p in s.pending]) if s.pending else None,
        "indeterminate": s.indeterminate,
        "signals": s.signals,
        "forked_from": None if s.forked_from is None else dumps(s.forked_from.to_dict()),
        "controls": s.controls or None,
    }


def encode(record: Record, seq: int) -> bytes:
    try:
        return encode_line(record, seq)[:-1]
    except ValueError as e:
        raise StoreError(f"cannot record {record.type} {record.step!r}: {e}") from None

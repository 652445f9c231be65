"""PostgresStore: runs in PostgreSQL, shared by workers and supervisors on many hosts.

Tables (``sql/schema.sql``, in the store's schema): ``runs`` (a row per run: the journal's
tip, its status fold and summary, the last outcome, the lease, the failure bookkeeping),
``records`` (each journal line exactly as the FileStore writes it), ``attempts`` and
``schema_version``. Queries are named in ``sql/queries.sql``; connections come from
``pg_connector.py``.

An append is one transaction on the run's row lock: fence on the lease epoch, insert seq =
last + 1, update the summary, NOTIFY, commit. Without a ``check`` it is one round trip: this
process computes the line, the fold and the summary from the run's state as it last saw it,
and the ``append_record`` function writes them only if that state is still the run's
(otherwise it answers with the current state, and the append is computed again). With a
``check``, two: lock and read the records, check, then write and commit.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus
from psycopg.types.json import Jsonb

from ..errors import (
    DurableAgentError,
    LeaseLostError,
    RunBusyError,
    RunConflictError,
    StoreError,
    StoreUnavailableError,
)
from ..fold import Fold, RunStatus, Summary, corrupt_summary, summarize
from ..gate import Pending
from ..ids import check_run_id, valid_run_id
from ..outcome import Outcome
from ..record import Record, encode_line
from .lines import parse_lines
from .pg_connector import (
    LOST,
    Connection,
    Connector,
    Session,
    Target,
    channel_of,
    check_schema_name,
    describe,
    parse_url,
)
from .protocol import LOST as ATTEMPT_LOST
from .protocol import Attempt, Check, Lease, default_owner
from .sql import QUERIES, SCHEMA_VERSION, migrations, schema_sql
from .sql import bound as _q

log = logging.getLogger("durableagent.stores.postgres")

DEFAULT_SCHEMA = "durableagent"
DEFAULT_TTL = 30.0
RECOVER_S = 10.0  # how long an append in doubt keeps trying to learn whether it landed
_STATES = 4096  # runs whose state this process keeps, to append in one round trip
_OUTCOME_TRIES = 8  # stale answers before saving an outcome gives up
_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass
class _State:
    """What an append is computed from: the run's last seq, its row version, the status fold
    of its journal (None: to rebuild from the records) and its last outcome."""

    last_seq: int
    version: int
    fold: Fold | None
    outcome: Outcome | None


def _state_of(last_seq: int, version: int, fold: Any, outcome: Any) -> _State:
    f = None
    if isinstance(fold, str):
        try:
            f = Fold.from_json(json.loads(fold))
        except (KeyError, TypeError, ValueError, AttributeError):
            f = None
    elif last_seq == 0:
        f = Fold()
    return _State(last_seq, version, f, _outcome(outcome))


def _outcome(value: Any) -> Outcome | None:
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
    stored: Record
    state: _State  # the run's state once it lands (its version comes with the answer)


class PgLease:
    """A held PostgresStore lease: the run row names this holder, its epoch, an expiry and
    this store's session token. ``renew`` pushes the expiry on; once another runner took the
    run over (after the expiry, or once this process's session was gone), appends and
    renewals carrying this epoch raise LeaseLostError."""

    def __init__(
        self, store: PostgresStore, run_id: str, owner: str, epoch: int, ttl: float, at: float
    ) -> None:
        self.run_id = run_id
        self.owner = owner
        self.epoch = epoch
        self.ttl = ttl
        self._store = store
        self._renewed = at  # monotonic, taken before the request that took or renewed it
        self.lost_for_sure = False
        self.kept = False
        self.ended = False  # an outcome was saved for this attempt
        self._released = False

    def __repr__(self) -> str:
        return f"PgLease({self.run_id!r}, owner={self.owner!r}, epoch={self.epoch})"

    @property
    def lost(self) -> bool:
        """Known taken over, or not renewed within its ttl (another runner may take it)."""
        return self.lost_for_sure or time.monotonic() - self._renewed > self.ttl

    def renew(self) -> None:
        at = time.monotonic()
        self._store._renew(self)
        self._renewed = at

    def keep_until(self, step: asyncio.Future[Any]) -> None:
        self.kept = True
        step.add_done_callback(lambda _: self.release())

    def release(self) -> None:
        """Free the lease (idempotent), ending its attempt ``stopped`` unless it ended. A
        lease taken over is the new holder's: it is left alone."""
        if self._released:
            return
        self._released = True
        if self.lost_for_sure:
            return
        try:
            self._store._release(self)
        except DurableAgentError as e:  # it expires, or frees with this process's session
            log.warning("could not release the lease of run %s: %s", self.run_id, e)


class PostgresStore:
    """Runs in PostgreSQL (see the module docstring). ``dsn``: a libpq URL or key=value
    string; ``schema``: where the store's tables live (created on first use unless
    ``create=False``); ``lease_ttl``: seconds a lease holder may go without renewing before
    another runner may take the run over. ``allow_async_commit=True`` accepts a session
    whose ``synchronous_commit`` is off (an append may then return before it is on disk)."""

    def __init__(
        self,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        lease_ttl: float = DEFAULT_TTL,
        create: bool = True,
        allow_async_commit: bool = False,
        pool_size: int = 8,
    ) -> None:
        if lease_ttl <= 0:
            raise ValueError("lease_ttl must be > 0")
        self.schema = check_schema_name(schema)
        self.lease_ttl = lease_ttl
        self._description = describe(dsn, schema)
        self._db = Connector(
            Target(dsn, schema, allow_async_commit), self._description, pool_size=pool_size
        )
        self._channel = channel_of(schema)
        self._states: OrderedDict[str, _State] = OrderedDict()
        self._states_lock = threading.Lock()
        self._append_queries: dict[bool, str] = {}
        conn = self._db.connect()
        try:
            self._open(conn, create)
            self._db.configure(conn)
        except BaseException:
            conn.close()
            raise
        self._session = Session(self._db)
        self._session.adopt(conn)  # the first connection holds this store's leases alive

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        create: bool = True,
        lease_ttl: float = DEFAULT_TTL,
        allow_async_commit: bool = False,
    ) -> PostgresStore:
        """The store a ``postgresql://`` URL names. Its ``schema`` and
        ``allow_async_commit`` query parameters are ours, removed before connecting."""
        dsn, schema, allow = parse_url(url)
        return cls(
            dsn,
            schema=schema if schema is not None else DEFAULT_SCHEMA,
            lease_ttl=lease_ttl,
            create=create,
            allow_async_commit=allow_async_commit if allow is None else allow,
        )

    def __repr__(self) -> str:
        return f"PostgresStore({self._description!r})"

    @property
    def description(self) -> str:
        """Where the store is, for messages: its URL without the password, with the schema."""
        return self._description

    def close(self) -> None:
        """Close every connection (leases still held end with their session)."""
        self._session.close()
        self._db.close()

    # -- the schema --------------------------------------------------------------------------

    def _open(self, conn: Connection, create: bool) -> None:
        """Check the store's schema version; create the schema (or bring it up to date) when
        allowed. Serialised between processes by an advisory lock."""
        name = {"schema": self.schema}
        ident = sql.Identifier(self.schema)
        try:
            with conn.transaction():
                conn.execute(*_q("create_lock", name))
                exists = _one(conn.execute(*_q("schema_exists", name)))
                ours = exists and _one(conn.execute(*_q("has_version", name)))
                if not ours:
                    if not create:
                        raise StoreError(
                            f"no store at {self._description}: check the URL and its ?schema=, "
                            "or submit a run to create it"
                        )
                    if exists and _one(conn.execute(*_q("schema_tables", name))):
                        raise StoreError(
                            f"schema {self.schema!r} of {self._description} holds tables that "
                            "are not a durableagent store: pick another ?schema="
                        )
                    conn.execute(_ddl("create_schema", ident))
                    conn.execute(_ddl("use_schema", ident))
                    conn.execute(schema_sql().encode())
                    return
                version = _one(conn.execute(_ddl("read_version", ident))) or 0
                if version > SCHEMA_VERSION:
                    raise StoreError(
                        f"the store at {self._description} has schema version {version}, made "
                        f"by a newer durableagent (this one knows up to {SCHEMA_VERSION}): "
                        "upgrade durableagent"
                    )
                pending = migrations(version)
                if pending:
                    conn.execute(_ddl("use_schema", ident))
                for _, text in pending:
                    conn.execute(text.encode())
        except psycopg.Error as e:
            if isinstance(e, LOST):
                raise self._db.unavailable("opening the store", e) from None
            raise self._db.failed("opening the store", e) from None

    # -- reading -----------------------------------------------------------------------------

    def load(self, run_id: str) -> list[Record]:
        """Every record of the run, [] for an unknown run."""
        args = {"run_id": check_run_id(run_id)}
        rows = self._db.read("loading a run", lambda c: _lines(c, "load", args))
        return parse_lines(run_id, rows)

    def load_since(self, run_id: str, after_seq: int) -> list[Record]:
        """The records with seq > ``after_seq``."""
        args = {"run_id": check_run_id(run_id), "after": after_seq}
        rows = self._db.read("loading a run", lambda c: _lines(c, "load_since", args))
        return parse_lines(run_id, rows, after_seq + 1, after_seq + 1)

    def run_ids(self) -> list[str]:
        """Every run (a run has at least one record), sorted."""
        rows = self._db.read("listing runs", lambda c: c.execute(*_q("run_ids")).fetchall())
        return [r[0] for r in rows]

    # -- appending ---------------------------------------------------------------------------

    def append(
        self,
        run_id: str,
        record: Record,
        *,
        check: Check | None = None,
        lease: Lease | None = None,
        since: int = 0,
        sync: bool = True,
    ) -> Record:
        """Append ``record`` with the next seq; durable when it returns (``sync=False``: the
        commit does not wait for the disk; the next synced commit covers it).

        ``check(records)`` gets the records with seq > ``since`` under the run's row lock and
        may raise to refuse the append (nothing written). ``lease`` fences the append: an
        epoch that no longer holds the run's lease raises LeaseLostError, nothing written.
        A connection lost mid-append is found out: the append is looked for under the run's
        lock on a new connection, and made again only if it did not land."""
        check_run_id(run_id)
        _fence(lease)
        deadline = time.monotonic() + RECOVER_S
        while True:
            sent: list[tuple[int, bytes]] = []  # the (seq, line) a lost connection may hold
            try:
                if check is None:
                    return self._append_optimistic(run_id, record, lease, sync, sent)
                return self._append_locked(run_id, record, check, lease, since, sync, sent)
            except LOST as e:
                self._forget(run_id)
                stored = self._landed(run_id, record, sent, deadline, e)
                if stored is not None:
                    return stored
                if time.monotonic() > deadline:
                    raise self._db.unavailable(f"appending to run {run_id!r}", e) from None
            except psycopg.Error as e:
                self._forget(run_id)
                raise self._db.failed(f"an append to run {run_id!r}", e) from None

    def _append_optimistic(
        self,
        run_id: str,
        record: Record,
        lease: Lease | None,
        sync: bool,
        sent: list[tuple[int, bytes]],
    ) -> Record:
        """One round trip when this process knows the run's state (it appended to it, or took
        its lease) and nobody moved it since; otherwise under the lock."""
        state = self._take(run_id)
        if state is not None and state.fold is not None:
            with self._db.connection() as conn:
                pending = self._send(conn, run_id, record, state, lease, sync, sent)
                if self._settle(run_id, pending, sent):
                    return pending.stored
        return self._append_locked(run_id, record, None, lease, 0, sync, sent)

    def _append_locked(
        self,
        run_id: str,
        record: Record,
        check: Check | None,
        lease: Lease | None,
        since: int,
        sync: bool,
        sent: list[tuple[int, bytes]],
    ) -> Record:
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
                    last_seq, version, fold, outcome, holder = _row(cur)
                    if got is not None and check is not None:
                        lines = [bytes(r[0]) for r in got.fetchall()]
                        check(parse_lines(run_id, lines, since + 1, since + 1))
                    if lease is not None and holder != lease.epoch:
                        _mark_lost(lease)
                        raise LeaseLostError(run_id, lease.epoch, "another runner holds it now")
                    state = self._take(run_id)
                    if state is None or (state.last_seq, state.version) != (last_seq, version):
                        state = _state_of(last_seq, version, fold, outcome)
                    if state.fold is None:
                        every = _lines(conn, "load", {"run_id": run_id})
                        state.fold = _fold(parse_lines(run_id, every))
                    pending = self._send(conn, run_id, record, state, lease, sync, sent)
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
        record: Record,
        state: _State,
        lease: Lease | None,
        sync: bool,
        sent: list[tuple[int, bytes]],
    ) -> _Pending:
        """Send the append computed from ``state`` (which this call consumes); its answer is
        read by ``_settle`` (in a pipeline, after the commit went with it)."""
        assert state.fold is not None
        seq = state.last_seq + 1
        stored = Record(seq, record.type, record.step, record.kind, record.data, record.at)
        line = _encode(record, seq)
        fold = state.fold
        fold.add(stored)
        args = {
            "run_id": run_id,
            "seq": seq,
            "line": line,
            "epoch": None if lease is None else lease.epoch,
            "version": state.version,
            "fold": _dumps(fold.to_json()),
            "channel": self._channel,
            **_summary_args(run_id, fold, state.outcome),
        }
        sent[:] = [(seq, line)]
        cur = conn.execute(self._append_query(conn, sync), QUERIES["append"].bind(args))
        return _Pending(cur, stored, _State(seq, 0, fold, state.outcome))

    def _append_query(self, conn: Connection, sync: bool) -> str:
        query = self._append_queries.get(sync)
        if query is None:
            commit = sql.SQL("NULL" if sync else QUERIES["async_commit"].sql)
            query = sql.SQL(QUERIES["append"].sql).format(commit=commit).as_string(conn)
            self._append_queries[sync] = query
        return query

    def _settle(self, run_id: str, p: _Pending, sent: list[tuple[int, bytes]]) -> bool:
        """Read an append's answer: True when it landed (the run's new state is kept)."""
        row = p.cursor.fetchone()
        if row is None or row[0] is None:
            sent.clear()
            return False
        p.state.version = row[0]
        self._keep(run_id, p.state)
        return True

    def _landed(
        self,
        run_id: str,
        record: Record,
        sent: list[tuple[int, bytes]],
        deadline: float,
        error: BaseException,
    ) -> Record | None:
        """After a lost connection: the stored record if the append in flight landed, None if
        it did not (append again). Waits for the server until ``deadline``."""
        delay = 0.05
        while True:
            self._db.recheck()
            try:
                if not sent:
                    with self._db.connection() as conn:
                        conn.execute("SELECT 1")
                    return None
                seq, line = sent[0]
                with self._db.connection() as conn:
                    cur = conn.cursor(binary=True)
                    row = cur.execute(*_q("line_at", {"run_id": run_id, "seq": seq}))
                    found = row.fetchone()
                if found is not None and bytes(found[0]) == line:
                    return Record(
                        seq, record.type, record.step, record.kind, record.data, record.at
                    )
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

    def _rebuilt(self, run_id: str, state: _State) -> _State:
        """``state`` with its fold rebuilt from the journal (the row had none)."""
        state.fold = _fold(self.load(run_id))
        return state

    # -- the per-run state cache -------------------------------------------------------------

    def _take(self, run_id: str) -> _State | None:
        """The run's cached state, removed from the cache (its user owns it now)."""
        with self._states_lock:
            return self._states.pop(run_id, None)

    def _keep(self, run_id: str, state: _State) -> None:
        with self._states_lock:
            self._states[run_id] = state
            while len(self._states) > _STATES:
                self._states.popitem(last=False)

    def _forget(self, run_id: str) -> None:
        with self._states_lock:
            self._states.pop(run_id, None)

    # -- summaries ---------------------------------------------------------------------------

    def summaries(self) -> list[Summary]:
        """Every run's status line, sorted by run id: one query over the run rows (the
        summary kept at each append, a column per field, and whether the lease is held)."""
        missing: list[tuple[int, str, bool]] = []

        def read(conn: Connection) -> list[Summary | None]:
            # A server-side cursor read in batches: only the summaries pile up in memory.
            out: list[Summary | None] = []
            with conn.transaction(), conn.cursor("summaries", binary=True) as cur:
                cur.itersize = 5000
                for row in cur.execute(*_q("summaries")):
                    summary = _summary_from(row)
                    if summary is None:
                        missing.append((len(out), row[0], bool(row[-1])))
                    out.append(summary)
            return out

        listed = self._db.read("listing runs", read)
        for i, run_id, held in missing:
            listed[i] = self._rebuild_summary(run_id, held)
        return [s for s in listed if s is not None]

    def summary(self, run_id: str) -> Summary | None:
        """One run's status line; None for an unknown run."""
        args = {"run_id": check_run_id(run_id)}
        row = self._db.read("reading a run", lambda c: c.execute(*_q("summary", args)).fetchone())
        if row is None:
            return None
        return _summary_from(row) or self._rebuild_summary(run_id, bool(row[-1]))

    def _rebuild_summary(self, run_id: str, held: bool) -> Summary:
        """A summary that is missing, from the journal; saved back unless the run moved
        meanwhile (derived data: rebuilt again next time if that fails)."""
        args = {"run_id": run_id}
        try:
            got = self._db.read("reading a run", lambda c: c.execute(*_q("state", args)).fetchone())
            records = self.load(run_id)
        except DurableAgentError as e:
            return corrupt_summary(run_id, str(e))
        version = 0 if got is None else got[1]
        outcome = None if got is None else _outcome(got[3])
        f = _fold(records)
        store = {
            "run_id": run_id,
            "fold": _dumps(f.to_json()),
            "version": version,
            **_summary_args(run_id, f, outcome),
        }
        with suppress(StoreError):
            self._db.read("saving a summary", lambda c: c.execute(*_q("store_summary", store)))
        return summarize(run_id, f, outcome, held)

    # -- leases ------------------------------------------------------------------------------

    @contextmanager
    def lease(self, run_id: str, *, owner: str | None = None) -> Iterator[PgLease]:
        """Hold the run's lease while executing it; each acquisition begins an attempt.
        RunBusyError at once when anyone holds it (another process, another host, another
        lease() in this one: not re-entrant)."""
        lease = self._acquire(check_run_id(run_id), owner or default_owner())
        try:
            yield lease
        finally:
            if not lease.kept:
                lease.release()

    def _acquire(self, run_id: str, owner: str) -> PgLease:
        since = time.time()
        at = time.monotonic()

        def take(conn: Connection, token: int) -> tuple[Any, ...]:
            args = {
                "run_id": run_id,
                "owner": owner,
                "since": since,
                "ttl": self.lease_ttl,
                "token": token,
                "channel": self._channel,
            }
            return _row(conn.execute(*_q("take_lease", args)))

        result, epoch, holder, held_since, last_seq, version, fold, outcome = self._session.run(
            f"taking the lease of run {run_id!r}", take
        )
        if result == "busy":
            when = time.strftime("%H:%M:%S", time.localtime(held_since)) if held_since else "?"
            raise RunBusyError(run_id, f"{holder}, epoch {epoch}, since {when}")
        cached = self._take(run_id)
        if cached is not None and (cached.last_seq, cached.version) == (last_seq, version):
            self._keep(run_id, cached)
        else:
            self._keep(run_id, _state_of(last_seq, version, fold, outcome))
        return PgLease(self, run_id, owner, epoch, self.lease_ttl, at)

    def _renew(self, lease: PgLease) -> None:
        def renew(conn: Connection, token: int) -> Any:
            args = {"run_id": lease.run_id, "epoch": lease.epoch, "ttl": lease.ttl, "token": token}
            return conn.execute(*_q("renew_lease", args)).fetchone()

        if lease.lost_for_sure:
            raise LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")
        if self._session.run(f"renewing the lease of run {lease.run_id!r}", renew) is None:
            lease.lost_for_sure = True
            raise LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")

    def _release(self, lease: PgLease) -> None:
        def release(conn: Connection, token: int) -> Any:
            args = {
                "run_id": lease.run_id,
                "epoch": lease.epoch,
                "at": time.time(),
                "channel": self._channel,
            }
            return conn.execute(*_q("release_lease", args)).fetchone()

        self._session.run(f"releasing the lease of run {lease.run_id!r}", release)

    def is_leased(self, run_id: str) -> bool:
        """True while anyone holds the run's lease (not expired, its holder connected)."""
        return self.lease_holder(run_id) is not None

    def lease_holder(self, run_id: str) -> dict[str, Any] | None:
        """Who holds the lease (owner, epoch, since, ttl), or None when it is free."""
        args = {"run_id": check_run_id(run_id)}
        got = self._db.read(
            "reading a lease", lambda c: c.execute(*_q("lease_holder", args)).fetchone()
        )
        if got is None:
            return None
        return {"owner": got[0], "epoch": got[1], "since": got[2], "ttl": got[3]}

    # -- attempts and outcomes ---------------------------------------------------------------

    def save_outcome(self, run_id: str, outcome: Outcome, *, lease: Lease | None = None) -> None:
        """End the current attempt with ``outcome`` and update the run's summary. With
        ``lease``, a lease that is no longer current raises LeaseLostError."""
        check_run_id(run_id)
        _fence(lease)
        for _ in range(_OUTCOME_TRIES):
            state = self._take(run_id)
            if state is None:
                state = self._current_state(run_id)
            if state.fold is None:
                state = self._rebuilt(run_id, state)
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
                "summary": Jsonb(_summary_args(run_id, state.fold, outcome))
                if state.last_seq
                else None,
                "channel": self._channel,
            }
            try:
                with self._db.connection() as conn:
                    result, last_seq, version, fold, was = _row(
                        conn.execute(*_q("end_attempt", args))
                    )
            except LOST as e:
                raise self._db.unavailable(f"saving the outcome of run {run_id!r}", e) from None
            except psycopg.Error as e:
                raise self._db.failed(f"saving the outcome of run {run_id!r}", e) from None
            if result == "ok":
                self._keep(run_id, _State(state.last_seq, version, state.fold, outcome))
                if isinstance(lease, PgLease):
                    lease.ended = True
                return
            if result == "lost":
                assert lease is not None
                _mark_lost(lease)
                raise LeaseLostError(run_id, lease.epoch, "another runner holds it now")
            self._keep(run_id, _state_of(last_seq, version, fold, was))
        raise StoreError(f"run {run_id!r} kept changing; its outcome was not saved")

    def _current_state(self, run_id: str) -> _State:
        args = {"run_id": run_id}
        got = self._db.read("reading a run", lambda c: c.execute(*_q("state", args)).fetchone())
        return _State(0, 0, Fold(), None) if got is None else _state_of(*got)

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome (None when there is none or it does not parse)."""
        args = {"run_id": check_run_id(run_id)}
        got = self._db.read(
            "reading a run", lambda c: c.execute(*_q("last_outcome", args)).fetchone()
        )
        return None if got is None else _outcome(got[0])

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
                    outcome=_outcome(outcome),
                )
            )
        return out

    # -- the workers' failure counts ---------------------------------------------------------

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
            self._db.read(
                "recording failures", lambda c: _one(c.execute(*_q("set_failures", args)))
            )
        )

    # -- changes -----------------------------------------------------------------------------

    async def changes(self, *, rescan: float = 30.0) -> AsyncIterator[set[str]]:
        """Sets of run ids whose journal, lease, attempts or failure count changed: NOTIFY
        (a hint: a payload is a run id), every run once the feed is up and after each
        reconnect (notifications sent while it was down are lost), and every run at least
        every ``rescan`` seconds (a lease that expires, or whose holder died, changes no row
        and sends nothing: only a look sees it)."""
        delay = 0.1
        listen = sql.SQL("LISTEN {}").format(sql.Identifier(self._channel))
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                conn = await psycopg.AsyncConnection.connect(self._db.target.dsn, **self._db.kwargs)
                await conn.execute(listen)
                everything = set(await asyncio.to_thread(self.run_ids))
                if delay > 0.1:
                    log.warning("change feed of %s is back", self._description)
                delay = 0.1
                yield everything
                last_full = time.monotonic()
                while True:
                    wait = max(0.0, last_full + rescan - time.monotonic())
                    ids: set[str] = set()
                    async for n in conn.notifies(timeout=wait, stop_after=1):
                        ids.add(n.payload)
                    if ids:  # a burst: take what else arrived with it
                        async for n in conn.notifies(timeout=0.005):
                            ids.add(n.payload)
                    if time.monotonic() - last_full >= rescan:
                        ids |= set(await asyncio.to_thread(self.run_ids))
                        last_full = time.monotonic()
                    ids = {i for i in ids if valid_run_id(i)}
                    if ids:
                        yield ids
            except (psycopg.OperationalError, psycopg.InterfaceError, StoreUnavailableError) as e:
                if delay == 0.1:
                    log.warning(
                        "change feed of %s lost (%s); reconnecting",
                        self._description,
                        self._db.why(e),
                    )
                await asyncio.sleep(delay)
                delay = min(5.0, delay * 2)
            finally:
                if conn is not None:
                    await conn.close()

    # -- moving runs between stores ----------------------------------------------------------

    def export_run(self, run_id: str) -> list[bytes]:
        """The run's journal lines exactly as stored (without newlines), every crc and seq
        checked (CorruptJournalError names the first bad line); [] for an unknown run."""
        args = {"run_id": check_run_id(run_id)}
        lines = self._db.read("exporting a run", lambda c: _lines(c, "load", args))
        parse_lines(run_id, lines)
        return lines

    def import_run(self, run_id: str, lines: list[bytes], attempts: list[Attempt]) -> bool:
        """Add a whole run (its journal lines as another store exported them, and its
        attempts) in one transaction. False when the store already holds exactly these
        lines (nothing changes); StoreError when it holds the run with other records."""
        check_run_id(run_id)
        records = parse_lines(run_id, lines)
        if not records:
            return False
        outcome = next((a.outcome for a in reversed(attempts) if a.outcome), None)
        f = _fold(records)
        try:
            with self._db.connection() as conn, conn.transaction():
                last_seq = _row(conn.execute(*_q("lock_state", {"run_id": run_id})))[0]
                if last_seq:
                    there = _lines(conn, "load", {"run_id": run_id})
                    if there == lines:
                        return False
                    raise RunConflictError(run_id, self._description, len(there), len(lines))
                with conn.cursor() as cur:
                    record = QUERIES["import_record"]
                    cur.executemany(
                        record.sql,
                        [
                            record.values({"run_id": run_id, "seq": r.seq, "line": line})
                            for r, line in zip(records, lines, strict=True)
                        ],
                    )
                    cur.execute(*_q("clear_attempts", {"run_id": run_id}))
                    attempt = QUERIES["import_attempt"]
                    cur.executemany(
                        attempt.sql, [attempt.values(_attempt_args(run_id, a)) for a in attempts]
                    )
                    cur.execute(
                        *_q(
                            "import_run",
                            {
                                "run_id": run_id,
                                "last_seq": records[-1].seq,
                                "fold": _dumps(f.to_json()),
                                "outcome": None if outcome is None else Jsonb(outcome.to_dict()),
                                "epoch": max((a.epoch for a in attempts), default=0),
                                **_summary_args(run_id, f, outcome),
                            },
                        )
                    )
                    cur.execute(*_q("notify", {"channel": self._channel, "run_id": run_id}))
        except LOST as e:
            raise self._db.unavailable(f"importing run {run_id!r}", e) from None
        except psycopg.Error as e:
            raise self._db.failed(f"importing run {run_id!r}", e) from None
        finally:
            self._forget(run_id)
        return True


# -- helpers ----------------------------------------------------------------------------------


def _ddl(name: str, schema: sql.Identifier) -> sql.Composed:
    return sql.SQL(QUERIES[name].sql).format(schema=schema)


def _one(cur: psycopg.Cursor[Any]) -> Any:
    row = cur.fetchone()
    return None if row is None else row[0]


def _row(cur: psycopg.Cursor[Any]) -> tuple[Any, ...]:
    row = cur.fetchone()
    if row is None:
        raise StoreError("PostgreSQL answered nothing where a row was due")
    return tuple(row)


def _lines(conn: Connection, name: str, args: dict[str, Any]) -> list[bytes]:
    """The journal lines a named query selects (binary: the bytes as stored)."""
    cur = conn.cursor(binary=True)
    return [bytes(r[0]) for r in cur.execute(*_q(name, args)).fetchall()]


def _fold(records: list[Record]) -> Fold:
    f = Fold()
    for r in records:
        f.add(r)
    return f


def _summary_args(run_id: str, fold: Fold, outcome: Outcome | None) -> dict[str, Any]:
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
        "pending": _dumps([p.to_dict() for p in s.pending]) if s.pending else None,
        "indeterminate": s.indeterminate,
        "signals": s.signals,
    }


_STATUS = {str(s): s for s in RunStatus}
_SETTLED = (RunStatus.COMPLETED, RunStatus.CORRUPT)


def _summary_from(row: Sequence[Any]) -> Summary | None:
    """A ``summaries`` row as a Summary; None when the run's summary is missing. The stored
    status is as if the lease were free: a held lease makes it running (as file_logs'
    summary_of does for the FileStore's index)."""
    (run_id, status, steps, calls, started, last, last_seq, waiting, error, answer, pending,
     indeterminate, signals, held) = row  # fmt: skip
    if status is None:
        return None
    status = _STATUS[status]
    if held and status not in _SETTLED:
        return Summary(run_id, RunStatus.RUNNING, steps, calls, started, last, last_seq, "", "",
                       answer, True, (), None, signals)  # fmt: skip
    waiting_calls = tuple(Pending.from_dict(p) for p in json.loads(pending)) if pending else ()
    return Summary(run_id, status, steps, calls, started, last, last_seq, waiting, error, answer,
                   bool(held), waiting_calls, indeterminate, signals)  # fmt: skip


def _encode(record: Record, seq: int) -> bytes:
    try:
        return encode_line(record, seq)[:-1]
    except ValueError as e:
        raise StoreError(f"cannot record {record.type} {record.step!r}: {e}") from None


def _fence(lease: Lease | None) -> None:
    """Refuse at once a lease already known lost (the server refuses the others)."""
    if isinstance(lease, PgLease) and lease.lost_for_sure:
        raise LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")


def _mark_lost(lease: Lease) -> None:
    if isinstance(lease, PgLease):
        lease.lost_for_sure = True


def _attempt_args(run_id: str, a: Attempt) -> dict[str, Any]:
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

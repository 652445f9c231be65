"""PostgresStore: runs in PostgreSQL, shared by workers and supervisors on many hosts.

Tables (``sql/schema.sql``, in the store's schema): ``runs`` (a row per run: the journal's
tip, its status fold and status line, the last outcome, the lease, the failure bookkeeping),
``records`` (each journal line exactly as the FileStore writes it), ``attempts``, ``workers``,
``notices`` and ``schema_version``. Queries are named in ``sql/queries.sql``; connections
come from ``connector.py``; appends are ``append.py``'s (one round trip, two with a check); a
lease is a ``lease.PgLease``; attempts, outcomes and failure counts are ``attempts.py``'s; the
workers and notices ``registry.py``'s; the change feed is ``feed.py``, moving runs
``moving.py`` and a summary row ``summary_rows.py``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from ...errors import (
    DurableAgentError,
    LeaseLostError,
    RunBusyError,
    StoreError,
    StoreUnavailableError,
)
from ...fold import Summary, corrupt_summary, summarize
from ...ids import check_run_id
from ...outcome import Outcome
from ...record import Record
from ...roster import NoticeRecord, WorkerInfo
from ..lines import parse_lines
from ..protocol import Attempt, Check, Lease, Store, default_owner
from .append import (
    Appender,
    dumps,
    fold_of,
    lines_of,
    one,
    outcome_of,
    row_of,
    state_of,
    summary_args,
)
from .attempts import AttemptLog
from .connector import (
    LOST,
    Connection,
    Connector,
    Target,
    channel_of,
    check_schema_name,
    describe,
    parse_url,
)
from .feed import change_feed
from .lease import PgLease
from .moving import export_run, import_run
from .registry import Registry
from .sql import QUERIES, SCHEMA_VERSION, migrations, schema_sql
from .sql import bound as _q
from .summary_rows import summary_from

log = logging.getLogger("durableagent.stores.postgres")

DEFAULT_SCHEMA = "durableagent"
# A lease ends only by expiry or release (never with a connection), so a killed worker's runs
# wait this long for a new holder; it is renewed every third of it.
DEFAULT_TTL = 10.0


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
        # No transaction of ours outlives a lease idle: a holder paused inside an append
        # must not keep its run's row locked past its ttl (see Connector.configure).
        self._db = Connector(
            Target(dsn, schema, allow_async_commit),
            self._description,
            pool_size=pool_size,
            idle_in_transaction=max(lease_ttl, 1.0),
        )
        self._channel = channel_of(schema)
        conn = self._db.connect()
        try:
            self._open(conn, create)
            self._db.configure(conn)
        except BaseException:
            conn.close()
            raise
        conn.close()
        self._appender = Appender(self._db, self._channel, self._description)
        self._attempts = AttemptLog(self._db, self._channel, self._appender)
        self._registry = Registry(self._db)

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

    leases_die_with_holder = False  # a lease ends by expiry: its holder may outlive it

    def __repr__(self) -> str:
        return f"PostgresStore({self._description!r})"

    @property
    def description(self) -> str:
        """Where the store is, for messages: its URL without the password, with the schema."""
        return self._description

    @property
    def directory(self) -> Path | None:
        """None: the runs live in PostgreSQL, in no directory."""
        return None

    def close(self) -> None:
        """Close every connection (leases still held end at their expiry)."""
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
                exists = one(conn.execute(*_q("schema_exists", name)))
                ours = exists and one(conn.execute(*_q("has_version", name)))
                if not ours:
                    if not create:
                        raise StoreError(
                            f"no store at {self._description}: check the URL and its ?schema=, "
                            "or submit a run to create it"
                        )
                    if exists and one(conn.execute(*_q("schema_tables", name))):
                        raise StoreError(
                            f"schema {self.schema!r} of {self._description} holds tables that "
                            "are not a durableagent store: pick another ?schema="
                        )
                    conn.execute(_ddl("create_schema", ident))
                    conn.execute(_ddl("use_schema", ident))
                    conn.execute(schema_sql().encode())
                    return
                version = one(conn.execute(_ddl("read_version", ident))) or 0
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
        rows = self._db.read("loading a run", lambda c: lines_of(c, "load", args))
        return parse_lines(run_id, rows)

    def load_since(self, run_id: str, after_seq: int) -> list[Record]:
        """The records with seq > ``after_seq``."""
        args = {"run_id": check_run_id(run_id), "after": after_seq}
        rows = self._db.read("loading a run", lambda c: lines_of(c, "load_since", args))
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
        One round trip, or two with a check (see ``pg_append``)."""
        return self._appender.append(
            run_id, (record,), check=check, lease=lease, since=since, sync=sync
        )[0]

    def append_many(
        self,
        run_id: str,
        records: Sequence[Record],
        *,
        check: Check | None = None,
        lease: Lease | None = None,
        since: int = 0,
        sync: bool = True,
    ) -> list[Record]:
        """Append ``records`` with consecutive seqs in one transaction and one commit (a read
        step's start travels with its result): all land or none. Otherwise as append."""
        if not records:
            raise ValueError("append_many needs at least one record")
        return self._appender.append(
            run_id, tuple(records), check=check, lease=lease, since=since, sync=sync
        )

    # -- summaries ---------------------------------------------------------------------------

    def summaries(self) -> list[Summary]:
        """Every run's status line, sorted by run id: one query over the run rows (the
        summary kept at each append, a column per field, and whether the lease is held)."""
        missing: list[tuple[int, str, bool]] = []

        def read(conn: Connection) -> list[Summary | None]:
            # One statement streamed in chunks of rows (libpq's chunked mode; a row at a time
            # with an older libpq): only the summaries pile up in memory, and no
            # DECLARE/FETCH round trips or per-row cursor bookkeeping (a server-side cursor
            # took twice as long over 100,000 runs).
            out: list[Summary | None] = []
            with conn.cursor(binary=True) as cur:
                for row in cur.stream(*_q("summaries"), size=5000):
                    summary = summary_from(row)
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
        return summary_from(row) or self._rebuild_summary(run_id, bool(row[-1]))

    def _rebuild_summary(self, run_id: str, held: bool) -> Summary:
        """A summary that is missing, from the journal; saved back unless the run moved
        meanwhile (derived data: rebuilt again next time if that fails)."""
        args = {"run_id": run_id}
        try:
            got = self._db.read("reading a run", lambda c: c.execute(*_q("state", args)).fetchone())
            records = self.load(run_id)
        except StoreUnavailableError:
            raise  # the server did not answer: that says nothing about the journal
        except DurableAgentError as e:
            return corrupt_summary(run_id, str(e))
        version = 0 if got is None else got[1]
        outcome = None if got is None else outcome_of(got[3])
        f = fold_of(records)
        store = {
            "run_id": run_id,
            "fold": dumps(f.to_json()),
            "version": version,
            **summary_args(run_id, f, outcome),
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

        def take(conn: Connection) -> tuple[Any, ...]:
            args = {
                "run_id": run_id,
                "owner": owner,
                "since": since,
                "ttl": self.lease_ttl,
                "channel": self._channel,
            }
            return row_of(conn.execute(*_q("take_lease", args)))

        result, epoch, holder, held_since, last_seq, version, fold, outcome = self._db.read(
            f"taking the lease of run {run_id!r}", take
        )
        if result == "busy" and (holder, held_since) == (owner, since):
            result = "ok"  # our own take landed, its answer lost with the connection: ours
        if result == "busy":
            when = time.strftime("%H:%M:%S", time.localtime(held_since)) if held_since else "?"
            raise RunBusyError(run_id, f"{holder}, epoch {epoch}, since {when}")
        cached = self._appender.take(run_id)
        if cached is not None and (cached.last_seq, cached.version) == (last_seq, version):
            self._appender.keep(run_id, cached)
        else:
            self._appender.keep(run_id, state_of(last_seq, version, fold, outcome))
        return PgLease(self, run_id, owner, epoch, self.lease_ttl, at)

    def _renew(self, lease: PgLease) -> None:
        def renew(conn: Connection) -> Any:
            args = {"run_id": lease.run_id, "epoch": lease.epoch, "ttl": lease.ttl}
            return conn.execute(*_q("renew_lease", args)).fetchone()

        if lease.lost_for_sure:
            raise LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")
        # From whichever connection: the lease is the row's, not a session's.
        if self._db.read(f"renewing the lease of run {lease.run_id!r}", renew) is None:
            lease.lost_for_sure = True
            raise LeaseLostError(lease.run_id, lease.epoch, "another runner holds it now")

    def _release(self, lease: PgLease) -> None:
        def release(conn: Connection) -> Any:
            args = {
                "run_id": lease.run_id,
                "epoch": lease.epoch,
                "at": time.time(),
                "channel": self._channel,
            }
            # An attempt whose end is recorded keeps it: only the lease is freed.
            query = "free_lease" if lease.ended else "release_lease"
            if lease.ended:
                del args["at"]
            return conn.execute(*_q(query, args)).fetchone()

        self._db.read(f"releasing the lease of run {lease.run_id!r}", release)

    def is_leased(self, run_id: str) -> bool:
        """True while anyone holds the run's lease (its expiry has not passed)."""
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

    # -- attempts, outcomes and the workers' failure counts (see pg_attempts) ---------------

    def save_outcome(self, run_id: str, outcome: Outcome, *, lease: Lease | None = None) -> None:
        """End the current attempt with ``outcome`` and update the run's summary. With
        ``lease``, a lease that is no longer current raises LeaseLostError."""
        self._attempts.save_outcome(run_id, outcome, lease=lease)

    def last_outcome(self, run_id: str) -> Outcome | None:
        """The last attempt's outcome (None when there is none or it does not parse)."""
        return self._attempts.last_outcome(run_id)

    def attempts(self, run_id: str) -> list[Attempt]:
        """Every attempt of the run, oldest first; one that never said how it ended and no
        longer holds the lease is ``lost``."""
        return self._attempts.attempts(run_id)

    def read_failures(self, run_id: str) -> dict[str, Any] | None:
        """The workers' shared failure bookkeeping of the run, or None."""
        return self._attempts.read_failures(run_id)

    def write_failures(self, run_id: str, failures: dict[str, Any]) -> None:
        """Replace the run's failure bookkeeping."""
        self._attempts.write_failures(run_id, failures)

    def clear_failures(self, run_id: str) -> bool:
        """Forget the run's failures; True when there were some."""
        return self._attempts.clear_failures(run_id)

    # -- the workers' registry (see registry.py) -------------------------------------------

    def beat(self, info: WorkerInfo) -> None:
        """Register or refresh a worker (its row in ``workers``)."""
        self._registry.beat(info)

    def workers(self) -> list[WorkerInfo]:
        """Every registered worker, live or gone."""
        return self._registry.workers()

    def forget_worker(self, owner: str) -> bool:
        """Remove a worker's registration; False when there was none."""
        return self._registry.forget_worker(owner)

    def claim_notice(
        self,
        run_id: str,
        seq: int,
        kind: str,
        target: str,
        *,
        by: str,
        stale_after: float = 60.0,
    ) -> bool:
        """Claim a notice before sending it (its row in ``notices``)."""
        return self._registry.claim_notice(
            check_run_id(run_id), seq, kind, target, by=by, stale_after=stale_after
        )

    def mark_notice(self, run_id: str, seq: int, kind: str, target: str) -> None:
        """Record that a claimed notice was sent."""
        self._registry.mark_notice(check_run_id(run_id), seq, kind, target)

    def notices(self, run_id: str) -> list[NoticeRecord]:
        """The notices claimed or sent for the run."""
        return self._registry.notices(check_run_id(run_id))

    # -- changes -----------------------------------------------------------------------------

    def changes(self, *, rescan: float = 30.0) -> AsyncIterator[set[str]]:
        """Sets of run ids whose journal, lease, attempts or failure count changed (LISTEN /
        NOTIFY, every run once the feed is up and at least every ``rescan`` seconds: see
        feed.py)."""
        return change_feed(self._db, self._channel, self.run_ids, rescan=rescan)

    # -- moving runs between stores ----------------------------------------------------------

    def export_run(self, run_id: str) -> list[bytes]:
        """The run's journal lines exactly as stored (without newlines), every crc and seq
        checked (CorruptJournalError names the first bad line); [] for an unknown run."""
        return export_run(self._db, check_run_id(run_id))

    def import_run(self, run_id: str, lines: list[bytes], attempts: list[Attempt]) -> bool:
        """Add a whole run (its journal lines as another store exported them, and its
        attempts) in one transaction. False when the store already holds exactly these
        lines (nothing changes); StoreError when it holds the run with other records."""
        check_run_id(run_id)
        try:
            return import_run(self._db, self._channel, run_id, lines, attempts)
        finally:
            self._appender.forget(run_id)


# -- helpers ----------------------------------------------------------------------------------


def _ddl(name: str, schema: sql.Identifier) -> sql.Composed:
    return sql.SQL(QUERIES[name].sql).format(schema=schema)


def _is_a_store(store: PostgresStore, lease: PgLease) -> tuple[Store, Lease]:
    """Never called: mypy checks here that PostgresStore and PgLease keep their protocols."""
    return store, lease

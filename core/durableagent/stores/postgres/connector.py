"""How a PostgresStore reaches its server: the URL, connections set up for the store's schema,
the pool, and psycopg's errors told as the store's (one line, never a password).

The seam under ``PostgresStore`` (procrastinate's ``psycopg_connector.py`` plays this part):
the store speaks named queries through a connection; this module owns where connections come
from and what a lost one means.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import StoreError, StoreUnavailableError
from .sql import bound as _q

T = TypeVar("T")
Connection = psycopg.Connection[Any]

# Errors that mean "the connection or the server is gone", not "the query is wrong".
LOST = (psycopg.OperationalError, psycopg.InterfaceError, PoolTimeout)
_TRUE = {"1", "true", "yes", "on"}
CONNECT_TIMEOUT = "10"  # seconds, unless the URL says
POOL_TIMEOUT = 10.0  # seconds a caller waits for a pooled connection before "unavailable"
IDLE_IN_TRANSACTION = 10.0  # seconds a session may sit idle inside a transaction (see configure)


@dataclass(frozen=True)
class Target:
    """Where a store lives: libpq's connection string (without our own parameters), the
    schema, and whether the caller accepts commits that do not wait for the disk."""

    dsn: str
    schema: str
    allow_async_commit: bool = False


def parse_url(url: str) -> tuple[str, str | None, bool | None]:
    """Split our parameters off a ``postgresql://`` URL: ``(dsn, schema, allow_async_commit)``
    (None when the URL does not say). The rest of the URL goes to libpq as it was."""
    parts = urlsplit(url)
    schema: str | None = None
    allow: bool | None = None
    rest = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "schema":
            schema = value
        elif key == "allow_async_commit":
            allow = value.strip().lower() in _TRUE
        else:
            rest.append((key, value))
    dsn = urlunsplit(parts._replace(query=urlencode(rest, quote_via=quote)))
    return dsn, schema, allow


def check_schema_name(schema: str) -> str:
    """A schema name PostgreSQL keeps as given (1 to 63 bytes: longer ones are cut)."""
    if not schema or len(schema.encode()) > 63 or "\0" in schema:
        raise StoreError(
            f"bad schema name {schema!r}: use 1 to 63 bytes (e.g. ?schema=team_a in the URL)"
        )
    return schema


def channel_of(schema: str) -> str:
    """The NOTIFY channel of a store: one per schema, within PostgreSQL's 63 bytes."""
    name = f"durableagent.{schema}"
    if len(name.encode()) <= 63:
        return name
    import hashlib

    return f"durableagent.{hashlib.sha256(schema.encode()).hexdigest()[:40]}"


def connection_kwargs(dsn: str) -> dict[str, Any]:
    """What every connection of a store adds to the DSN, unless the DSN says otherwise: a
    connect timeout and an application name that tells ``pg_stat_activity`` which process
    it is."""
    try:
        given = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as e:
        raise StoreError(f"bad PostgreSQL URL: {one_line(e)}") from None
    kwargs: dict[str, Any] = {"autocommit": True}
    if "connect_timeout" not in given:
        kwargs["connect_timeout"] = CONNECT_TIMEOUT
    if "application_name" not in given:
        kwargs["application_name"] = f"durableagent pid {os.getpid()} {socket.gethostname()}"[:63]
    return kwargs


def describe(dsn: str, schema: str) -> str:
    """The store as a URL without its password: ``postgresql://user@host:port/db?schema=S``."""
    try:
        d = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError:
        d = {}
    user = d.get("user") or os.environ.get("PGUSER") or ""
    host = d.get("host") or os.environ.get("PGHOST") or "localhost"
    port = d.get("port") or os.environ.get("PGPORT") or "5432"
    db = d.get("dbname") or os.environ.get("PGDATABASE") or user
    who = f"{user}@" if user else ""
    return f"postgresql://{who}{host}:{port}/{db}?schema={quote(schema, safe='')}"


def one_line(e: BaseException, secret: str | None = None) -> str:
    """An error's text on one line (libpq's messages span several), without ``secret``."""
    text = " ".join(str(e).split())
    text = text.removeprefix("connection failed: ")
    if secret:
        text = text.replace(secret, "***")
    return text or type(e).__name__


def password_of(dsn: str) -> str | None:
    try:
        password = conninfo_to_dict(dsn).get("password")
    except psycopg.ProgrammingError:
        return None
    return str(password) if password else None


class Connector:
    """Connections to one store: set up for its schema, durable commits checked, pooled for
    the short queries, and told as StoreErrors when they fail."""

    def __init__(
        self,
        target: Target,
        description: str,
        *,
        pool_size: int = 8,
        idle_in_transaction: float = IDLE_IN_TRANSACTION,
    ) -> None:
        self.target = target
        self.idle_ms = str(max(1, round(idle_in_transaction * 1000)))
        self.description = description
        self.kwargs = connection_kwargs(target.dsn)
        self._secret = password_of(target.dsn)
        self._pool_size = pool_size
        self._pool: ConnectionPool[Connection] | None = None
        self._pool_lock = threading.Lock()
        self._lane: Connection | None = None
        self._lane_lock = threading.Lock()
        self.closed = False

    # -- connections -----------------------------------------------------------------------

    def connect(self) -> Connection:
        """A new connection of our own (not pooled), set up for the store; StoreError (with
        what to check) when the server cannot be reached."""
        try:
            conn = psycopg.connect(self.target.dsn, **self.kwargs)
        except LOST as e:
            raise StoreUnavailableError(
                f"cannot connect to PostgreSQL at {self.description}: {self.why(e)}"
            ) from None
        except psycopg.Error as e:
            raise StoreError(f"cannot connect to {self.description}: {self.why(e)}") from None
        return conn

    def configure(self, conn: Connection) -> None:
        """Put the store's schema first on the search path, check that a commit waits for
        the disk (``synchronous_commit`` not off) unless the caller opted out, and have the
        server end the session if it ever sits idle inside a transaction longer than
        ``idle_in_transaction`` seconds: an append under the run's row lock takes two round
        trips, and a client paused between them (a GC pause, a frozen VM, SIGSTOP) would
        otherwise keep that lock, and with it every takeover and every human's signal of the
        run, for as long as it is paused. Ended, its transaction writes nothing; woken, it
        finds its connection gone and its append is looked for and made again (fenced)."""
        path = sql.Identifier(self.target.schema).as_string(conn)
        args = {"search_path": path, "idle_ms": self.idle_ms}
        row = conn.execute(*_q("configure", args)).fetchone()
        assert row is not None
        if row[1] == "off" and not self.target.allow_async_commit:
            conn.close()
            raise StoreError(
                f"synchronous_commit is off for connections to {self.description}: an append "
                "would return before its record is on disk. Turn it on for this role or "
                "database, or accept that by adding allow_async_commit=true to the URL "
                "(PostgresStore(..., allow_async_commit=True))"
            )

    @property
    def pool(self) -> ConnectionPool[Connection]:
        pool = self._pool
        if pool is not None:
            return pool
        with self._pool_lock:
            if self.closed:
                raise StoreError(f"the store {self.description} is closed")
            if self._pool is None:
                self._pool = ConnectionPool(
                    self.target.dsn,
                    kwargs=self.kwargs,
                    min_size=1,
                    max_size=self._pool_size,
                    open=False,
                    configure=self.configure,
                    timeout=POOL_TIMEOUT,
                    name=f"durableagent {self.target.schema}",
                )
                self._pool.open(wait=False)
            return self._pool

    @contextmanager
    def connection(self) -> Iterator[Connection]:
        """A connection for one short operation: the store's own "lane" when no other thread
        is on it (an append is on every step's path, and taking a pooled connection and
        giving it back costs a twentieth of an append), else one from the pool. Autocommit:
        nothing to commit when it is given back; a broken one is replaced."""
        if not self._lane_lock.acquire(blocking=False):
            pool = self.pool
            pooled = pool.getconn()
            try:
                yield pooled
            finally:
                pool.putconn(pooled)
            return
        try:
            lane = self._lane
            if lane is None or lane.closed or lane.broken:
                self._lane = None
                if self.closed:
                    raise StoreError(f"the store {self.description} is closed")
                lane = psycopg.connect(self.target.dsn, **self.kwargs)
                self.configure(lane)
                self._lane = lane
            try:
                yield lane
            finally:
                if lane.info.transaction_status != TransactionStatus.IDLE:
                    self._drop_lane()  # left mid-transaction (or broken): never reuse it
        finally:
            self._lane_lock.release()

    def _drop_lane(self) -> None:
        conn, self._lane = self._lane, None
        if conn is not None:
            with suppress(psycopg.Error):
                conn.close()

    def recheck(self) -> None:
        """After a lost connection: drop every connection that is broken too."""
        if self._lane_lock.acquire(blocking=False):
            try:
                self._drop_lane()
            finally:
                self._lane_lock.release()
        pool = self._pool
        if pool is not None and not self.closed:
            with suppress(psycopg.Error, PoolTimeout):
                pool.check()

    def close(self) -> None:
        with self._pool_lock:
            self.closed = True
            pool, self._pool = self._pool, None
        with self._lane_lock:
            self._drop_lane()
        if pool is not None:
            pool.close(timeout=5)

    # -- errors ----------------------------------------------------------------------------

    def why(self, e: BaseException) -> str:
        if isinstance(e, PoolTimeout):
            return f"no connection within {POOL_TIMEOUT:g}s (is the server up?)"
        return one_line(e, self._secret)

    def unavailable(self, doing: str, e: BaseException) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"lost PostgreSQL at {self.description} while {doing}: {self.why(e)}"
        )

    def failed(self, doing: str, e: BaseException) -> StoreError:
        return StoreError(f"PostgreSQL at {self.description} refused {doing}: {self.why(e)}")

    def read(self, doing: str, fn: Callable[[Connection], T]) -> T:
        """Run a read (or an idempotent write) on a pooled connection; a lost connection is
        retried a few times on a fresh one before StoreUnavailableError."""
        delays = (0.05, 0.25, 1.0)
        for attempt in range(len(delays) + 1):
            try:
                with self.connection() as conn:
                    return fn(conn)
            except LOST as e:
                if attempt == len(delays) or isinstance(e, PoolTimeout):
                    raise self.unavailable(doing, e) from None
                self.recheck()
                time.sleep(delays[attempt])
            except psycopg.Error as e:
                raise self.failed(doing, e) from None
        raise AssertionError("unreachable")

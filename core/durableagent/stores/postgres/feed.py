"""The PostgreSQL store's change feed: LISTEN on the store's channel, where every write of a
run NOTIFYs its id.

A notification is a hint, never the truth: one sent while the feed was down is lost, and a
lease that expires (or whose holder died) changes no row and sends nothing. So the feed names
every run once it is up, again after each reconnect, and at least every ``rescan`` seconds;
whoever reads it looks at the store for what changed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import psycopg
from psycopg import sql

from ...errors import StoreUnavailableError
from ...ids import valid_run_id
from .connector import Connector

log = logging.getLogger("durableagent.stores.postgres")


async def change_feed(
    db: Connector, channel: str, run_ids: Callable[[], list[str]], *, rescan: float
) -> AsyncIterator[set[str]]:
    """Sets of run ids whose journal, lease, attempts or failure count changed: NOTIFY
    (a hint: a payload is a run id), every run (``run_ids()``) once the feed is up and after
    each reconnect, and every run at least every ``rescan`` seconds."""
    delay = 0.1
    listen = sql.SQL("LISTEN {}").format(sql.Identifier(channel))
    while True:
        conn: psycopg.AsyncConnection[Any] | None = None
        try:
            conn = await psycopg.AsyncConnection.connect(db.target.dsn, **db.kwargs)
            await conn.execute(listen)
            everything = set(await asyncio.to_thread(run_ids))
            if delay > 0.1:
                log.warning("change feed of %s is back", db.description)
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
                    ids |= set(await asyncio.to_thread(run_ids))
                    last_full = time.monotonic()
                ids = {i for i in ids if valid_run_id(i)}
                if ids:
                    yield ids
        except (psycopg.OperationalError, psycopg.InterfaceError, StoreUnavailableError) as e:
            if delay == 0.1:
                log.warning(
                    "change feed of %s lost (%s); reconnecting",
                    db.description,
                    db.why(e),
                )
            await asyncio.sleep(delay)
            delay = min(5.0, delay * 2)
        finally:
            if conn is not None:
                await conn.close()

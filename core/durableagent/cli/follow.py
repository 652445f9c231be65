"""Following a store live on the command line: ``show --follow`` and ``ls --watch``.

Both listen to the store's change feed (``Store.changes``: a file watch in a FileStore,
LISTEN/NOTIFY in PostgreSQL, each with a periodic rescan), never a file watch of their own, and
read only what changed (``load_since``, ``summaries``). The callers print; this module waits.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable

from ..errors import StoreError
from ..fold import Fold, RunStatus, Summary
from ..record import Record
from ..stores import Store

# The statuses a followed run stops at: done (or gone to another store), stopped by a human
# (cancelled, paused), or waiting for one.
STOPS = frozenset(
    {
        RunStatus.COMPLETED,
        RunStatus.MOVED,
        RunStatus.CANCELLED,
        RunStatus.PAUSED,
        RunStatus.OVER_BUDGET,
        RunStatus.INCOMPATIBLE,
        RunStatus.AWAITING_APPROVAL,
        RunStatus.INDETERMINATE,
        RunStatus.FAILED,
        RunStatus.CORRUPT,
    }
)
RESCAN = 2.0  # seconds: the safety net under the change feed while following
LISTING_RESCAN = 5.0  # seconds: how often a terminal's listing is redrawn anyway (ages move)
LISTING_PAUSE = 0.25  # seconds between two redraws of a listing, at most 4 a second


def status_now(store: Store, run_id: str, fold: Fold) -> RunStatus:
    """The run's status from its fold (the one definition), its last outcome and its lease."""
    return fold.status(store.last_outcome(run_id), store.is_leased(run_id))


async def follow_run(
    store: Store, run_id: str, fold: Fold, on_record: Callable[[Record], None]
) -> RunStatus:
    """Pass each record after ``fold.last_seq`` to ``on_record`` as it lands (in seq order,
    each once) and return the status the run stops at (one of STOPS). ``fold`` holds the
    records seen so far and is kept up to date."""
    async for ids in store.changes(rescan=RESCAN):
        if run_id not in ids:
            continue
        for r in await asyncio.to_thread(store.load_since, run_id, fold.last_seq):
            fold.add(r)
            on_record(r)
        status = await asyncio.to_thread(status_now, store, run_id, fold)
        if status in STOPS:
            return status
    raise StoreError(f"the change feed of {store!r} ended")


async def watch_listing(
    store: Store,
    draw: Callable[[list[Summary], bool], None],
    key: Callable[[list[Summary]], Hashable],
    *,
    redraw_anyway: bool,
) -> None:
    """Call ``draw(summaries, first)`` now and whenever the listing changes (its ``key``
    differs from the last drawn one), or at every notice when ``redraw_anyway`` (a terminal,
    where the ages in the listing move). Runs until cancelled (Ctrl-C)."""
    summaries = await asyncio.to_thread(store.summaries)
    draw(summaries, True)
    last = key(summaries)
    async for _ in store.changes(rescan=LISTING_RESCAN):
        summaries = await asyncio.to_thread(store.summaries)
        now = key(summaries)
        if redraw_anyway or now != last:
            draw(summaries, False)
            last = now
        await asyncio.sleep(LISTING_PAUSE)  # a burst of appends is one redraw, not hundreds

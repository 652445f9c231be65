"""Hearing a control while an attempt runs: a cancel, pause or move accepted while a step's
call is in flight reaches it through the store's change feed (SPEC §10).

Each step start re-checks the controls under the journal's lock, so between steps nothing is
needed. What this adds is for the call in flight: a listener, woken by the worker's change
feed (or, outside a worker, every ``POLL`` seconds), reads the records past the ones it has
seen once a call has run for ``SETTLE`` seconds, and hands a halt it finds to
:meth:`Journal.hear` (the read in flight is cancelled; a write goes on and records its result;
``ToolContext.cancelled`` is set). Quick steps cost it nothing: a wake during one carries over
to the next call that lasts.
"""

from __future__ import annotations

import asyncio
import logging
import time

from .errors import DurableAgentError
from .journal import Journal
from .stores import Store

log = logging.getLogger("durableagent.run")

POLL = 1.0  # seconds between looks when no change feed wakes the listener
SETTLE = 0.02  # a call that has run this long is worth a look at what landed meanwhile


async def listen(store: Store, run_id: str, journal: Journal, wake: asyncio.Event | None) -> None:
    """Hear of a control for ``journal``'s attempt until one is heard (or cancelled)."""
    controls = journal.index.controls.copy()
    after = journal.last_seq
    while True:
        if wake is None:
            await asyncio.sleep(POLL)
        else:
            await wake.wait()
        await _a_call_that_lasts(journal)
        if wake is not None:
            wake.clear()  # a change landing from here on wakes the listener again
        try:
            new = await asyncio.to_thread(store.load_since, run_id, after)
        except (DurableAgentError, OSError) as e:
            log.debug("run %s: cannot look for controls now (%s)", run_id, e)
            continue
        for r in new:
            controls.add(r)
        if new:
            after = new[-1].seq
        halt = controls.halt
        if halt is not None:
            journal.hear(halt)
            return


async def _a_call_that_lasts(journal: Journal) -> None:
    """Return once a step's call has been in flight for SETTLE seconds."""
    while True:
        await journal.calling.wait()
        since = journal.calling_since
        left = since + SETTLE - time.monotonic()
        if left > 0:
            await asyncio.sleep(left)
        if journal.calling.is_set() and journal.calling_since == since:
            return

"""The runs as they change: the first load, the change feed (or polling), the safety-net
rescans, the lease and store probes, the workers' registry, and the word in the header when a
read fails (never silent).

A base of SupervisorApp (kept apart from its layout, selection and actions), typed to the
app's ``Host`` (host.py), as acting.py's actions are. Every store read here runs off
the event loop; what it finds reaches the screen through the app's ``apply``.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from typing import TypeVar

from textual import work
from textual.worker import Worker, WorkerState, get_current_worker

from durableagent import RunStatus, StoreUnavailableError

from .closing import SHUTTING_DOWN
from .host import AppBase
from .tracker import Changes
from .workers import Crew, WorkersScreen, crew_of

_T = TypeVar("_T")

LOOK_ONE_BY_ONE = 64  # more changed runs than this in one notice: read the summaries
RESCAN_S = 30.0  # safety net for missed change notices (at least this often)
POLL_S = 1.0  # --poll, or after a watch error (at least this often)
# A full rescan of a large store takes a second of CPU: space them so that they cost at most
# 1/RESCAN_FACTOR of a core while idle (100,000 runs: every seven minutes or so; the change
# feed's own file watch takes about 0.6 % of a core already), and poll at most 1/POLL_FACTOR.
RESCAN_FACTOR = 400.0
POLL_FACTOR = 20.0
LEASE_S = 2.0  # a dead worker's lease makes no change notice
PROBE_S = 5.0  # a change feed that lost its server says nothing: ask the store this often
RETIME_S = 10.0
WORKERS_S = 5.0  # the workers' registry is read this often (a worker beats every 5 s)


class LiveUpdates(AppBase):
    """Keep the screen as the store is: load once, then follow every change."""

    crew: Crew | None  # the store's workers as last read (live apps only)

    @work(thread=True, exclusive=True, group="load", exit_on_error=False)
    def _load(self) -> None:
        since = time.monotonic()
        total = self.tracker.count()  # one listing: the header says how many while it loads
        self.call_from_thread(self.header.show_loading, total, since)
        while True:
            try:
                changes = self.tracker.scan()
                break
            except StoreUnavailableError as e:  # said in the header; tried again until it answers
                self.call_from_thread(self.header.set_unreachable, str(e))
                if get_current_worker().is_cancelled:
                    return
                time.sleep(POLL_S)
        self.load_seconds = time.monotonic() - since
        self.call_from_thread(self.header.set_unreachable, None)
        self.call_from_thread(self.header.set_failing, None)
        self.call_from_thread(self._loaded, changes)

    def on_unmount(self) -> None:
        if self.loaded:
            gc.unfreeze()  # see _loaded: what the app froze is the collector's again
        with suppress(Exception):  # closing files on the way out: nothing to report
            self.tracker.close()

    def _loaded(self, changes: Changes) -> None:
        self.loaded = True
        self._ticking.stop()
        self.apply(changes, initial=True)
        # Everything alive now (the app, every run's summary) stays alive: keep it out of the
        # cyclic collector's full passes, which otherwise stop the screen every so often for
        # 70 ms (1,000 runs) to 100 ms (100,000 runs), a keystroke included (measured; with
        # it, 20 to 40 ms). What is frozen can only leak if it turns into a cycle later: at
        # most what is alive now, and the app gives it back when it ends.
        gc.freeze()
        if not self.live:
            self.header.set_live("paused")
            return
        self.set_interval(LEASE_S, self._check_leases)
        self.set_interval(RETIME_S, self._retime)
        self.set_interval(PROBE_S, self._probe)
        self.set_interval(WORKERS_S, self._look_workers)
        self.call_later(self._look_workers)
        self.rescan_s = max(RESCAN_S, RESCAN_FACTOR * self.load_seconds)
        if self.poll:
            self._start_polling()
        else:
            self.header.set_live("watching")
            self._watch()

    def _start_polling(self, live: str = "polling") -> None:
        self.header.set_live(live)
        self.set_interval(max(POLL_S, POLL_FACTOR * self.load_seconds), self._rescan)

    @work(exclusive=True, group="watch", exit_on_error=False)
    async def _watch(self) -> None:
        store = self.tracker.store
        while store is None:
            self.header.set_live("waiting for store")
            await asyncio.sleep(POLL_S)
            store = self.tracker.store
        self.header.set_live("watching")
        try:
            # The feed names every run once it is up (what changed before it began) and again
            # every rescan_s: the safety net for a lost notice.
            async for ids in store.changes(rescan=self.rescan_s):
                if len(ids) > LOOK_ONE_BY_ONE:
                    await self._rescan()  # a rescan's worth: the summaries are cheaper
                    continue
                # Refreshing off the loop while the feed keeps collecting coalesces a burst.
                changes = await self._read(partial(self.tracker.refresh, ids))
                if changes is not None:
                    self.apply(changes)
        except Exception as e:  # the feed is best effort: polling keeps the screen live
            self.notify(
                f"watching {self.label} failed ({e}); polling instead",
                severity="warning",
                markup=False,
            )
            self._start_polling("watch error")

    async def _rescan(self) -> None:
        changes = await self._read(self.tracker.scan)
        if changes is not None:
            self.apply(changes)

    async def _check_leases(self) -> None:
        if self.tracker.running:  # nothing to look at while no run is running
            changes = await self._read(self.tracker.recheck_leases)
            if changes is not None:
                self.apply(changes)

    async def _probe(self) -> None:
        """Find out that the store stopped answering, or (a rescan) that it answers again."""
        if self.header.unreachable is not None:
            await self._rescan()
            return
        await self._read(self.tracker.probe)

    async def _read(self, fn: Callable[[], _T]) -> _T | None:
        """``fn()`` off the loop; None, and the header saying so, when the store does not
        answer or the read fails (the screen stays as last seen: no run turns corrupt for
        it). Never silent: a failure is in the header until a read works again."""
        try:
            got = await asyncio.to_thread(fn)
        except Exception as e:
            self.read_failed(e)
            return None
        with suppress(*SHUTTING_DOWN):
            self.header.set_unreachable(None)
            self.header.set_failing(None)
        return got

    def read_failed(self, error: BaseException) -> None:
        """Say that reading the store failed: the header until a read works again, and a
        toast the first time (a lost server says so in the header alone: it is not news
        at every look)."""
        with suppress(*SHUTTING_DOWN):  # shutting down
            if isinstance(error, StoreUnavailableError):
                self.header.set_unreachable(str(error))
                return
            text = f"{type(error).__name__}: {error}"
            if self.header.set_failing(text):
                self.notify(
                    f"reading {self.label} failed: {text}",
                    title="store error",
                    severity="error",
                    markup=False,
                )

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """A thread worker (the load, a timeline's or a dialog's read) that failed: the
        header says so, and a toast, never silently."""
        error = event.worker.error
        if event.state == WorkerState.ERROR and isinstance(error, Exception):
            self.read_failed(error)

    def _retime(self) -> None:
        with suppress(*SHUTTING_DOWN):  # shutting down
            self.table.refresh()  # "5m ago" is drawn from the clock, for the rows on screen

    # -- the workers -----------------------------------------------------------------------

    async def _look_workers(self) -> None:
        """Read who is working (off the loop); a registry that cannot be read leaves the
        workers as last seen (the store's own trouble is said by the other reads)."""
        store = self.tracker.store
        if store is None:
            return
        try:
            workers = await asyncio.to_thread(store.workers)
        except Exception:
            return
        self.show_crew(crew_of(workers, self.clock()))

    def show_crew(self, crew: Crew) -> None:
        """Show the workers: the header's word, and each waiting ready run's note."""
        self.crew = crew
        refiltered = self.rows.set_owners(crew.holders)  # for a filter's owner: terms
        with suppress(*SHUTTING_DOWN):  # shutting down
            self.header.set_workers(crew, self.rows.counts.get(RunStatus.READY, 0))
            self.table.crew = crew
            if refiltered:
                self.show_filtered()
            self.table.refresh()

    def action_workers(self) -> None:
        """The workers screen: who is registered in the store, live or gone."""

        async def open_it() -> None:
            store = self.tracker.store
            if store is None:
                self.notify("the store is not there yet; no worker has registered", markup=False)
                return
            try:
                workers = await asyncio.to_thread(store.workers)
            except Exception as e:
                self.notify(f"cannot read the workers: {e}", severity="warning", markup=False)
                return
            crew = crew_of(workers, self.clock())
            self.show_crew(crew)
            self.push_screen(WorkersScreen(crew))

        self.run_worker(open_it(), group="workers", exclusive=True, exit_on_error=False)

"""A worker's heartbeat: its registration in the store (SPEC §11), refreshed every
``heartbeat`` seconds with the runs it holds, removed at a clean stop.

A beat is one small write off the event loop; a store that cannot take it is logged and the
worker goes on (its runs do not depend on being listed).
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Callable

from ..durations import format_duration
from ..errors import DurableAgentError
from ..roster import (
    GONE_KEPT,
    OwnerInUseError,
    WorkerInfo,
    long_gone,
    same_process,
    still_running,
    this_process,
)
from ..stores import Store

log = logging.getLogger("durableagent.worker")


class Heartbeat:
    """Registers ``owner`` in ``store`` and beats until stopped. ``runs()`` tells the run ids
    held at each beat."""

    def __init__(
        self,
        store: Store,
        owner: str,
        runs: Callable[[], list[str]],
        *,
        heartbeat: float,
        agent: str = "",
        concurrency: int = 1,
        code: str = "",
        pinned: bool = False,
        waiting: Callable[[], dict[str, str]] | None = None,
    ) -> None:
        if heartbeat <= 0:
            raise ValueError("heartbeat must be > 0")
        self.store = store
        self.heartbeat = heartbeat
        self._runs = runs
        self._waiting = waiting
        # The package's version, read at run time: importing the package from here would
        # make the worker depend on every layer above it.
        version = str(getattr(sys.modules.get("durableagent"), "__version__", ""))
        self.info = this_process(
            owner,
            agent=agent,
            store=str(getattr(store, "description", store)),
            concurrency=concurrency,
            heartbeat=heartbeat,
            version=version,
            code=code,
            pinned=pinned,
        )
        self._failing = False
        self._shared = False  # another process was seen under this owner (said once)

    def register(self) -> None:
        """The first beat; OwnerInUseError when a live worker of another process has the
        owner name (nothing is written then). A store out of reach is logged: the worker
        serves on and registers at a later beat."""
        try:
            others = self.store.workers()
        except DurableAgentError as e:
            log.warning("cannot read the workers' registry (%s); serving on", e)
            return
        for other in others:
            if other.owner != self.info.owner or same_process(other, self.info):
                continue
            if still_running(other):
                raise OwnerInUseError(self.info.owner, other)
        self.beat()
        self._forget_long_gone(others)

    def _forget_long_gone(self, others: list[WorkerInfo]) -> None:
        """Forget the registrations of workers gone longer than GONE_KEPT (killed, never
        stopped cleanly), so the registry holds the recent past, not every worker ever."""
        gone = [w for w in long_gone(others) if w.owner != self.info.owner]
        try:
            for w in gone:
                self.store.forget_worker(w.owner)
        except DurableAgentError as e:
            log.warning("cannot forget the workers gone long ago (%s)", e)
            return
        if gone:
            log.info(
                "forgot %d worker%s gone for more than %s: %s",
                len(gone),
                "" if len(gone) == 1 else "s",
                format_duration(GONE_KEPT),
                ", ".join(w.owner for w in gone),
            )

    def beat(self) -> None:
        """Tell the store this worker is alive, and what it holds. A registration under
        this owner from another process (two workers started at once under one --owner) is
        said in the log, once: their leases and attempts cannot be told apart."""
        waiting = None if self._waiting is None else tuple(sorted(self._waiting().items()))
        self.info = self.info.beaten(runs=tuple(sorted(self._runs())), waiting=waiting)
        try:
            self._check_alone()
            self.store.beat(self.info)
        except DurableAgentError as e:
            if not self._failing:
                log.warning("cannot register in the store (%s); beating on", e)
            self._failing = True
            return
        if self._failing:
            log.info("registered in the store again")
        self._failing = False

    def _check_alone(self) -> None:
        for other in self.store.workers():
            if other.owner != self.info.owner or same_process(other, self.info):
                continue
            if other.live() and not self._shared:
                log.error(
                    "owner %r is also used by a live worker at %s:%d: their leases and "
                    "attempts cannot be told apart; restart one with another --owner",
                    self.info.owner,
                    other.host,
                    other.pid,
                )
                self._shared = True

    async def run(self, stop: asyncio.Event) -> None:
        """Beat every ``heartbeat`` seconds until ``stop`` is set."""
        while not stop.is_set():
            try:
                await asyncio.wait_for(stop.wait(), self.heartbeat)
            except TimeoutError:
                await asyncio.to_thread(self.beat)

    def forget(self) -> None:
        """Remove the registration (a clean stop)."""
        try:
            self.store.forget_worker(self.info.owner)
        except DurableAgentError as e:
            log.warning("cannot remove this worker's registration (%s)", e)

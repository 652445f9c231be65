"""A worker on its own event loop in a background thread (``agentrun demo``: the main thread
runs the TUI)."""

from __future__ import annotations

import asyncio
import threading
from contextlib import suppress

from .serve import Worker


class WorkerThread:
    """A worker serving on its own event loop in a background thread (for ``agentrun demo``,
    where the main thread runs the TUI). ``stop()`` shuts it down gracefully and joins it."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self._loop = asyncio.new_event_loop()
        self._stop_event: asyncio.Event | None = None
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._main, name="agentrun-worker", daemon=True)

    def _main(self) -> None:
        async def serve() -> None:
            self._stop_event = asyncio.Event()
            self._started.set()
            await self.worker.serve(self._stop_event)

        try:
            self._loop.run_until_complete(serve())
        finally:
            self._started.set()
            self._loop.close()

    def start(self) -> WorkerThread:
        """Start serving; returns once the worker's loop is running."""
        self._thread.start()
        self._started.wait()
        return self

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the worker to stop and wait for it (``timeout`` seconds at most: by default its
        grace period and a little more). True when it has stopped."""
        stop_event = self._stop_event
        if stop_event is not None and self._thread.is_alive():
            with suppress(RuntimeError):  # the loop may have closed in between
                self._loop.call_soon_threadsafe(stop_event.set)
        self._thread.join(self.worker.grace + 5 if timeout is None else timeout)
        return not self._thread.is_alive()

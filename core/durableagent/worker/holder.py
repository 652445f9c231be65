"""Holding an agent's connections open for a worker (its MCP servers, for one).

An agent whose tools need a connection is an async context manager that yields the agent (an
``@asynccontextmanager`` function, or a function returning one). The :class:`Holder` enters it
in a task of its own: the MCP SDK's transports run task groups, and one whose connection
breaks (a streamable-HTTP server that stops answering) cancels the task that entered it. In
its own task that cancels nothing but the holder, never the worker.

When the connection is gone (the holder's task ended, or a run reported it with
:class:`AgentLostError`) and the holder was given a function, it leaves the old context and
enters a fresh one, waiting ``backoff`` seconds, doubling up to ``max_backoff``, between
tries; meanwhile ``value`` is None and the worker starts no run. A context manager given as
such can be entered only once: the holder keeps it even when runs report its connection
gone, and says so when it ends on its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Generic, TypeVar

from ..errors import AgentLostError, AgentStartError

log = logging.getLogger("durableagent.worker")

T = TypeVar("T")

Source = AbstractAsyncContextManager[T] | Callable[[], AbstractAsyncContextManager[T]]


def innermost(error: BaseException) -> str:
    """What went wrong, for a human: the first error inside exception groups (an MCP client's
    task group wraps the refused connection)."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return f"{type(error).__name__}: {error}"


def is_lost(error: BaseException) -> bool:
    """Whether ``error`` (or what caused it) says the agent's connection is gone."""
    seen: set[int] = set()
    e: BaseException | None = error
    while e is not None and id(e) not in seen:
        if isinstance(e, AgentLostError):
            return True
        seen.add(id(e))
        e = e.__cause__ or e.__context__
    return False


class Holder(Generic[T]):
    """Keeps ``source`` entered in its own task while a worker serves (see the module).
    ``check`` refuses what the context yields when it is not an agent (a TypeError whose
    text says why); ``changed`` is called whenever ``value`` changes."""

    def __init__(
        self,
        source: Source[T],
        *,
        check: Callable[[object], T],
        changed: Callable[[], None] = lambda: None,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
    ) -> None:
        self.source = source
        self.check = check
        self.changed = changed
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.value: T | None = None
        self._lost = asyncio.Event()
        self._release = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> T:
        """Enter the context; raises AgentStartError when the first entry fails (nothing has
        run yet: a wrong address or a server that is down is the human's to fix)."""
        first: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(first), name="durableagent-agent")
        return await first

    def lost(self, error: BaseException) -> None:
        """A run found the agent's connection gone: enter a fresh one."""
        if not self._lost.is_set():
            log.warning("the agent's connection is gone (%s); connecting again", innermost(error))
            self._lost.set()

    async def close(self) -> None:
        """Leave the context (after the worker's runs have ended)."""
        self._release.set()
        if self._task is not None:
            await asyncio.gather(self._task, return_exceptions=True)

    async def _hold(self, first: asyncio.Future[T]) -> None:
        try:
            await self._keep(first)
        finally:
            if not first.done():  # cancelled before the first entry: start() must not wait
                first.cancel()

    async def _keep(self, first: asyncio.Future[T]) -> None:
        delay = self.backoff
        while not self._release.is_set():
            self._lost.clear()
            try:
                async with self._context() as entered:
                    agent = self.check(entered)
                    self._set(agent)
                    if not first.done():
                        first.set_result(agent)
                    delay = self.backoff
                    await self._until_released_or_lost()
            except Exception as e:
                if not first.done():
                    first.set_exception(AgentStartError(innermost(e)))
                    return
                log.error("the agent's connection ended: %s", innermost(e))
            finally:
                self._set(None)
            if self._release.is_set():
                return
            if not self._fresh:
                log.error(
                    "the agent cannot connect again: it was given as a context manager, "
                    "which enters once (give the worker a function returning one)"
                )
                return
            await self._sleep(delay)
            delay = min(self.max_backoff, max(delay * 2, 0.05))

    @property
    def _fresh(self) -> bool:
        """Whether a fresh context can be made (a function was given, not a context: an
        ``@asynccontextmanager``'s context is callable too, as a decorator)."""
        return not hasattr(self.source, "__aenter__")

    def _context(self) -> AbstractAsyncContextManager[object]:
        source = self.source
        if isinstance(source, AbstractAsyncContextManager) or not callable(source):
            return source
        return source()

    def _set(self, value: T | None) -> None:
        if self.value is not value:
            self.value = value
            self.changed()

    async def _until_released_or_lost(self) -> None:
        # A context that enters once is kept even when its connection is gone: without it
        # the worker could run nothing at all.
        events = (self._release, self._lost) if self._fresh else (self._release,)
        waits = [asyncio.ensure_future(e.wait()) for e in events]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()

    async def _sleep(self, seconds: float) -> None:
        """Sleep, but wake at once when the worker stops."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._release.wait(), seconds)

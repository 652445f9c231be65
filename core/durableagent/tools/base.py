"""Tools, their results, and the context a tool call runs in."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import threading
import typing
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ..durations import parse_duration
from .inflight import in_flight


@dataclass(frozen=True, slots=True)
class Result:
    """What a tool produced. ``is_error`` results are recorded like any other."""

    content: str
    is_error: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {"content": self.content, "is_error": self.is_error}

    @classmethod
    def from_dict(cls, d: Any) -> Result:
        if not isinstance(d, dict) or not isinstance(d.get("content"), str):
            raise ValueError("a tool result must be an object with a string content")
        return cls(content=d["content"], is_error=bool(d.get("is_error", False)))


class Cancelled(threading.Event):
    """Set when a cancel or pause of the run is accepted while its step runs: a
    ``threading.Event`` a tool in a thread can poll or wait on, and awaitable on any event
    loop (:meth:`wait_async`) for an async tool."""

    def __init__(self) -> None:
        super().__init__()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._guard = threading.Lock()

    def set(self) -> None:
        super().set()
        with self._guard:
            waiters, self._waiters = self._waiters, []
        for loop, fut in waiters:
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits there
                loop.call_soon_threadsafe(_resolve, fut)

    async def wait_async(self) -> None:
        """Return once the event is set (at once if it is)."""
        if self.is_set():
            return
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._guard:
            if self.is_set():
                return
            waiter = (loop, fut)
            self._waiters.append(waiter)
        try:
            await fut
        finally:
            with self._guard:
                if waiter in self._waiters:
                    self._waiters.remove(waiter)


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Where a tool call runs: pass ``idempotency_key`` to the external system (an
    ``Idempotency-Key`` header, a ticket's external id) so that running the step again does
    not do the work twice.

    - ``run_id``: the run ("" in a plain run, which has no journal).
    - ``step``: the step name, e.g. ``tool/2/0/create_ticket``.
    - ``attempt``: 1 the first time this step runs, 2 the next, ... (its ``step.started``
      records so far, this one included).
    - ``idempotency_key``: the same string every time this step runs in this run (see
      :func:`durableagent.journal.idempotency_key`); never the same for two runs. A plain run
      is not durable, so each of its calls gets a fresh key.
    - ``fence``: ``(run_id, epoch)``, the lease's fencing token (None outside a leased run).
      A holder paused past its lease (a GC pause, a frozen VM, SIGSTOP) can wake after another
      worker took the run over, with its write already on the wire: no store can stop that,
      but the system written to can, by refusing a write whose epoch is lower than one it has
      seen for that run (Kleppmann's fencing tokens). Pass it along with the write.
    - ``cancelled``: set when a human cancels or pauses the run while this step runs (a
      ``threading.Event``; ``await ctx.wait_cancelled()`` in an async tool). A long tool may
      end early: whatever it returns is recorded as its result, and if it raises, a write is
      indeterminate as always. A read that ignores it is cancelled anyway (its result is not
      recorded); a write is never interrupted.
    """

    run_id: str
    step: str
    attempt: int
    idempotency_key: str
    fence: tuple[str, int] | None = None
    cancelled: Cancelled = field(default_factory=Cancelled, compare=False, repr=False)

    async def wait_cancelled(self) -> None:
        """Return once the run is cancelled or paused (see ``cancelled``)."""
        await self.cancelled.wait_async()


_CONTEXT: contextvars.ContextVar[ToolContext | None] = contextvars.ContextVar(
    "durableagent_tool_context", default=None
)


def current_context() -> ToolContext:
    """The context of the step running now. The runner sets it around the step (a context
    variable, so it reaches sync tools in their thread too); outside a runner it is a plain
    call's: no run, attempt 1, a fresh key."""
    ctx = _CONTEXT.get()
    return ctx if ctx is not None else plain_context("")


def plain_context(step: str) -> ToolContext:
    """The context of a step run without a journal: nothing can run it again, so its key is
    fresh (a constant key would make an external system merge unrelated calls)."""
    return ToolContext("", step, 1, f"plain-{uuid.uuid4().hex}:{step}")


def set_context(ctx: ToolContext) -> contextvars.Token[ToolContext | None]:
    """Make ``ctx`` the current step's context; undo with :func:`reset_context`."""
    return _CONTEXT.set(ctx)


def reset_context(token: contextvars.Token[ToolContext | None]) -> None:
    _CONTEXT.reset(token)


# Where a tool's policy (write, approve, idempotent) came from, when its code did not say.
CLASSIFIED_BY = ("annotation", "override", "default")

ToolFn = Callable[..., "Result | str | Awaitable[Result | str]"]


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model may call. ``fn`` takes the arguments dict and returns a Result or a
    str, sync or async; when it also has a parameter annotated :class:`ToolContext` (or named
    ``ctx``), that is passed by keyword. A tool that raises has produced no result (its step
    is not recorded).

    The policy lives with the tool (:func:`durableagent.gate_for` turns it into a PolicyGate):
    ``write`` (it has side effects), ``approve`` (a human must approve each call; None: the
    same as ``write``), ``idempotent`` (a write the external system deduplicates on the
    step's idempotency key, so an unfinished one is simply run again) and ``hint`` (where a
    human can check whether an unfinished write happened, shown when reconciling).
    ``approve_within`` (seconds, or a duration such as ``"2h"``) is how long a call waiting
    for a human waits before it is denied (``by: "deadline"``): never approved.

    ``classified_by`` says where that policy came from when the code did not declare it: one
    of :data:`CLASSIFIED_BY` ("annotation": the server's annotations, "override": the
    caller's overrides, "default": nothing trusted was said); "" for a tool whose policy is
    its own code's. It is recorded with each call and shown wherever the class is. ``origin``
    names where the tool comes from in messages (``MCP server 'tickets'``, ``function
    helpdesk.create_ticket``; "": its function's name). ``about`` is shown to the human next
    to the class and never used by the gate (an MCP tool's title and whether it reaches an
    open world)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    fn: ToolFn | None = None
    write: bool = False
    approve: bool | None = None
    idempotent: bool = False
    hint: str = ""
    approve_within: float | str | None = None
    classified_by: str = ""
    origin: str = ""
    about: str = ""
    _ctx_param: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.idempotent and not self.write:
            raise ValueError(
                f"tool {self.name!r}: idempotent applies to writes (a read is always run "
                "again); declare it write=True, idempotent=True"
            )
        if self.approve_within is not None:
            try:
                within = parse_duration(self.approve_within)
            except ValueError as e:
                raise ValueError(f"tool {self.name!r}: approve_within: {e}") from None
            object.__setattr__(self, "approve_within", within)
        if self.classified_by not in ("", *CLASSIFIED_BY):
            raise ValueError(
                f"tool {self.name!r}: classified_by is one of {', '.join(CLASSIFIED_BY)}, "
                f"or empty for a policy declared in code; not {self.classified_by!r}"
            )
        if self.fn is not None:
            object.__setattr__(self, "_ctx_param", context_parameter(self.fn))

    @property
    def needs_approval(self) -> bool:
        """Whether each call waits for a human (``approve``, else ``write``)."""
        return self.write if self.approve is None else self.approve

    def describe_origin(self) -> str:
        """Where the tool comes from, for a message: its ``origin``, else its function."""
        if self.origin:
            return self.origin
        fn = self.fn
        where = getattr(fn, "__qualname__", None) or type(fn).__name__
        module = getattr(fn, "__module__", None)
        return f"function {module}.{where}" if module else f"function {where}"

    async def call(self, arguments: dict[str, Any]) -> Result:
        """Run the tool. Sync tools run in a thread so a slow one never stalls the event loop."""
        if self.fn is None:
            raise RuntimeError(f"tool {self.name!r} has no function")
        extra = {} if self._ctx_param is None else {self._ctx_param: current_context()}
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(arguments, **extra)
        else:
            run_id = current_context().run_id
            out = await asyncio.to_thread(_counted, run_id, self.fn, arguments, extra)
            if inspect.isawaitable(out):
                out = await out
        if isinstance(out, str):
            return Result(out)
        if isinstance(out, Result):
            return out
        raise TypeError(f"tool {self.name!r} returned {type(out).__name__}; return a Result or str")


def _counted(run_id: str, fn: Callable[..., Any], arguments: Any, extra: dict[str, Any]) -> Any:
    """Run a sync tool in its thread, counted as a call of ``run_id`` in flight until it
    returns (see inflight.py): the thread goes on even when its attempt was cancelled."""
    with in_flight(run_id):
        return fn(arguments, **extra)


def context_parameter(fn: Callable[..., Any]) -> str | None:
    """The name of ``fn``'s keyword parameter that takes a ToolContext: one annotated
    ToolContext (any name), else one named ``ctx``; None when it takes none."""
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):  # a builtin without a signature takes no context
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable annotations: fall back to their text
        hints = {}
    named = None
    # The first positional parameter receives the arguments dict, whatever its name.
    for i, p in enumerate(params.values()):
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY) or (
            i == 0 and p.kind == p.POSITIONAL_OR_KEYWORD
        ):
            continue
        hint = hints.get(p.name, p.annotation)
        if hint is ToolContext or hint == "ToolContext" or hint == "ToolContext | None":
            return p.name
        if p.name == "ctx" and named is None:
            named = p.name
    return named

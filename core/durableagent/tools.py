"""Tools and their results."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any


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


ToolFn = Callable[[dict[str, Any]], "Result | str | Awaitable[Result | str]"]


@dataclass(frozen=True, slots=True)
class Tool:
    """A tool the model may call. ``fn`` takes the arguments dict and returns a Result or a
    str, sync or async. A tool that raises has produced no result (its step is not recorded)."""

    name: str
    description: str = ""
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object"})
    fn: ToolFn | None = None

    async def call(self, arguments: dict[str, Any]) -> Result:
        """Run the tool. Sync tools run in a thread so a slow one never stalls the event loop."""
        if self.fn is None:
            raise RuntimeError(f"tool {self.name!r} has no function")
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(arguments)
        else:
            out = await asyncio.to_thread(self.fn, arguments)
            if inspect.isawaitable(out):
                out = await out
        if isinstance(out, str):
            return Result(out)
        if isinstance(out, Result):
            return out
        raise TypeError(f"tool {self.name!r} returned {type(out).__name__}; return a Result or str")

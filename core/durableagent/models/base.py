"""The model seam and a scripted model for tests and demos."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from ..messages import Message
from ..tools import Tool


class Model(Protocol):
    """Anything that answers a conversation with one assistant message."""

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message: ...


Reply = Message | Callable[[Sequence[Message]], Message]


class ScriptedModel:
    """Replays ``replies`` in order (each a Message, or a function of the messages) and counts
    ``.calls``. Deterministic: made for tests and demos. ``output_limit`` is what a budgeted
    run reserves for each reply (None: the default of budget.py)."""

    def __init__(
        self,
        replies: Sequence[Reply] | Callable[[Sequence[Message]], Message],
        *,
        output_limit: int | None = None,
    ) -> None:
        self._replies = replies
        self.calls = 0
        self.output_limit = output_limit

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        self.calls += 1
        if callable(self._replies):
            return self._replies(messages)
        if self.calls > len(self._replies):
            raise RuntimeError(f"ScriptedModel has {len(self._replies)} replies; call {self.calls}")
        reply = self._replies[self.calls - 1]
        return reply(messages) if callable(reply) else reply

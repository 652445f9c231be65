"""One attempt of a durable Pydantic AI run: what the engine's hooks and units do with the
attempt's :class:`~durableagent.turns.Turns` (see engine.py, and docs/integrations.md)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults, RunContext, ToolDenied
from pydantic_ai.messages import ModelMessagesTypeAdapter
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import RunUsage

from ...budget import reservation
from ...gate import Pending
from ...messages import ToolCall
from ...turns import Turns
from . import shapes
from .engine import NotDurableError, unapproved

if TYPE_CHECKING:
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models import ModelRequestContext

    from .classes import Classes

# The run's usage a tool call may add to (a nested agent given ``usage=ctx.usage``): recorded
# with the step, given back to the run when the step is replayed.
_USAGE_FIELDS = ("input_tokens", "output_tokens", "requests", "tool_calls")


class Waiting(Exception):
    """Internal: calls wait for a human; the attempt ends awaiting approval."""

    def __init__(self, pending: tuple[Pending, ...]) -> None:
        super().__init__(f"{len(pending)} call(s) wait for a human")
        self.pending = pending


class Attempt:
    """The attempt's state: its ``Turns``, the calls each turn's reply asked for, and the
    model request being made (for a budget's reservation)."""

    def __init__(self, turns: Turns, classes: Classes) -> None:
        self.turns = turns
        self.classes = classes
        self.output_tools: frozenset[str] = frozenset()
        self.calls: list[ToolCall] = []  # the current turn's, in the reply's order
        self.claimed: set[int] = set()  # which of them a unit or a decision has taken
        self.request: ModelRequestContext | None = None  # the model request being made

    # -- what the hooks tell ----------------------------------------------------------------

    def offer(self, tool_defs: list[ToolDefinition]) -> list[ToolDefinition]:
        """The function tools of this request: told to ``Turns`` (with their class) and,
        those a human decides on (gated, or denied by policy), given to Pydantic AI as tools
        it defers before they run: that is how a decision reaches it, a deny as its own
        ``ToolDenied``."""
        tools = [self.classes.tool(t) for t in tool_defs]
        self.turns.gate = self.classes.gate_with(self.turns.gate, tools)
        self.turns.know(tools)
        gate = self.turns.gate
        return [
            unapproved(t)
            if t.kind == "function" and (gate.needs_approval(t.name) or gate.is_denied(t.name))
            else t
            for t in tool_defs
        ]

    def sending(self, request: ModelRequestContext) -> None:
        """The request about to be made (its reservation is reckoned from it, when asked)."""
        self.request = request

    def reservation(self) -> int:
        """The tokens the request may use: its ``max_tokens`` (else the default output limit)
        and an estimate of what it sends. Asked only in a run with a budget: the sizing dumps
        the whole conversation."""
        request = self.request
        if request is None:
            return reservation(None, 0)
        sent = ModelMessagesTypeAdapter.dump_json(request.messages)
        tools = request.model_request_parameters.function_tools
        schemas = json.dumps([[t.name, t.description, t.parameters_json_schema] for t in tools])
        limit = (request.model_settings or {}).get("max_tokens")
        return reservation(limit if isinstance(limit, int) else None, len(sent) + len(schemas))

    # -- the units ---------------------------------------------------------------------------

    async def model_step(self, body: Callable[[], Awaitable[object]]) -> object:
        """A model request: the next turn's ``llm/T``, recorded or replayed. Before any call
        of the reply runs, the calls a human must decide on stop the attempt (``Waiting``)."""

        async def request() -> Any:
            return shapes.reply_of(await body(), self.output_tools)

        recorded = await self.turns.model(request, reserve=self.reservation)
        self.calls = [ToolCall.from_dict(c) for c in recorded.get("tool_calls") or ()]
        self.claimed = set()
        pending = self.turns.pending(self.calls)
        if pending:
            raise Waiting(pending)
        for i, call in enumerate(self.calls):
            if call.error is None and call.name not in self.turns.tools:
                # Pydantic AI answers an unknown tool with a retry prompt of its own; the
                # journal records the call refused, so that no requested call stays open.
                await self.turns.tool(i, call, _never)
        return shapes.response_of(recorded)

    async def tool_step(
        self, part: ToolCallPart, ctx: RunContext[Any], body: Callable[[], Awaitable[object]]
    ) -> object:
        """A tool call: ``tool/T/I/NAME``, ``I`` its position in the turn's reply. It runs
        through Pydantic AI's toolset (its validation, its ``RunContext``, the deps); what it
        adds to the run's usage is recorded with it and given back on replay."""
        index, call = self.locate(part, claim=True)
        before = _counts(ctx.usage)
        ran = False

        async def invoke() -> Any:
            nonlocal ran
            ran = True
            payload = await body()
            asked = shapes.asks_a_human(payload)
            if asked is not None:
                raise NotDurableError(
                    f"tool {call.name!r} raised {asked} from inside its body: durableagent "
                    "decides before a call runs; declare it requires_approval=True or list it "
                    "in durable(approve=...)"
                )
            spent = {k: v - before[k] for k, v in _counts(ctx.usage).items() if v != before[k]}
            return shapes.result_of(payload, spent)

        recorded = await self.turns.tool(index, call, invoke)
        spent = recorded.get("usage") if isinstance(recorded, dict) else None
        if not ran and isinstance(spent, dict):
            ctx.usage.incr(RunUsage(**{k: v for k, v in spent.items() if k in _USAGE_FIELDS}))
        return shapes.outcome_of(recorded)

    async def invalid(self, part: ToolCallPart, error: Any) -> None:
        """A call Pydantic AI refused on validation (it asks the model again): recorded as the
        call's refused step, so that no requested call stays open."""
        index, call = self.locate(part, claim=True)
        why = f"arguments rejected: {error}" if call.error is None else call.error
        await self.turns.tool(index, dataclasses.replace(call, error=why), _never)

    async def answer(self, requests: DeferredToolRequests) -> DeferredToolResults:
        """The decisions on the calls Pydantic AI deferred for a human, from the journal:
        an approval bound to the call's marker (so to its exact arguments), a step that has
        its result already, or a refusal (``ToolDenied`` with the reason, its step recorded).
        A call nobody decided on stops the attempt (``Waiting``)."""
        if requests.calls:
            names = ", ".join(sorted({p.tool_name for p in requests.calls}))
            raise NotDurableError(
                f"external tool calls ({names}) cannot be made durable: their results come "
                "from outside the run"
            )
        decided: dict[str, bool | ToolDenied] = {}
        waiting: list[Pending] = []
        for part in requests.approvals:
            index, call = self.locate(part, claim=False)
            reason = self.turns.refusal(index, call)
            if reason is not None:
                await self.turns.tool(index, call, _never)
                decided[part.tool_call_id] = ToolDenied(reason)
                continue
            pending = self.turns.waiting(index, call, asked=True)
            if pending is None:
                decided[part.tool_call_id] = True
            else:
                waiting.append(pending)
        if waiting:
            raise Waiting(tuple(waiting))
        return DeferredToolResults(approvals=dict(decided))

    def locate(self, part: ToolCallPart, *, claim: bool) -> tuple[int, ToolCall]:
        """Which call of the current turn ``part`` is: by its id and tool among those not yet
        taken (one id can come back in another turn, and even twice in one reply), then by
        its tool and arguments. Its position, not its id, names its step."""
        arguments = part.args_as_dict()
        candidates = [
            i
            for i, c in enumerate(self.calls)
            if c.name == part.tool_name and (c.id == part.tool_call_id or c.arguments == arguments)
        ]
        if not candidates:
            raise NotDurableError(
                f"tool call {part.tool_name!r} ({part.tool_call_id}) is not one the turn's "
                "recorded reply asked for"
            )
        free = [i for i in candidates if i not in self.claimed]
        by_id = [i for i in free if self.calls[i].id == part.tool_call_id]
        index = (by_id or free or candidates)[0]
        if claim:
            self.claimed.add(index)
        return index, self.calls[index]


async def _never() -> Any:
    raise AssertionError("a refused call is recorded without being called")


def _counts(usage: RunUsage) -> dict[str, int]:
    return {k: int(getattr(usage, k, 0) or 0) for k in _USAGE_FIELDS}

"""The agent loop: our own agent (``AgentConfig``) runs its model turns and tool calls through
:class:`~durableagent.turns.Turns`, the seam every step goes through (see turns.py)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .budget import Budget, Prices, reservation
from .durations import parse_duration
from .errors import ToolNameCollisionError
from .gate import PolicyGate
from .messages import Message, ToolCall
from .models.base import Model
from .tools import Result, Tool
from .turns import LoopOutcome, PlainRunner, StepFn, StepRunner, Turns


@dataclass(frozen=True)
class AgentConfig:
    """The model, its tools, an optional system prompt (sent first on every call, never
    recorded as input) and the turn limit.

    ``budget`` is recorded in the ``run.started`` of each run this agent starts that was not
    given one (``submit(..., budget=)``); ``prices`` (``{"model": (per million input, per
    million output)}``) are what a budget's ``cost`` counts in; ``approve_within`` (seconds,
    or a duration such as ``"2h"``) is how long any gated call waits for a human before it
    is denied, unless its tool or gate says otherwise (SPEC §10).

    This is where an agent's tools come together (its own functions, each MCP server's), so
    two tools of one name are refused here, naming where each came from: the model could not
    tell them apart, and every step would run whichever came last."""

    model: Model
    tools: Sequence[Tool] = ()
    system: str | None = None
    max_turns: int = 20
    budget: Budget | None = None
    prices: Prices | None = None
    approve_within: float | str | None = None

    def __post_init__(self) -> None:
        if self.approve_within is not None:
            object.__setattr__(self, "approve_within", parse_duration(self.approve_within))
        seen: dict[str, Tool] = {}
        for t in self.tools:
            first = seen.setdefault(t.name, t)
            if first is not t:
                raise ToolNameCollisionError(t.name, first.describe_origin(), t.describe_origin())

    async def run_turns(self, messages: Sequence[Message], turns: Turns) -> LoopOutcome:
        """The loop itself (``AgentLoop``): a model step per turn; an answer without tool
        calls ends it; otherwise the turn's calls a human must decide on stop it as pending,
        before any call runs, and else each call runs in order and its result goes back to the
        model as a tool message."""
        tools = {t.name: t for t in self.tools}
        # One list for the whole run, appended to in place: replay stays linear.
        convo: list[Message] = [Message("system", self.system)] if self.system else []
        convo.extend(messages)
        while True:

            async def call_model() -> Any:
                reply = await self.model.complete(convo, self.tools)
                return reply.to_dict()

            reply = Message.from_dict(
                await turns.model(call_model, reserve=lambda: _reservation(self, convo))
            )
            convo.append(reply)
            if not reply.tool_calls:
                return LoopOutcome(reply)
            pending = turns.pending(reply.tool_calls)
            if pending:
                return LoopOutcome(None, pending)
            for i, call in enumerate(reply.tool_calls):
                result = Result.from_dict(await turns.tool(i, call, _invoke(call, tools)))
                convo.append(Message("tool", result.content, tool_call_id=call.id, name=call.name))


async def run_loop(
    config: AgentConfig,
    messages: Sequence[Message],
    *,
    runner: StepRunner | None = None,
    gate: PolicyGate | None = None,
    approved: Iterable[str] = (),
    denied: Mapping[str, str] | None = None,
) -> LoopOutcome:
    """Run model turns and tool calls until the model answers without tool calls.

    Before any call of a turn runs, every unrecorded call is checked: if one needs a human,
    the loop returns all such calls of that turn as pending and runs none of them.
    """
    turns = Turns(
        runner,
        gate,
        approved=approved,
        denied=denied,
        tools=config.tools,
        max_turns=config.max_turns,
    )
    return await config.run_turns(messages, turns)


def _reservation(config: AgentConfig, convo: Sequence[Message]) -> int:
    """The tokens the next model call may use: its adapter's output limit (``output_limit``,
    when it has one) and an estimate of what it is sent."""
    sent = json.dumps([m.to_dict() for m in convo]) + json.dumps(
        [[t.name, t.description, t.parameters] for t in config.tools]
    )
    return reservation(getattr(config.model, "output_limit", None), len(sent))


def _invoke(call: ToolCall, tools: Mapping[str, Tool]) -> StepFn:
    """The step function calling ``call``'s tool (Turns refuses an unknown one first)."""

    async def invoke() -> Any:
        return (await tools[call.name].call(call.arguments)).to_dict()

    return invoke


__all__ = [
    "AgentConfig",
    "LoopOutcome",
    "PlainRunner",
    "StepFn",
    "StepRunner",
    "run_loop",
]

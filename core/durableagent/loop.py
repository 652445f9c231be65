"""The agent loop and its seam: every model and tool call goes through a StepRunner."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .budget import Budget, Prices, reservation
from .calls import marker_for
from .durations import parse_duration
from .errors import MaxTurnsExceeded, ToolNameCollisionError
from .gate import Pending, PolicyGate, describe_policy, policy_source
from .messages import Message, StepKind, ToolCall
from .models.base import Model
from .steps import model_step, tool_step
from .tools import Result, Tool, plain_context, reset_context, set_context

StepFn = Callable[[], Awaitable[Any]]


class StepRunner(Protocol):
    """Runs one named step. A durable runner journals it; a plain one just awaits ``fn``."""

    async def run_step(
        self,
        name: str,
        kind: StepKind,
        fn: StepFn,
        *,
        write: bool = False,
        marker: str | None = None,
        idempotent: bool = False,
        hint: str = "",
        classified_by: str = "",
        refused: bool = False,
        gated: bool = False,
        reserve: Callable[[], int] | None = None,
    ) -> Any: ...

    def is_recorded(self, name: str) -> bool: ...


# A runner that sets ``reserves`` true is given each model step's ``reserve``: a function
# returning the tokens the call may use (see budget.reservation); other runners never are.


class PlainRunner:
    """Awaits each step; remembers nothing."""

    async def run_step(
        self,
        name: str,
        kind: StepKind,
        fn: StepFn,
        *,
        write: bool = False,
        marker: str | None = None,
        idempotent: bool = False,
        hint: str = "",
        classified_by: str = "",
        refused: bool = False,
        gated: bool = False,
        reserve: Callable[[], int] | None = None,
    ) -> Any:
        token = set_context(plain_context(name))
        try:
            return await fn()
        finally:
            reset_context(token)

    def is_recorded(self, name: str) -> bool:
        return False


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


@dataclass(frozen=True)
class LoopOutcome:
    """``message`` set: the run answered. ``pending`` non-empty: it waits for a human."""

    message: Message | None
    pending: tuple[Pending, ...] = field(default=())


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
    runner = runner or PlainRunner()
    gate = gate or PolicyGate()
    approved_set = frozenset(approved)
    denied_map: Mapping[str, str] = denied or {}
    tools = {t.name: t for t in config.tools}
    # One list for the whole run, appended to in place: replay stays linear.
    convo: list[Message] = [Message("system", config.system)] if config.system else []
    convo.extend(messages)

    for turn in range(1, config.max_turns + 1):

        async def call_model() -> Any:
            reply = await config.model.complete(convo, config.tools)
            return reply.to_dict()

        budgeting: dict[str, Any] = {}
        if getattr(runner, "reserves", False):
            budgeting["reserve"] = lambda: _reservation(config, convo)
        reply = Message.from_dict(
            await runner.run_step(model_step(turn), StepKind.MODEL, call_model, **budgeting)
        )
        convo.append(reply)
        if not reply.tool_calls:
            return LoopOutcome(reply)

        steps = [tool_step(turn, i, c.name) for i, c in enumerate(reply.tool_calls)]
        markers = [marker_for(s, c.arguments) for s, c in zip(steps, reply.tool_calls, strict=True)]
        pending = tuple(
            Pending(m, s, c.name, c.arguments, _policy_line(tools.get(c.name), gate))
            for s, m, c in zip(steps, markers, reply.tool_calls, strict=True)
            if not runner.is_recorded(s)
            and gate.needs_approval(c.name)
            and c.error is None  # a malformed call is refused below, never put to a human
            and not gate.is_denied(c.name)
            and m not in approved_set
            and m not in denied_map
        )
        if pending:
            return LoopOutcome(None, pending)

        for step, marker, call in zip(steps, markers, reply.tool_calls, strict=True):
            fn, write, acts = _tool_fn(call, marker, tools, gate, denied_map)
            # A call that will act carries its marker: a deny recorded after this attempt
            # began still stops it, up to the moment its start is recorded. A refused one
            # records the gate's class all the same (a denied write is still a write), and
            # that it was refused (so it never waits for a reconcile).
            policy = _write_policy(tools.get(call.name), gate, write) if acts else {}
            if acts and not write and gate.needs_approval(call.name):
                policy["gated"] = True  # a read a human approved: checked before it runs
            recorded = await runner.run_step(
                step,
                StepKind.TOOL,
                fn,
                write=write,
                marker=marker if acts else None,
                **(policy if acts else {"refused": True}),
            )
            result = Result.from_dict(recorded)
            convo.append(Message("tool", result.content, tool_call_id=call.id, name=call.name))

    raise MaxTurnsExceeded(config.max_turns)


def _reservation(config: AgentConfig, convo: Sequence[Message]) -> int:
    """The tokens the next model call may use: its adapter's output limit (``output_limit``,
    when it has one) and an estimate of what it is sent."""
    sent = json.dumps([m.to_dict() for m in convo]) + json.dumps(
        [[t.name, t.description, t.parameters] for t in config.tools]
    )
    return reservation(getattr(config.model, "output_limit", None), len(sent))


def _policy_line(tool: Tool | None, gate: PolicyGate) -> str:
    return "" if tool is None else describe_policy(tool, gate)


def _write_policy(tool: Tool | None, gate: PolicyGate, write: bool) -> dict[str, Any]:
    """``idempotent`` and ``hint`` for a write's start, and ``classified_by`` for any tool
    call's (where its class came from, when its code did not declare it), passed only when
    they apply so that a StepRunner written before them still runs every other call."""
    if tool is None:
        return {}
    source = policy_source(tool, gate)
    policy: dict[str, Any] = {"classified_by": source} if source else {}
    if not write:
        return policy
    if gate.is_idempotent(tool.name):
        policy["idempotent"] = True
    if tool.hint:
        policy["hint"] = tool.hint
    return policy


def _tool_fn(
    call: ToolCall,
    marker: str,
    tools: Mapping[str, Tool],
    gate: PolicyGate,
    denied: Mapping[str, str],
) -> tuple[StepFn, bool, bool]:
    """The step function for one call, the gate's class of its tool (a write?), and whether
    it calls the tool. A refused call records an error result without touching the tool."""
    refusal: str | None = None
    if gate.is_denied(call.name):
        refusal = f"denied by policy: the tool {call.name!r} is not allowed"
    elif marker in denied:
        refusal = denied[marker]
    elif call.name not in tools:
        refusal = f"unknown tool {call.name!r}; available: {', '.join(sorted(tools)) or 'none'}"
    elif call.error is not None:
        refusal = call.error
    if refusal is not None:
        refused = Result(refusal, is_error=True).to_dict()

        async def refuse() -> Any:
            return refused

        return refuse, gate.is_write(call.name), False

    tool = tools[call.name]

    async def invoke() -> Any:
        return (await tool.call(call.arguments)).to_dict()

    return invoke, gate.is_write(call.name), True

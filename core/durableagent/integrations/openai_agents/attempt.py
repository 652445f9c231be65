"""One attempt of a durable Agents SDK run: what the wrapped model, tools and handoffs do with
the attempt's :class:`~durableagent.turns.Turns` (see docs/integrations.md).

- a model request (``Model.get_response``, or ``stream_response`` as one response) is the next
  turn's ``llm/T``; its record names the agent that asked;
- a function tool's call (through its ``on_invoke_tool``, with the SDK's ``ToolContext``) and a
  handoff are ``tool/T/I/NAME``, ``I`` the call's position among the turn's reply's calls;
- the journal decides on the turn's gated calls as soon as the model step returns, before any
  call of the turn runs, and drives the SDK's own approval machinery from that decision (an
  approval bound to the call's marker, a deny as the SDK's rejection with the human's reason).

Everything a wrapper needs from its run comes through context variables: one wrapped agent
serves every run of a worker at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from agents import RunHooks, ToolApprovalItem
from agents.items import ModelResponse
from openai.types.responses import ResponseFunctionToolCall

from ...budget import reservation
from ...errors import DurableAgentError
from ...gate import Pending, PolicyGate
from ...messages import ToolCall
from ...tools import Tool
from ...turns import Turns
from . import shapes

if TYPE_CHECKING:
    from agents import RunContextWrapper
    from agents.tool_context import ToolContext

    from .graph import Graph

# The attempt of the run this task belongs to (None: not in a durable run; the agent runs as
# it would without us), and the tool call this task is executing (its SDK call id).
ATTEMPT: ContextVar[Attempt | None] = ContextVar("durableagent_openai_attempt", default=None)
CALL: ContextVar[str | None] = ContextVar("durableagent_openai_call", default=None)


class NotDurableError(DurableAgentError):
    """A feature of the agent that the journal cannot make durable: refused, never run
    silently without it."""


class Waiting(Exception):
    """Internal: calls wait for a human; the attempt ends awaiting approval."""

    def __init__(self, pending: tuple[Pending, ...]) -> None:
        super().__init__(f"{len(pending)} call(s) wait for a human")
        self.pending = pending


class Attempt:
    """The attempt's state: its ``Turns``, the agent asking, the calls of the current turn's
    reply, and which of them ran."""

    def __init__(self, turns: Turns, graph: Graph) -> None:
        self.turns = turns
        self.graph = graph
        self.active = ""  # the agent whose model request comes next (the runner's hook says)
        self.context: RunContextWrapper[Any] | None = None  # the run's, for its approvals
        self.calls: list[ToolCall] = []  # the current turn's, in the reply's order
        self.claimed: set[int] = set()
        self.order: list[int] = []  # the function-tool calls that will run, in their order
        self.finished: set[int] = set()
        self.changed = asyncio.Condition()
        self.raised: dict[str, Exception] = {}  # call id -> what its tool raised, SDK-handled
        self.fatal: BaseException | None = None  # what must end the attempt, as it is
        self.listed: dict[str, frozenset[str]] = {}  # agent -> its MCP tools this turn

    # -- the runner's hooks ----------------------------------------------------------------

    def asking(self, context: RunContextWrapper[Any], agent: Any) -> None:
        self.context = context
        self.active = str(agent.name)

    def offer(self, agent: str, tools: list[Tool]) -> None:
        """The MCP tools agent ``agent`` offers this turn: told to ``Turns``, their classes
        added to the attempt's gate before its calls are decided on."""
        self.turns.gate = gate_with(self.turns.gate, tools)
        self.turns.know(tools)
        self.listed[agent] = frozenset(t.name for t in tools)

    # -- a model request ---------------------------------------------------------------------

    async def model_step(
        self, request: Callable[[], Awaitable[ModelResponse]], sizing: Callable[[], int]
    ) -> ModelResponse:
        """The next turn's ``llm/T``, recorded or replayed. Before any call of the reply runs,
        the calls a human must decide on stop the attempt (``Waiting``); the decided ones are
        handed to the SDK's approvals. Once something ended the attempt, a request the SDK
        makes again (its own retry policy) gets that again: a turn is asked once an attempt."""
        if self.fatal is not None:
            raise self.fatal
        agent = self.active
        self.turns.know(self.graph.tools_of(agent))

        async def call() -> Any:
            return shapes.reply_of(await request(), agent)

        try:
            recorded = await self.turns.model(call, reserve=sizing)
        except BaseException as e:
            self.fatal = e
            raise
        if recorded.get("agent", agent) != agent:
            self.fatal = NotDurableError(
                f"llm/{self.turns.turn} was recorded for agent {recorded.get('agent')!r}, and "
                f"the run now asks {agent!r}: the agent's handoffs changed since it was recorded"
            )
            raise self.fatal
        response = shapes.response_of(recorded)
        self.calls = [ToolCall.from_dict(c) for c in recorded.get("tool_calls") or ()]
        self.claimed, self.finished = set(), set()
        pending = self.turns.pending(self.calls)
        if pending:
            self.fatal = Waiting(pending)
            raise self.fatal
        try:
            await self.decide(agent, response)
        except BaseException as e:
            self.fatal = e
            raise
        return response

    async def decide(self, agent: str, response: ModelResponse) -> None:
        """Hand the journal's decision on each gated call of the reply to the SDK (which asks
        for one before calling a tool with ``needs_approval``): approved, when its marker is
        (or its step has its result), else rejected with the reason the model reads. And fix
        the order the reply's function-tool calls run in: one at a time, by call id. A
        refused call's step is recorded now: the SDK never calls its tool."""
        functions = self.graph.function_names(agent) | self.listed.get(agent, frozenset())
        known = functions | self.graph.handoff_names(agent)
        items = {
            (item.call_id, item.name): item
            for item in response.output
            if isinstance(item, ResponseFunctionToolCall)
        }
        runs: list[int] = []
        for i, call in enumerate(self.calls):
            if call.name not in known:
                # The SDK raises, or answers the model itself (tool_not_found_behavior): the
                # call is recorded refused, so that no requested call stays open.
                why = f"unknown tool {call.name!r} for agent {agent!r}"
                await self.turns.tool(i, dataclasses.replace(call, error=why), _never)
                continue
            if call.name not in functions:
                continue
            reason = self.turns.refusal(i, call)
            gated = self.turns.gate.needs_approval(call.name) or self.turns.gate.is_denied(
                call.name
            )
            if reason is None:
                runs.append(i)
            else:
                await self.turns.tool(i, call, _never)
            if not gated or self.context is None:
                continue
            item = ToolApprovalItem(
                agent=self.graph.agent(agent),
                raw_item=items[(call.id, call.name)],
                tool_name=call.name,
            )
            if reason is None:
                self.context.approve_tool(item)
            else:
                self.context.reject_tool(item, rejection_message=reason)
        self.order = sorted(runs, key=lambda i: (self.calls[i].id, i))

    # -- a tool call ---------------------------------------------------------------------------

    async def tool_step(
        self,
        ctx: ToolContext[Any],
        arguments: str,
        invoke: Callable[[ToolContext[Any], str], Awaitable[Any]],
    ) -> Any:
        """A function tool's call: ``tool/T/I/NAME``, run through the tool's own
        ``on_invoke_tool`` with the SDK's ``ToolContext``, one call at a time. A write whose
        tool raised leaves its step open (the SDK would have made the error a result: the
        write would be recorded as done); a read's error is the result the model reads."""
        index, call = self.locate(ctx.tool_call_id, ctx.tool_name, arguments)
        await self.my_turn(index)
        try:

            async def run() -> Any:
                token = CALL.set(ctx.tool_call_id)
                self.raised.pop(ctx.tool_call_id, None)
                try:
                    output = await invoke(ctx, arguments)
                finally:
                    CALL.reset(token)
                error = self.raised.pop(ctx.tool_call_id, None)
                if error is not None and self.turns.gate.is_write(call.name):
                    raise error
                return shapes.result_of(output, failed=error is not None)

            recorded = await self.turns.tool(index, call, run)
        except BaseException as e:
            self.fatal = e
            raise
        finally:
            await self.done(index)
        return shapes.output_of(recorded)

    async def my_turn(self, index: int) -> None:
        """Wait until every call ordered before ``index`` has finished."""
        async with self.changed:
            await self.changed.wait_for(lambda: self._ready(index))
        if self.fatal is not None:
            raise asyncio.CancelledError("an earlier call of the turn ended the attempt")

    def _ready(self, index: int) -> bool:
        if self.fatal is not None or index not in self.order:
            return True
        before = self.order[: self.order.index(index)]
        return all(i in self.finished for i in before)

    async def done(self, index: int) -> None:
        async with self.changed:
            self.finished.add(index)
            self.changed.notify_all()

    def failed(self, call_id: str, error: Exception | None) -> None:
        """The SDK's error formatter saw the tool of ``call_id`` raise ``error``."""
        if error is not None and CALL.get() == call_id:
            self.raised[call_id] = error

    # -- a handoff ----------------------------------------------------------------------------

    async def handoff_step(
        self, name: str, arguments: str, invoke: Callable[[], Awaitable[Any]]
    ) -> Any:
        """A handoff (the call of tool ``name``): ``tool/T/I/NAME``, recorded with the agent it
        handed off to; replayed, that agent without calling the handoff again (its
        ``on_handoff`` ran once)."""
        index, call = self.locate(None, name, arguments)
        target: list[Any] = []

        async def run() -> Any:
            agent = await invoke()
            target.append(agent)
            return shapes.handoff_of(str(agent.name))

        try:
            handed_off = await self.turns.tool(index, call, run)
        except BaseException as e:
            self.fatal = e
            raise
        if target:
            return target[0]
        handed = shapes.handed_to(handed_off)
        if handed is None:
            self.fatal = NotDurableError(
                f"{self.turns.step(index, call)} is a handoff whose result a human gave: a "
                "handoff cannot be reconciled, only retried"
            )
            raise self.fatal
        return self.graph.agent(handed)

    # -- where a call is ---------------------------------------------------------------------

    def locate(self, call_id: str | None, name: str, arguments: str) -> tuple[int, ToolCall]:
        """Which call of the current turn this is: by its id and tool among those not yet
        taken (one id can come back in another turn), then by tool and arguments. Its
        position, not its id, names its step."""
        try:
            parsed = json.loads(arguments or "{}")
        except ValueError:
            parsed = None
        candidates = [
            i
            for i, c in enumerate(self.calls)
            if c.name == name and (c.id == call_id or c.arguments == parsed)
        ]
        if not candidates:
            self.fatal = NotDurableError(
                f"tool call {name!r} ({call_id}) is not one the turn's recorded reply asked for"
            )
            raise self.fatal
        free = [i for i in candidates if i not in self.claimed]
        by_id = [i for i in free if self.calls[i].id == call_id]
        index = (by_id or free or candidates)[0]
        self.claimed.add(index)
        return index, self.calls[index]

    def sizing(self, instructions: str | None, items: Any, tools: list[Any], limit: Any) -> int:
        """The tokens a request may use: its ``max_tokens`` (else the default output limit)
        and an estimate of what it sends."""
        sent = json.dumps(items, default=str) if not isinstance(items, str) else items
        schemas = json.dumps(
            [[getattr(t, "name", ""), getattr(t, "params_json_schema", None)] for t in tools],
            default=str,
        )
        size = len(instructions or "") + len(sent) + len(schemas)
        return reservation(limit if isinstance(limit, int) else None, size)


def gate_with(gate: PolicyGate, tools: list[Tool]) -> PolicyGate:
    """``gate`` with the classes of the MCP tools among ``tools`` added (unchanged when it has
    them already)."""
    approve_now = gate.writes if gate.approve is None else gate.approve
    writes = gate.writes | {t.name for t in tools if t.write}
    approve = approve_now | {t.name for t in tools if t.needs_approval}
    idempotent = gate.idempotent | {t.name for t in tools if t.write and t.idempotent}
    if writes == gate.writes and approve == approve_now and idempotent == gate.idempotent:
        return gate
    return PolicyGate(
        writes=writes,
        approve=approve,
        deny=gate.deny,
        idempotent=idempotent,
        approve_within=dict(gate.approve_within),
    )


async def _never() -> Any:
    raise AssertionError("a refused call is recorded without being called")


class Hooks(RunHooks[Any]):
    """The runner's hooks a durable attempt adds: which agent asks the model next, and the
    run's context (whose approvals the journal's decisions go to)."""

    async def on_llm_start(
        self,
        context: RunContextWrapper[Any],
        agent: Any,
        system_prompt: str | None,
        input_items: list[Any],
    ) -> None:
        attempt = ATTEMPT.get()
        if attempt is not None and CALL.get() is None:
            attempt.asking(context, agent)

"""The agent as a durable run executes it: a copy of the agent and of every agent it hands off
to, whose model, function tools and handoffs go through the attempt's journal (attempt.py) while
an attempt is current, and call straight through outside one. The agents the caller built are
left as they were.

- A model given as a ``Model`` is wrapped (:class:`JournalModel`); a model given by name is
  resolved by the run's ``model_provider``, which is wrapped (:class:`JournalProvider`), never
  replaced: a provider the caller passed is the one that answers.
- A function tool keeps everything the SDK knows of it (schema, validation, timeout, its
  ``ToolContext``); its ``on_invoke_tool`` is wrapped, and its ``needs_approval`` asks the
  journal's gate while an attempt is current.
- A handoff keeps its name, schema and filter; its ``on_invoke_handoff`` is wrapped and hands
  over to the copy of its target.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import AsyncIterator, Iterable
from typing import Any

from agents import (
    Agent,
    CodeInterpreterTool,
    FileSearchTool,
    FunctionTool,
    Handoff,
    ImageGenerationTool,
    ModelProvider,
    WebSearchTool,
    handoff,
)
from agents.items import ModelResponse
from agents.models.interface import Model
from agents.usage import Usage

from ...gate import PolicyGate
from ...tools import Tool
from .attempt import ATTEMPT, CALL, NotDurableError

# Tools the model's provider runs inside the response: the model step records them.
HOSTED = (FileSearchTool, WebSearchTool, CodeInterpreterTool, ImageGenerationTool)
WRAPPED = "__durableagent_wrapped__"


class JournalModel(Model):
    """A model whose requests are the attempt's ``llm/T`` steps (a stream: one response)."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        attempt = ATTEMPT.get()
        if attempt is None or CALL.get() is not None:  # no run, or a nested agent's tool
            return await self.inner.get_response(*args, **kwargs)
        return await attempt.model_step(
            lambda: self.inner.get_response(*args, **kwargs),
            lambda: attempt.sizing(*_sized(args, kwargs)),
        )

    async def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        attempt = ATTEMPT.get()
        if attempt is None or CALL.get() is not None:
            async for event in self.inner.stream_response(*args, **kwargs):
                yield event
            return

        async def whole() -> ModelResponse:
            return await _collected(self.inner.stream_response(*args, **kwargs))

        response = await attempt.model_step(whole, lambda: attempt.sizing(*_sized(args, kwargs)))
        yield _completed(response)

    def get_retry_advice(self, request: Any) -> Any:
        return self.inner.get_retry_advice(request)

    async def close(self) -> None:
        await self.inner.close()

    async def _cleanup_on_run_end(self, owner: object) -> None:
        await self.inner._cleanup_on_run_end(owner)


def _sized(args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, Any, Any, Any]:
    """What a request's reservation is reckoned from: its instructions, input, tools and
    ``max_tokens`` (the Model interface's positional parameters)."""
    names = ("system_instructions", "input", "model_settings", "tools")
    given = dict(zip(names, args, strict=False)) | {k: kwargs[k] for k in names if k in kwargs}
    settings = given.get("model_settings")
    return (
        given.get("system_instructions"),
        given.get("input"),
        list(given.get("tools") or ()),
        getattr(settings, "max_tokens", None),
    )


async def _collected(events: AsyncIterator[Any]) -> ModelResponse:
    """A streamed response as the one response it ends with."""
    from openai.types.responses import ResponseCompletedEvent

    final = None
    async for event in events:
        if isinstance(event, ResponseCompletedEvent):
            final = event.response
    if final is None:
        raise NotDurableError("the model's stream ended without its completed response")
    usage = final.usage
    return ModelResponse(
        output=list(final.output),
        usage=Usage(
            requests=1,
            input_tokens=usage.input_tokens if usage else 0,
            output_tokens=usage.output_tokens if usage else 0,
            total_tokens=usage.total_tokens if usage else 0,
        ),
        response_id=final.id,
    )


def _completed(response: ModelResponse) -> Any:
    """The one stream event a recorded response is replayed as."""
    from openai.types.responses import Response, ResponseCompletedEvent, ResponseUsage
    from openai.types.responses.response_usage import (
        InputTokensDetails,
        OutputTokensDetails,
    )

    usage = response.usage
    body = Response.model_construct(
        id=response.response_id or "",
        created_at=0,
        model="",
        object="response",
        output=response.output,
        parallel_tool_calls=False,
        tool_choice="auto",
        tools=[],
        usage=ResponseUsage(
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            total_tokens=usage.total_tokens,
            input_tokens_details=InputTokensDetails.model_construct(cached_tokens=0),
            output_tokens_details=OutputTokensDetails(reasoning_tokens=0),
        ),
    )
    return ResponseCompletedEvent(type="response.completed", response=body, sequence_number=0)


class JournalProvider(ModelProvider):
    """The run's model provider (the caller's, or the SDK's default), its models wrapped."""

    def __init__(self, inner: ModelProvider) -> None:
        self.inner = inner

    def get_model(self, model_name: str | None) -> Model:
        model: Model = wrap_model(self.inner.get_model(model_name))
        return model

    async def aclose(self) -> None:
        await self.inner.aclose()


def wrap_model(model: Any) -> Any:
    """``model`` journaled when it is a ``Model``; a name (or None) is left to the provider."""
    if isinstance(model, Model) and not isinstance(model, JournalModel):
        return JournalModel(model)
    return model


class Graph:
    """The copies of the agent and of every agent it can hand off to, by the originals' ids
    and by name (a recorded handoff names its target; two agents of one name are refused)."""

    def __init__(
        self,
        root: Agent[Any],
        gate: PolicyGate,
        *,
        trust_annotations: bool = False,
        writes: frozenset[str] = frozenset(),
        approve: frozenset[str] = frozenset(),
    ) -> None:
        self.gate = gate
        self.trust_annotations = trust_annotations
        self.writes, self.approve = writes, approve
        self.servers: dict[int, Any] = {}  # the MCP servers of every agent, by id
        self.copies: dict[int, Agent[Any]] = {}
        self.originals: list[Agent[Any]] = []  # kept alive: their ids key ``copies``
        self.by_name: dict[str, Agent[Any]] = {}
        self.root = self.copy(root)

    def copy(self, agent: Any) -> Agent[Any]:
        """The durable copy of ``agent`` (made once; a copy is its own)."""
        if not isinstance(agent, Agent):
            raise NotDurableError(
                f"durable(): a handoff leads to {type(agent).__name__}, not an agents.Agent"
            )
        if id(agent) in self.copies:
            return self.copies[id(agent)]
        if any(c is agent for c in self.copies.values()):
            return agent
        _check(agent)
        if agent.name in self.by_name:
            raise NotDurableError(
                f"durable(): two agents are named {agent.name!r}: a step names the agent that "
                "asked the model, so each agent needs a name of its own"
            )
        made = agent.clone(model=wrap_model(agent.model))
        self.copies[id(agent)] = made
        self.originals.append(agent)
        self.by_name[agent.name] = made
        made.tools = [
            wrap_tool(t, self.gate) if isinstance(t, FunctionTool) else t for t in agent.tools
        ]
        made.handoffs = [self.wrap_handoff(h) for h in agent.handoffs]
        if agent.mcp_servers:
            # A tool's exception leaves its call (a write's step stays open; a read runs again
            # next attempt), as for our own MCP tools: the SDK's text would be a result.
            made.mcp_config = {**agent.mcp_config, "failure_error_function": None}
            setattr(made, "get_mcp_tools", self.listing(made))  # noqa: B010
            self.servers.update((id(s), s) for s in agent.mcp_servers)
        return made

    def listing(self, made: Agent[Any]) -> Any:
        """``made.get_mcp_tools`` with the tools it lists journaled, and told to the attempt
        (classed by their servers' annotations when trusted) before the turn's calls are
        decided on."""
        listed = made.get_mcp_tools
        gate = self.gate

        async def get_mcp_tools(run_context: Any) -> list[Any]:
            tools = [
                wrap_tool(t, gate) if isinstance(t, FunctionTool) else t
                for t in await listed(run_context)
            ]
            attempt = ATTEMPT.get()
            if attempt is not None and CALL.get() is None:
                attempt.offer(made.name, [self.mcp_descriptor(t) for t in tools])
            return tools

        return get_mcp_tools

    def mcp_descriptor(self, t: Any) -> Tool:
        """Our descriptor of an MCP server's tool: classed as ``durableagent.mcp_tools``
        classes one (a write that needs approval unless its annotations are trusted);
        ``writes=``/``approve=`` win."""
        from ...tools.mcp import classify

        override: dict[str, bool] = {}
        if t.name in self.writes:
            override["write"] = True
        if t.name in self.approve:
            override["approve"] = True
        c = classify(t.mcp_annotations, trusted=self.trust_annotations, override=override)
        return Tool(
            t.name,
            t.description or "",
            parameters=dict(t.params_json_schema or {"type": "object"}),
            write=c.write,
            approve=c.approve,
            idempotent=c.idempotent,
            classified_by=c.classified_by,
            origin="MCP server tool",
        )

    def wrap_handoff(self, item: Any) -> Handoff[Any, Any]:
        """A handoff whose invocation is a step, handing over to the copy of its target."""
        if isinstance(item, Agent):
            item = handoff(self.copy(item))
        target = getattr(item, "_agent_ref", None)
        target_agent = target() if callable(target) else None
        if target_agent is not None:
            target_agent = self.copy(target_agent)
        original = item.on_invoke_handoff
        name = item.tool_name
        graph = self

        async def on_invoke_handoff(ctx: Any, arguments: str) -> Any:
            attempt = ATTEMPT.get()
            if attempt is None or CALL.get() is not None:
                return graph.copy(await original(ctx, arguments))

            async def invoke() -> Any:
                return await original(ctx, arguments)

            return graph.copy(await attempt.handoff_step(name, arguments, invoke))

        made: Handoff[Any, Any] = dataclasses.replace(item, on_invoke_handoff=on_invoke_handoff)
        if target_agent is not None:
            made._agent_ref = weakref.ref(target_agent)
        return made

    def agent(self, name: str) -> Agent[Any]:
        found = self.by_name.get(name)
        if found is None:
            raise NotDurableError(
                f"the journal names agent {name!r}, which this agent cannot reach"
            )
        return found

    def function_names(self, agent: str) -> frozenset[str]:
        copy = self.by_name.get(agent)
        tools = copy.tools if copy is not None else []
        return frozenset(t.name for t in tools if isinstance(t, FunctionTool))

    def handoff_names(self, agent: str) -> frozenset[str]:
        copy = self.by_name.get(agent)
        handoffs = copy.handoffs if copy is not None else []
        return frozenset(h.tool_name for h in handoffs if isinstance(h, Handoff))

    def tools_of(self, agent: str) -> list[Tool]:
        """Our descriptors of what agent ``agent`` offers: its function tools (classed by the
        gate) and its handoffs (reads)."""
        copy = self.by_name.get(agent)
        if copy is None:
            return []
        out = [self.descriptor(t) for t in copy.tools if isinstance(t, FunctionTool)]
        for h in copy.handoffs:
            if isinstance(h, Handoff):
                out.append(
                    Tool(
                        h.tool_name,
                        h.tool_description,
                        parameters=dict(h.input_json_schema or {"type": "object"}),
                        origin=f"handoff to {h.agent_name!r}",
                    )
                )
        return out

    def all_tools(self) -> list[Tool]:
        seen: dict[str, Tool] = {}
        for name in self.by_name:
            for t in self.tools_of(name):
                seen.setdefault(t.name, t)
        return list(seen.values())

    def descriptor(self, t: FunctionTool) -> Tool:
        gate = self.gate
        return Tool(
            t.name,
            t.description or "",
            parameters=dict(t.params_json_schema or {"type": "object"}),
            write=gate.is_write(t.name),
            approve=gate.needs_approval(t.name),
            idempotent=gate.is_idempotent(t.name),
            origin="Agents SDK function tool",
        )


def wrap_tool(tool: FunctionTool, gate: PolicyGate) -> FunctionTool:
    """``tool`` with its calls journaled: ``on_invoke_tool`` runs inside the call's step, and
    ``needs_approval`` is the journal's gate while an attempt is current."""
    if getattr(tool.on_invoke_tool, WRAPPED, False):
        return tool
    original = tool.on_invoke_tool
    asks = tool.needs_approval
    name = tool.name

    async def on_invoke_tool(ctx: Any, arguments: str) -> Any:
        attempt = ATTEMPT.get()
        if attempt is None or CALL.get() is not None:
            return await original(ctx, arguments)
        return await attempt.tool_step(ctx, arguments, original)

    async def needs_approval(ctx: Any, params: dict[str, Any], call_id: str) -> bool:
        attempt = ATTEMPT.get()
        if attempt is None or CALL.get() is not None:
            if callable(asks):
                return bool(await asks(ctx, params, call_id))
            return bool(asks)
        now = attempt.turns.gate
        return now.needs_approval(name) or now.is_denied(name)

    setattr(on_invoke_tool, WRAPPED, True)
    return dataclasses.replace(tool, on_invoke_tool=on_invoke_tool, needs_approval=needs_approval)


def flagged(root: Agent[Any]) -> frozenset[str]:
    """The names of the function tools declared ``needs_approval`` (True or a function), in
    the agent and every agent it reaches."""
    out: set[str] = set()
    for agent in reachable(root):
        for t in agent.tools:
            if isinstance(t, FunctionTool) and (
                t.needs_approval is True or callable(t.needs_approval)
            ):
                out.add(t.name)
    return frozenset(out)


def reachable(root: Agent[Any]) -> Iterable[Agent[Any]]:
    """``root`` and the agents its handoffs lead to (those the SDK's ``handoff()`` made or
    that are listed as agents), each once."""
    seen: dict[int, Agent[Any]] = {}
    todo: list[Any] = [root]
    while todo:
        agent = todo.pop()
        if not isinstance(agent, Agent) or id(agent) in seen:
            continue
        seen[id(agent)] = agent
        for h in agent.handoffs:
            if isinstance(h, Agent):
                todo.append(h)
            else:
                ref = getattr(h, "_agent_ref", None)
                todo.append(ref() if callable(ref) else None)
    return list(seen.values())


def _check(agent: Agent[Any]) -> None:
    """Refuse, in one line, what the journal could not see of ``agent``."""
    where = f"agent {agent.name!r}"
    for t in agent.tools:
        if not isinstance(t, (FunctionTool, *HOSTED)):
            raise NotDurableError(
                f"durable(): {where}'s tool {getattr(t, 'name', t)!r} ({type(t).__name__}) runs "
                "outside function calls the journal can see"
            )
        if isinstance(t, FunctionTool) and (t.tool_input_guardrails or t.tool_output_guardrails):
            raise NotDurableError(
                f"durable(): {where}'s tool {t.name!r} has tool guardrails: what they decide "
                "would not be recorded"
            )
    if agent.input_guardrails or agent.output_guardrails:
        raise NotDurableError(
            f"durable(): {where} has guardrails: what they decide (a model call of their own, "
            "often) would not be recorded"
        )

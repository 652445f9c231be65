"""A Pydantic AI agent as an :class:`~durableagent.turns.AgentLoop`: each attempt runs the agent
itself, with the journal as its durability engine, and drives Pydantic AI's own deferral of
gated calls from the journal's decisions."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai import DeferredToolRequests, DeferredToolResults
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    UserPromptPart,
)
from pydantic_ai.toolsets import FunctionToolset

from ...budget import Budget, Prices
from ...messages import Message
from ...tools import Tool
from ...turns import LoopOutcome, Turns
from . import shapes
from .attempt import Attempt, Waiting
from .classes import Classes
from .engine import ATTEMPT, JournalDurability


@dataclass(frozen=True)
class ModelInfo:
    """The agent's model as the journal names it: ``model`` for prices, reservations and
    traces, ``provider`` for ``gen_ai.provider.name``."""

    model: str
    provider: str
    output_limit: int | None = None


@dataclass(frozen=True)
class PydanticLoop:
    """A Pydantic AI agent run under the journal (build it with ``durable()``)."""

    agent: AbstractAgent[Any, Any]
    engine: JournalDurability
    classes: Classes
    model: ModelInfo
    deps: Any = None
    tools: Sequence[Tool] = ()
    max_turns: int = 20
    budget: Budget | None = None
    prices: Prices | None = None
    approve_within: float | str | None = None
    output_type: Any = field(default=None, repr=False)

    async def run_turns(self, messages: Sequence[Message], turns: Turns) -> LoopOutcome:
        """Run the agent on the run's input. Each run of the agent that ends deferring gated
        calls is answered from the journal and resumed (its history and the decisions), in
        the same attempt, until it answers or a call waits for a human."""
        attempt = Attempt(turns, self.classes)
        token = ATTEMPT.set(attempt)
        try:
            first, history = _prompt_of(messages)
            prompt: str | None = first
            decided: DeferredToolResults | None = None
            while True:
                try:
                    result = await _unwrapped(
                        self.agent.run(
                            prompt,
                            message_history=history,
                            deferred_tool_results=decided,
                            output_type=self.output_type,
                            deps=self._deps(),
                            capabilities=[self.engine],
                        )
                    )
                    output = result.output
                    if not isinstance(output, DeferredToolRequests):
                        return LoopOutcome(Message("assistant", shapes.answer_text(output)))
                    decided = await attempt.answer(output)
                except Waiting as w:
                    return LoopOutcome(None, w.pending)
                history, prompt = result.all_messages(), None
        finally:
            ATTEMPT.reset(token)

    def schemas(self) -> dict[str, Any]:
        """The input schemas of the agent's function tools, by name: what a deploy's check
        validates recorded arguments against (deploys.code_of). Tools a toolset learns at run
        time (an MCP server's) are not known before the run, and not checked."""
        out: dict[str, Any] = {}
        for toolset in self.agent.toolsets:
            if isinstance(toolset, FunctionToolset):
                for name, tool in toolset.tools.items():
                    out[name] = tool.tool_def.parameters_json_schema
        return out

    def _deps(self) -> Any:
        """The deps of this attempt: the value given, or a fresh one from a factory."""
        deps = self.deps
        if inspect.isroutine(deps) or isinstance(deps, functools.partial):
            return deps()
        return deps


async def _unwrapped(run: Any) -> Any:
    """``await run``, with an error that left the agent inside an exception group (a task
    group of its tool calls) raised as itself: the journal's errors (an indeterminate write, a
    halt, a lost lease) must reach run() as they are."""
    try:
        return await run
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if leaf is group:
            raise
        raise leaf from None


def _prompt_of(messages: Sequence[Message]) -> tuple[str, list[ModelMessage] | None]:
    """The run's input as Pydantic AI takes it: the last user message is the prompt, earlier
    user and assistant messages its history."""
    if not messages or messages[-1].role != "user":
        raise ValueError("a Pydantic AI run's input must end with a user message (its prompt)")
    history: list[ModelMessage] = []
    for m in messages[:-1]:
        if m.role == "user":
            history.append(ModelRequest(parts=[UserPromptPart(m.content)]))
        elif m.role == "assistant":
            history.append(ModelResponse(parts=[TextPart(m.content)]))
        else:
            raise ValueError(
                f"a Pydantic AI run's input holds user and assistant messages, not {m.role!r}"
            )
    return messages[-1].content, history or None


def output_type_of(agent: AbstractAgent[Any, Any]) -> Any:
    """The agent's output type, able to end deferring calls for a human too."""
    declared = agent.output_type
    kinds = list(declared) if isinstance(declared, list | tuple) else [declared]
    if DeferredToolRequests not in kinds:
        kinds.append(DeferredToolRequests)
    return kinds

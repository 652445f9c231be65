"""An Agents SDK agent as an :class:`~durableagent.turns.AgentLoop`: each attempt runs the agent
(the durable copy of it, graph.py) with the SDK's own ``Runner``, every model request and tool
call going through the attempt's journal."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import json
from collections.abc import Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any

from agents import RunConfig, Runner, ToolErrorFormatterArgs

from ...budget import Budget, Prices
from ...messages import Message
from ...tools import Tool
from ...turns import LoopOutcome, Turns
from . import shapes
from .attempt import ATTEMPT, Attempt, Hooks, NotDurableError, Waiting
from .graph import Graph, JournalProvider, wrap_model


@dataclass(frozen=True)
class ModelInfo:
    """The agent's model as the journal names it: ``model`` for prices, reservations and
    traces, ``provider`` for ``gen_ai.provider.name``."""

    model: str
    provider: str
    output_limit: int | None = None


@dataclass(frozen=True)
class AgentsLoop:
    """An Agents SDK agent run under the journal (build it with ``durable()``)."""

    graph: Graph
    model: ModelInfo
    run_config: RunConfig | None = None
    context: Any = None
    tools: Sequence[Tool] = ()
    max_turns: int = 20
    budget: Budget | None = None
    prices: Prices | None = None
    approve_within: float | str | None = None

    async def run_turns(self, messages: Sequence[Message], turns: Turns) -> LoopOutcome:
        """Run the agent on the run's input, until it answers or a call of a turn waits for a
        human. Whatever the journal raised inside a model request or a tool call (an
        indeterminate write, a halt, a lost lease, the budget) leaves as it was raised, not as
        the SDK's wrapping of it."""
        attempt = Attempt(turns, self.graph)
        token = ATTEMPT.set(attempt)
        try:
            try:
                async with AsyncExitStack() as servers:
                    for server in self.graph.servers.values():
                        if getattr(server, "session", None) is None:  # connected once an attempt
                            await server.connect()
                            servers.push_async_callback(server.cleanup)
                    result = await Runner.run(
                        self.graph.root,
                        _input_of(messages),
                        context=self._context(),
                        run_config=self._run_config(),
                        hooks=Hooks(),
                        max_turns=self.max_turns + 1,  # ours stops first: MaxTurnsExceeded
                    )
            except BaseException:
                if attempt.fatal is None:
                    raise
            if attempt.fatal is not None:
                if isinstance(attempt.fatal, Waiting):
                    return LoopOutcome(None, attempt.fatal.pending)
                raise attempt.fatal
            if result.interruptions:
                names = ", ".join(sorted({str(i.tool_name) for i in result.interruptions}))
                raise NotDurableError(
                    f"the SDK asked for approvals the journal did not decide on ({names})"
                )
            return LoopOutcome(Message("assistant", shapes.answer_text(result.final_output)))
        finally:
            ATTEMPT.reset(token)

    @property
    def prompt(self) -> str:
        """The instructions of the agent and of every agent it hands off to, by name (a
        function's by its name): what a deploy's fingerprint digests (deploys.code_of)."""
        said = {
            name: a.instructions
            if isinstance(a.instructions, str | None)
            else getattr(a.instructions, "__qualname__", type(a.instructions).__name__)
            for name, a in sorted(self.graph.by_name.items())
        }
        return json.dumps(said, sort_keys=True)

    def _context(self) -> Any:
        """The run's context object for this attempt: the value given, or a fresh one from a
        factory."""
        made = self.context
        if inspect.isroutine(made) or isinstance(made, functools.partial):
            return made()
        return made

    def _run_config(self) -> RunConfig:
        """The caller's run config with its model provider (and model) wrapped, not replaced,
        and an error formatter that tells the attempt which tool raised (the SDK makes a
        tool's exception the text the model reads; for a write, the step must stay open)."""
        base = self.run_config or RunConfig()
        theirs = base.tool_error_formatter

        def formatter(args: ToolErrorFormatterArgs[Any]) -> Any:
            attempt = ATTEMPT.get()
            if attempt is not None and args.kind == "tool_exception":
                attempt.failed(args.call_id, args.error)
            return theirs(args) if theirs is not None else None

        provider = base.model_provider
        if not isinstance(provider, JournalProvider):
            provider = JournalProvider(provider)
        return dataclasses.replace(
            base,
            model=wrap_model(base.model),
            model_provider=provider,
            tool_error_formatter=formatter,
        )


def _input_of(messages: Sequence[Message]) -> list[Any]:
    """The run's input as the SDK takes it: its user and assistant messages, in order."""
    if not messages or messages[-1].role != "user":
        raise ValueError("an Agents SDK run's input must end with a user message")
    items: list[Any] = []
    for m in messages:
        if m.role not in ("user", "assistant"):
            raise ValueError(
                f"an Agents SDK run's input holds user and assistant messages, not {m.role!r}"
            )
        items.append({"role": m.role, "content": m.content})
    return items

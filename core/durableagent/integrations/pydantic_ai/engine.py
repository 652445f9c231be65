"""The journal as a Pydantic AI durability engine, on its public ``pydantic_ai.durable_exec``
surface: a ``BaseDurabilityCapability`` whose ``CallableOperationBackend`` runs each durable
unit Pydantic AI hands it as one journal step.

- a model request (``ModelRequestId``) is the next turn's ``llm/T`` (``Turns.model``);
- a tool call (``ToolsetCallToolId``, function, MCP or dynamic toolsets alike) is
  ``tool/T/I/NAME`` (``Turns.tool``), ``I`` its position among the turn's calls, found from the
  call the capability's ``wrap_tool_execute`` hook is running (never from its call id alone);
- argument validation and tool discovery are re-derived on each attempt, in the run itself:
  deterministic, never a step of their own;
- anything else Pydantic AI could make durable (a capability's own durable operations, a
  workspace, message compaction, an event handler) has no step in the grammar and is refused.

Everything a unit needs from its run (the attempt's ``Turns``, the call being executed) comes
through context variables: one capability serves every run of a worker at once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic_ai import RunContext
from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    CallableOperationBackend,
    DurabilityEngineSpec,
    DurableOperation,
    DurableOperationId,
    JournalOperationNamer,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_ai.tools import ToolDefinition

from ...errors import DurableAgentError

if TYPE_CHECKING:
    from pydantic_ai.durable_exec import BoundDurableOperation
    from pydantic_ai.messages import ToolCallPart
    from pydantic_ai.models import ModelRequestContext

    from .attempt import Attempt

# The attempt of the run this task belongs to (None: not in a durable run; the agent runs as
# it would without us), and the tool call whose execution this task is in.
ATTEMPT: ContextVar[Attempt | None] = ContextVar("durableagent_pydantic_attempt", default=None)
CALL: ContextVar[tuple[ToolCallPart, RunContext[Any]] | None] = ContextVar(
    "durableagent_pydantic_call", default=None
)


class NotDurableError(DurableAgentError):
    """A feature of the agent that the journal cannot make durable: refused, never run
    silently without it."""


class JournalBackend(CallableOperationBackend[dict[str, Any]]):
    """Runs each durable unit as the journal step it is (see the module). ``bound`` collects
    the operations Pydantic AI binds when the capability meets an agent, so that ``durable()``
    can refuse those with no step in the grammar before any run."""

    def __init__(self, agent_name: str) -> None:
        config: RoleBasedOperationConfig[dict[str, Any]] = RoleBasedOperationConfig(
            model={}, event={}, capability={}, tool={}
        )
        super().__init__(namer=JournalOperationNamer(agent_name), config=config)
        self.bound: list[DurableOperationId] = []

    def bind(
        self, operation: DurableOperation[Any, Any, Any]
    ) -> BoundDurableOperation[Any, Any, Any]:
        self.bound.append(operation.operation_id)
        return super().bind(operation)

    async def execute(
        self,
        *,
        operation_id: DurableOperationId,
        name: str,
        body: Callable[[], Awaitable[object]],
        cache_key: tuple[object, ...],
        config: dict[str, Any],
    ) -> object:
        attempt = ATTEMPT.get()
        if attempt is None:  # outside a run (the engine says so): nothing to journal
            return await body()
        match operation_id:
            case ModelRequestId():
                return await attempt.model_step(body)
            case ToolsetCallToolId():
                call = CALL.get()
                if call is None:
                    raise NotDurableError(f"{name}: a tool call outside the agent's tool execution")
                return await attempt.tool_step(call[0], call[1], body)
            case (
                ToolsetValidateToolArgumentsId() | ToolsetGetToolsId() | ToolsetGetInstructionsId()
            ):
                # Re-derived on every attempt: deterministic given the same recorded replies.
                return await body()
            case _:
                raise NotDurableError(unsupported(operation_id))


def unsupported(operation_id: object) -> str:
    """One line naming an operation the journal has no step for."""
    return (
        f"{type(operation_id).__name__} {operation_id!r} cannot be made durable by durableagent: "
        "its steps are model requests (llm/T) and tool calls (tool/T/I/NAME) only"
    )


class JournalDurability(BaseDurabilityCapability[Any]):
    """The capability a durable Pydantic AI run is given: routes model requests and tool calls
    through the journal while a run's attempt is current, and leaves the agent as it is
    outside one."""

    engine_spec: ClassVar[DurabilityEngineSpec] = DurabilityEngineSpec(
        engine_name="durableagent",
        durable_unit_noun="step",
        durable_container_noun="run",
        codec=JSON_CODEC,  # the journal holds JSON: values go through Pydantic AI's own adapters
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={
            "function": "enter-always",
            "mcp": "enter-in-durable-unit",  # our steps run in the run's own process
            "dynamic": "enter-never",
        },
        journal_discovery=False,  # tool discovery is re-derived, never a step of its own
        # The journal records one step at a time, and a replay must meet them in the same
        # order: a turn's calls run one after another, in the reply's order.
        sequential_tools_in_durable_context=True,
    )

    def __init__(self, *, name: str | None = None) -> None:
        super().__init__(name=name)
        self.backend: JournalBackend | None = None

    @property
    def in_durable_context(self) -> bool:
        return ATTEMPT.get() is not None

    def get_durable_operation_backend(self) -> JournalBackend:
        if self.backend is None:
            self.backend = JournalBackend(self.name)
        return self.backend

    async def prepare_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        tool_defs = await super().prepare_tools(ctx, tool_defs)
        attempt = ATTEMPT.get()
        return tool_defs if attempt is None else attempt.offer(tool_defs)

    async def prepare_output_tools(
        self, ctx: RunContext[Any], tool_defs: list[ToolDefinition]
    ) -> list[ToolDefinition]:
        tool_defs = await super().prepare_output_tools(ctx, tool_defs)
        attempt = ATTEMPT.get()
        if attempt is not None:
            attempt.output_tools = frozenset(t.name for t in tool_defs)
        return tool_defs

    async def before_model_request(
        self, ctx: RunContext[Any], request_context: ModelRequestContext
    ) -> ModelRequestContext:
        request_context = await super().before_model_request(ctx, request_context)
        attempt = ATTEMPT.get()
        if attempt is not None:
            attempt.sending(request_context)
        return request_context

    async def wrap_tool_execute(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        handler: Callable[[Any], Awaitable[Any]],
    ) -> Any:
        if ATTEMPT.get() is None:
            return await handler(args)
        token = CALL.set((call, ctx))
        try:
            return await handler(args)
        finally:
            CALL.reset(token)

    async def on_tool_validate_error(
        self,
        ctx: RunContext[Any],
        *,
        call: ToolCallPart,
        tool_def: ToolDefinition,
        args: Any,
        error: Any,
    ) -> Any:
        attempt = ATTEMPT.get()
        if attempt is not None:
            await attempt.invalid(call, error)
        return await super().on_tool_validate_error(
            ctx, call=call, tool_def=tool_def, args=args, error=error
        )


def unapproved(tool_def: ToolDefinition) -> ToolDefinition:
    """``tool_def`` as a tool Pydantic AI defers for a human's decision before it runs."""
    return dataclasses.replace(tool_def, kind="unapproved")

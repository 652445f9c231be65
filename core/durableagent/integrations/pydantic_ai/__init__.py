"""Pydantic AI agents, durable under the journal (extra ``pydantic-ai``; docs/integrations.md).

    from durableagent.integrations.pydantic_ai import durable

    helpdesk = durable(agent, writes=["create_ticket"])   # agentrun worker --agent mod:helpdesk

``durable(agent, ...)`` returns a ``durableagent.Agent``: it runs wherever our own does
(``agentrun worker --agent MODULE:ATTR``, ``run()``, ``submit``, fork, plan, the TUI and the web
view). Each model request is an ``llm/T`` step, each tool call ``tool/T/I/NAME``; the journal is
Pydantic AI's durability engine, on its public ``pydantic_ai.durable_exec`` surface (see
engine.py). A run's input is its user messages (the last one the prompt); its answer is the
agent's output, a structured ``output_type`` recorded as JSON.
"""

from __future__ import annotations

try:
    import pydantic_ai  # noqa: F401  (the check: say what to install when it is missing)
except ImportError as e:  # say what to install, not only what is missing
    raise ImportError(
        "durableagent.integrations.pydantic_ai needs the pydantic-ai extra: "
        f"pip install 'durableagent[pydantic-ai]' ({e})"
    ) from e

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic_ai import RunContext
from pydantic_ai.agent import AbstractAgent
from pydantic_ai.durable_exec import (
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetGetInstructionsId,
    ToolsetGetToolsId,
    ToolsetValidateToolArgumentsId,
)
from pydantic_ai.exceptions import UserError
from pydantic_ai.toolsets import (
    AbstractToolset,
    DynamicToolset,
    ExternalToolset,
    FunctionToolset,
)

from ...budget import Budget, Prices
from ...durations import parse_duration
from ...gate import static_gate
from ...tools import ToolContext, current_context
from ...worker import Agent
from .classes import Classes
from .engine import CALL, JournalDurability, NotDurableError, unsupported
from .loop import ModelInfo, PydanticLoop, output_type_of

_STEPS = (
    ModelRequestId,
    ToolsetCallToolId,
    ToolsetValidateToolArgumentsId,
    ToolsetGetToolsId,
    ToolsetGetInstructionsId,
)


def durable(
    agent: AbstractAgent[Any, Any],
    *,
    writes: Iterable[str] = (),
    approve: Iterable[str] = (),
    trust_annotations: bool = False,
    deps: Any = None,
    max_turns: int = 20,
    budget: Budget | None = None,
    prices: Prices | None = None,
    version: str = "",
    **gate_options: Any,
) -> Agent:
    """``agent`` as a durable ``Agent``.

    - ``writes``: the tools with side effects (a write that started and never finished stops
      the run indeterminate until a human reconciles it). A tool declared
      ``requires_approval=True`` is a write too, and always waits for a human.
    - ``approve``: the tools a human approves before each call (empty: every write).
    - ``trust_annotations``: class the agent's MCP tools by their servers' annotations (else
      each is a write that needs approval); ``writes``/``approve`` win.
    - ``deps``: the agent's deps for every attempt, or a function making them (called with no
      arguments, once per attempt).
    - ``max_turns``, ``budget``, ``prices``: as on ``AgentConfig``.
    - ``version``: the label every run and attempt records (``Agent(version=)``; default a
      short digest of the fingerprint: the function tools' schemas and the model).
    - ``gate_options``: ``deny`` (tools refused outright), ``idempotent`` (writes the external
      system deduplicates on the step's idempotency key), ``approve_within`` (a duration for
      every gated call, or ``{tool: duration}``).

    Refuses, with one line naming it (``NotDurableError``), what the journal cannot make
    durable: an agent without a ``name``, a toolset without an ``id``, a toolset whose calls
    it cannot see (external tools, a toolset of another kind), a capability's own durable
    operations or a workspace."""
    if not isinstance(agent, AbstractAgent):
        raise TypeError(f"durable() takes a pydantic_ai.Agent, not {type(agent).__name__}")
    if not agent.name:
        raise NotDurableError(
            "durable(): the agent needs a name (Agent(..., name='helpdesk')): it names the "
            "agent's durable units"
        )
    unknown = set(gate_options) - {"deny", "idempotent", "approve_within"}
    if unknown:
        raise TypeError(f"durable() got unexpected options: {', '.join(sorted(unknown))}")
    within = gate_options.pop("approve_within", None)
    default_within = None
    if isinstance(within, Mapping):
        gate_options["approve_within"] = dict(within)
    elif within is not None:
        default_within = parse_duration(within)
    mcp_ids, flagged = _toolsets(agent)
    named_writes, named_approve = frozenset(writes), frozenset(approve)
    gate = static_gate(
        writes=named_writes, approve=named_approve, requires_approval=flagged, **gate_options
    )
    engine = JournalDurability(name=agent.name)
    _check_binding(engine, agent)
    loop = PydanticLoop(
        agent=agent,
        engine=engine,
        classes=Classes(gate, named_writes, named_approve, mcp_ids, trust_annotations),
        model=_model_info(agent),
        deps=deps,
        max_turns=max_turns,
        budget=budget,
        prices=prices,
        approve_within=default_within,
        output_type=output_type_of(agent),
    )
    return Agent(loop, gate, version=version)


def tool_context(ctx: RunContext[Any]) -> ToolContext:
    """The durable context of the tool call ``ctx`` (a tool's ``RunContext``) is: its run,
    step, attempt, idempotency key (pass it to the system you write to), fence and
    ``cancelled``. The same as ``durableagent.tools.current_context()`` inside the call;
    outside a durable run, a plain call's (no run, a fresh key)."""
    running = CALL.get()
    if running is not None and running[0].tool_call_id != ctx.tool_call_id:
        raise ValueError(
            f"tool_context(): {ctx.tool_call_id!r} is not the tool call running now "
            f"({running[0].tool_call_id!r})"
        )
    return current_context()


def _toolsets(agent: AbstractAgent[Any, Any]) -> tuple[frozenset[str], frozenset[str]]:
    """The ids of the agent's MCP toolsets and the names of its ``requires_approval`` function
    tools; refuses a toolset whose calls the journal could not see."""
    try:
        from pydantic_ai.mcp import MCPToolset
    except ImportError:  # no mcp installed: no MCP toolset can exist
        mcp_kinds: tuple[type[Any], ...] = ()
    else:
        mcp_kinds = (MCPToolset,)
    leaves: list[AbstractToolset[Any]] = []
    for toolset in agent.toolsets:
        toolset.apply(leaves.append)
    mcp: set[str] = set()
    flagged: set[str] = set()
    for leaf in leaves:
        if isinstance(leaf, ExternalToolset):
            raise NotDurableError(
                f"durable(): toolset {leaf.id!r} holds external tools: their results come from "
                "outside the run, and cannot be made durable"
            )
        if isinstance(leaf, FunctionToolset):
            flagged |= {n for n, t in leaf.tools.items() if t.requires_approval}
        elif isinstance(leaf, mcp_kinds):
            mcp.add(str(leaf.id))
        elif not isinstance(leaf, DynamicToolset):
            raise NotDurableError(
                f"durable(): toolset {leaf.id!r} ({type(leaf).__name__}) is not a function, MCP "
                "or dynamic toolset: its calls could not be journaled"
            )
    return frozenset(mcp), frozenset(flagged)


def _check_binding(engine: JournalDurability, agent: AbstractAgent[Any, Any]) -> None:
    """Bind the engine once, as every run will, so that what Pydantic AI refuses (a toolset
    without an id, two of one id) and what the journal has no step for (a capability's own
    durable operation, a workspace) is refused now, in one line."""
    try:
        bound = engine.for_agent(agent)
    except UserError as e:
        raise NotDurableError(f"durable(): {' '.join(str(e).split())}") from None
    backend = bound.backend if isinstance(bound, JournalDurability) else None
    if backend is None:
        raise NotDurableError(
            "durable(): the agent's capabilities add durable units of their own (a workspace?), "
            "which have no step in the journal"
        )
    for op in backend.bound:
        if not isinstance(op, _STEPS):
            raise NotDurableError(f"durable(): {unsupported(op)}")


def _model_info(agent: AbstractAgent[Any, Any]) -> ModelInfo:
    """The agent's model as the journal names it (its name, its provider)."""
    model = agent.model
    if isinstance(model, str):
        provider, _, name = model.rpartition(":")
        return ModelInfo(name or model, provider or "pydantic_ai")
    name = getattr(model, "model_name", "") or ""
    provider = getattr(model, "system", "") or "pydantic_ai"
    return ModelInfo(str(name), str(provider))


__all__ = ["NotDurableError", "PydanticLoop", "durable", "tool_context"]

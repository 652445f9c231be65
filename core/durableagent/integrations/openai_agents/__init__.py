"""OpenAI Agents SDK agents, durable under the journal (extra ``openai-agents``;
docs/integrations.md).

    from durableagent.integrations.openai_agents import durable

    helpdesk = durable(agent, writes=["create_ticket"])   # agentrun worker --agent mod:helpdesk

``durable(agent, ...)`` returns a ``durableagent.Agent``: it runs wherever our own does
(``agentrun worker --agent MODULE:ATTR``, ``run()``, ``submit``, fork, plan, the TUI and the web
view). Each attempt runs the agent with the SDK's own ``Runner``; each model request is an
``llm/T`` step (naming the agent that asked), each function-tool call and handoff
``tool/T/I/NAME``. A run's input is its user messages; its answer is the agent's final output,
a structured ``output_type`` recorded as JSON.
"""

from __future__ import annotations

try:
    import agents  # noqa: F401  (the check: say what to install when it is missing)
except ImportError as e:  # say what to install, not only what is missing
    raise ImportError(
        "durableagent.integrations.openai_agents needs the openai-agents extra: "
        f"pip install 'durableagent[openai-agents]' ({e})"
    ) from e

from collections.abc import Iterable, Mapping
from typing import Any

from agents import Agent as SdkAgent
from agents import FunctionTool, RunConfig, RunContextWrapper
from agents.models.interface import Model

from ...budget import Budget, Prices
from ...durations import parse_duration
from ...gate import PolicyGate, static_gate
from ...tools import ToolContext, current_context
from ...worker import Agent
from .attempt import CALL, NotDurableError
from .graph import Graph, flagged, reachable
from .loop import AgentsLoop, ModelInfo


def durable(
    agent: SdkAgent[Any],
    *,
    writes: Iterable[str] = (),
    approve: Iterable[str] = (),
    trust_annotations: bool = False,
    context: Any = None,
    run_config: RunConfig | None = None,
    max_turns: int = 20,
    budget: Budget | None = None,
    prices: Prices | None = None,
    version: str = "",
    **gate_options: Any,
) -> Agent:
    """``agent`` (an ``agents.Agent``) as a durable ``Agent``.

    - ``writes``: the function tools with side effects (a write that started and never
      finished stops the run indeterminate until a human reconciles it). A tool declared
      ``needs_approval`` (True or a function) is a write a human approves, every call.
    - ``approve``: the tools a human approves before each call (empty: every write).
    - ``trust_annotations``: class the agents' MCP servers' tools by their annotations (else
      each is a write that needs approval); ``writes``/``approve`` win. The servers are
      connected for each attempt when they are not connected already.
    - ``context``: the run's context object (the SDK's ``context=``), or a function making it
      (called with no arguments, once per attempt).
    - ``run_config``: the SDK's ``RunConfig`` for every attempt; its ``model_provider`` (and
      ``model``) are wrapped, never replaced.
    - ``max_turns``, ``budget``, ``prices``: as on ``AgentConfig``.
    - ``version``: the label every run and attempt records (``Agent(version=)``, see
      docs/deploys.md; default a short digest of the fingerprint). Its tools are learned as
      the agent runs, so a deploy's check has no schemas to hold its calls to.
    - ``gate_options``: ``deny`` (tools refused outright), ``idempotent`` (writes the external
      system deduplicates on the step's idempotency key), ``approve_within`` (a duration for
      every gated call, or ``{tool: duration}``).

    The agents you built are not changed: the run executes a copy of the agent and of every
    agent it hands off to. Refuses, with one line naming it (``NotDurableError``), what the
    journal cannot make durable: tools that run outside function calls (computer, shell,
    local shell, apply-patch, custom tools), tool guardrails and agent guardrails, two agents
    of one name, and a write whose ``failure_error_function`` turns its exception into a
    result or that has a ``timeout_seconds``."""
    if not isinstance(agent, SdkAgent):
        raise TypeError(f"durable() takes an agents.Agent, not {type(agent).__name__}")
    writes, approve = frozenset(writes), frozenset(approve)
    unknown = set(gate_options) - {"deny", "idempotent", "approve_within"}
    if unknown:
        raise TypeError(f"durable() got unexpected options: {', '.join(sorted(unknown))}")
    within = gate_options.pop("approve_within", None)
    default_within = None
    if isinstance(within, Mapping):
        gate_options["approve_within"] = dict(within)
    elif within is not None:
        default_within = parse_duration(within)
    gate = static_gate(
        writes=writes, approve=approve, requires_approval=flagged(agent), **gate_options
    )
    _check_failures(agent, gate)
    graph = Graph(
        agent,
        gate,
        trust_annotations=trust_annotations,
        writes=writes,
        approve=approve,
    )
    loop = AgentsLoop(
        graph=graph,
        model=_model_info(agent, run_config),
        run_config=run_config,
        context=context,
        tools=tuple(graph.all_tools()),
        max_turns=max_turns,
        budget=budget,
        prices=prices,
        approve_within=default_within,
    )
    return Agent(loop, gate, version=version)


def tool_context(ctx: RunContextWrapper[Any]) -> ToolContext:
    """The durable context of the tool call ``ctx`` (a tool's SDK ``ToolContext``) is: its run,
    step, attempt, idempotency key (pass it to the system you write to), fence and
    ``cancelled``. The same as ``durableagent.tools.current_context()`` inside the call;
    outside a durable run, a plain call's (no run, a fresh key)."""
    running = CALL.get()
    call_id = getattr(ctx, "tool_call_id", None)
    if running is not None and call_id is not None and running != call_id:
        raise ValueError(
            f"tool_context(): {call_id!r} is not the tool call running now ({running!r})"
        )
    return current_context()


def _check_failures(agent: SdkAgent[Any], gate: PolicyGate) -> None:
    """A write whose own ``failure_error_function`` makes its exception a result would be
    recorded as done when it raised: refused (the SDK's default formatter, and None, are
    fine: the journal sees the exception)."""
    for a in reachable(agent):
        for t in a.tools:
            if not isinstance(t, FunctionTool) or not gate.is_write(t.name):
                continue
            if t.timeout_seconds is not None:
                raise NotDurableError(
                    f"durable(): write {t.name!r} has timeout_seconds: the SDK would cancel it and "
                    "answer the model while the write may have happened (leave the timeout to "
                    "the system it writes to)"
                )
            custom = not getattr(t, "_use_default_failure_error_function", True)
            if custom and getattr(t, "_failure_error_function", None) is not None:
                raise NotDurableError(
                    f"durable(): write {t.name!r} has a failure_error_function that turns its "
                    "exception into a result: a write that raised would be recorded as done "
                    "(give it failure_error_function=None or leave the SDK's default)"
                )


def _model_info(agent: SdkAgent[Any], run_config: RunConfig | None) -> ModelInfo:
    """The model as the journal names it (prices, reservations, traces)."""
    model: Any = run_config.model if run_config is not None and run_config.model else agent.model
    if isinstance(model, str):
        return ModelInfo(model, "openai")
    if isinstance(model, Model):
        name = getattr(model, "model", "") or type(model).__name__
        return ModelInfo(str(name), "openai")
    return ModelInfo("default", "openai")


__all__ = ["NotDurableError", "durable", "tool_context"]

"""The seam between a run and an agent's loop: :class:`Turns`, the steps of one attempt turn by
turn, and :class:`AgentLoop`, what ``run()`` executes.

Our own loop (``AgentConfig.run_turns``, i.e. ``run_loop``) and an agent that brings its own
loop (a framework's agent made durable: ``durableagent.integrations``) run through the same
:class:`Turns`: each model request is the next turn's ``llm/T`` step, each tool call of turn T is
``tool/T/I/NAME`` (the grammar of steps.py), and the gate's decisions (reads and writes,
approvals bound to the exact arguments by their marker, denials, refusals) are made here once.
Whatever a framework does itself (its validation, its retries, how it talks to its model), the
journal sees only these steps, so replay, indeterminate writes, reconciles, budgets, controls,
plan, fork and telemetry work for it unchanged.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from .budget import Budget, Prices
from .calls import marker_for
from .errors import MaxTurnsExceeded
from .gate import Pending, PolicyGate, describe_policy, policy_source
from .messages import Message, StepKind, ToolCall
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
class LoopOutcome:
    """``message`` set: the run answered. ``pending`` non-empty: it waits for a human."""

    message: Message | None
    pending: tuple[Pending, ...] = field(default=())


class Turns:
    """The steps of one attempt, turn by turn, through ``runner`` (the journal, in a run).

    An agent's loop calls :meth:`model` for each model request (the next turn's ``llm/T``),
    :meth:`pending` on the calls the reply asked for (before any of them runs: the calls a
    human must decide on), and :meth:`tool` for each call (``tool/T/I/NAME``, ``I`` its
    position among the reply's calls). ``approved`` are the markers humans approved;
    ``denied`` maps a marker to the reason the model reads. ``tools`` are the agent's tools as
    far as the gate's words need them (a policy line for a human, a write's hint, where its
    class came from); a loop that learns its tools as it goes adds them with :meth:`know`."""

    def __init__(
        self,
        runner: StepRunner | None = None,
        gate: PolicyGate | None = None,
        *,
        approved: Iterable[str] = (),
        denied: Mapping[str, str] | None = None,
        tools: Iterable[Tool] = (),
        max_turns: int = 20,
    ) -> None:
        self.runner: StepRunner = runner or PlainRunner()
        self.gate = gate or PolicyGate()
        self.approved = frozenset(approved)
        self.denied: Mapping[str, str] = denied or {}
        self.tools: dict[str, Tool] = {}
        self.know(tools)
        self.max_turns = max_turns
        self.turn = 0  # the turn of the latest model step (0 before the first)

    def know(self, tools: Iterable[Tool]) -> None:
        """Add (or replace) tools by name: a framework that discovers its tools per request
        tells them here before their calls are decided on."""
        for t in tools:
            self.tools[t.name] = t

    @property
    def reserves(self) -> bool:
        """The run has a budget: each model step needs its reservation (``reserve``)."""
        return bool(getattr(self.runner, "reserves", False))

    async def model(self, call: StepFn, *, reserve: Callable[[], int] | None = None) -> Any:
        """Run the next turn's model step ``llm/T``: ``call`` makes the request and returns the
        assistant message's dict (``Message.to_dict()`` keys, plus whatever the loop needs to
        replay it); the recorded dict is returned (the first time too: it passed through JSON).
        ``reserve`` returns the tokens the request may use (see ``budget.reservation``); it is
        asked only when the run has a budget. More than ``max_turns`` model steps raise
        :class:`MaxTurnsExceeded`."""
        if self.turn >= self.max_turns:
            raise MaxTurnsExceeded(self.max_turns)
        self.turn += 1
        budgeting: dict[str, Any] = {}
        if reserve is not None and self.reserves:
            budgeting["reserve"] = reserve
        return await self.runner.run_step(model_step(self.turn), StepKind.MODEL, call, **budgeting)

    def step(self, index: int, call: ToolCall, *, turn: int | None = None) -> str:
        """The step name of call ``index`` of ``turn`` (default: the current one)."""
        return tool_step(self.turn if turn is None else turn, index, call.name)

    def marker(self, index: int, call: ToolCall, *, turn: int | None = None) -> str:
        """The marker binding a human's decision to this call with exactly these arguments."""
        return marker_for(self.step(index, call, turn=turn), call.arguments)

    def pending(self, calls: Sequence[ToolCall], *, turn: int | None = None) -> tuple[Pending, ...]:
        """The calls of ``turn`` (default: the current one) a human must decide on before any
        call of that turn runs (see :meth:`waiting`)."""
        out = (self.waiting(i, c, turn=turn) for i, c in enumerate(calls))
        return tuple(p for p in out if p is not None)

    def waiting(
        self, index: int, call: ToolCall, *, turn: int | None = None, asked: bool = False
    ) -> Pending | None:
        """Call ``index`` as a pending approval when a human must decide on it: the gate wants
        approval for the tool (or the framework ``asked`` for one), it is not denied by policy,
        its step has no result, and its marker is neither approved nor denied. A malformed
        call is refused when it runs, never put to a human."""
        step, marker = self.step(index, call, turn=turn), self.marker(index, call, turn=turn)
        if (
            self.runner.is_recorded(step)
            or not (asked or self.gate.needs_approval(call.name))
            or call.error is not None
            or self.gate.is_denied(call.name)
            or marker in self.approved
            or marker in self.denied
        ):
            return None
        tool = self.tools.get(call.name)
        policy = "" if tool is None else describe_policy(tool, self.gate)
        return Pending(marker, step, call.name, call.arguments, policy)

    def refusal(self, index: int, call: ToolCall, *, turn: int | None = None) -> str | None:
        """Why this call must not run, as the model will read it: denied by policy, denied by
        a human (their reason), or malformed (its error); None when it may run. An unknown
        tool is :meth:`tool`'s to refuse: a framework answers those its own way."""
        if self.gate.is_denied(call.name):
            return f"denied by policy: the tool {call.name!r} is not allowed"
        denied = self.denied.get(self.marker(index, call, turn=turn))
        if denied is not None:
            return denied
        return call.error

    async def tool(
        self,
        index: int,
        call: ToolCall,
        invoke: StepFn,
        *,
        turn: int | None = None,
        refused: Callable[[str], Any] | None = None,
    ) -> Any:
        """Run call ``index`` of ``turn`` (default: the current one) as step
        ``tool/T/I/NAME`` and return what is recorded for it. ``invoke`` calls the tool and
        returns its ``Result`` dict (with any keys the loop needs to replay it).

        A call that must not run (:meth:`refusal`, or a tool it does not know: a loop tells
        its tools with ``tools`` or :meth:`know` first) is recorded as an error ``Result``
        naming why, without calling ``invoke``; ``refused(reason)``, when given, makes that
        record instead (the loop's own shape of a refusal). A call that runs carries its
        marker (a deny that lands before its start is recorded still refuses it), the gate's
        class (a write's start is fsynced before it runs; one that never finished stops the
        run indeterminate), and where that class came from."""
        step = self.step(index, call, turn=turn)
        marker = self.marker(index, call, turn=turn)
        write = self.gate.is_write(call.name)
        reason = self.refusal(index, call, turn=turn)
        if reason is None and call.name not in self.tools:
            available = ", ".join(sorted(self.tools)) or "none"
            reason = f"unknown tool {call.name!r}; available: {available}"
        if reason is not None:
            record = Result(reason, is_error=True).to_dict() if refused is None else refused(reason)

            async def refuse() -> Any:
                return record

            return await self.runner.run_step(
                step, StepKind.TOOL, refuse, write=write, refused=True
            )
        tool = self.tools.get(call.name)
        # A call that will act records the gate's class and carries its marker: a deny
        # recorded after this attempt began still stops it, up to the moment its start is.
        policy = _write_policy(call.name, tool, self.gate, write)
        if not write and self.gate.needs_approval(call.name):
            policy["gated"] = True  # a read a human approved: checked before it runs
        return await self.runner.run_step(
            step, StepKind.TOOL, invoke, write=write, marker=marker, **policy
        )


def _write_policy(name: str, tool: Tool | None, gate: PolicyGate, write: bool) -> dict[str, Any]:
    """``idempotent`` and ``hint`` for a write's start, and ``classified_by`` for any tool
    call's (where its class came from, when its code did not declare it), passed only when
    they apply so that a StepRunner written before them still runs every other call."""
    policy: dict[str, Any] = {}
    if write and gate.is_idempotent(name):
        policy["idempotent"] = True
    if tool is None:
        return policy
    source = policy_source(tool, gate)
    if source:
        policy["classified_by"] = source
    if write and tool.hint:
        policy["hint"] = tool.hint
    return policy


class AgentLoop(Protocol):
    """What ``run()`` executes: our own ``AgentConfig``, or an agent that brings its own loop
    (a framework's agent made durable, see ``durableagent.integrations`` and
    docs/integrations.md). ``run()`` hands :meth:`run_turns` the run's recorded input and a
    :class:`Turns` over the journal; every model request and tool call goes through it.

    - ``model``: what the agent talks to, as far as the journal needs it: ``.model`` names it
      (``prices`` keys, a reservation, the traces' ``gen_ai.request.model``), ``.provider``
      gives ``gen_ai.provider.name``, ``.output_limit`` the most a reply may hold.
    - ``tools``: the tools known before the run starts (the gate's words for a human).
    - ``max_turns``, ``budget``, ``prices``, ``approve_within``: as on ``AgentConfig``."""

    @property
    def model(self) -> object: ...

    @property
    def tools(self) -> Sequence[Tool]: ...

    @property
    def max_turns(self) -> int: ...

    @property
    def budget(self) -> Budget | None: ...

    @property
    def prices(self) -> Prices | None: ...

    @property
    def approve_within(self) -> float | str | None: ...

    async def run_turns(self, messages: Sequence[Message], turns: Turns) -> LoopOutcome:
        """Run the agent on ``messages`` (the run's recorded input) through ``turns``, until it
        answers (``LoopOutcome(message)``) or a call waits for a human
        (``LoopOutcome(None, pending)``, with ``turns.pending``'s calls). Anything the journal
        raises (an indeterminate write, a halt, a lost lease, the budget) must propagate."""
        ...

"""Agents for worker processes started by the tests (``agentrun worker --agent
_child_agents:NAME``). Each takes the store's path and counts its side effects in files under
``<store>/.side/``, one fsynced line per effect, so the counts survive the process."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from durableagent import Agent, AgentConfig, Message, PolicyGate, ScriptedModel, Tool, ToolCall


def note(root: Path, what: str, line: str) -> None:
    """One side effect: a line in ``<root>/.side/<what>.log``."""
    folder = root / ".side"
    folder.mkdir(exist_ok=True)
    with open(folder / f"{what}.log", "a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


def lines(root: Path, what: str) -> list[str]:
    """The side effects noted so far."""
    p = root / ".side" / f"{what}.log"
    return p.read_text().splitlines() if p.exists() else []


def _request(messages: Sequence[Message]) -> str:
    return next(m.content for m in messages if m.role == "user")


def gated(root: Path) -> Agent:
    """create_ticket (a write that needs approval), then the answer."""

    def reply(messages: Sequence[Message]) -> Message:
        note(root, "model", _request(messages))
        done = [m for m in messages if m.role == "tool"]
        if not done:
            call = ToolCall("t1", "create_ticket", {"summary": _request(messages)})
            return Message("assistant", tool_calls=(call,))
        return Message("assistant", f"filed {done[0].content}")

    def create_ticket(args: dict[str, Any]) -> str:
        note(root, "tickets", str(args["summary"]))
        return f"ticket for {args['summary']}"

    tool = Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket)
    return Agent(AgentConfig(ScriptedModel(reply), [tool]), PolicyGate(writes={"create_ticket"}))


def lapsing(root: Path) -> Agent:
    """As ``gated``, but an approval not given within AGENTRUN_TEST_WITHIN seconds (default
    2) lapses: the workers deny it, and the answer says what the model read."""
    within = float(os.environ.get("AGENTRUN_TEST_WITHIN", "2"))
    side = Path(os.environ.get("AGENTRUN_SIDE") or root)  # any store: the tests read it here
    side.mkdir(parents=True, exist_ok=True)

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            call = ToolCall("t1", "create_ticket", {"summary": _request(messages)})
            return Message("assistant", tool_calls=(call,))
        return Message("assistant", f"the ticket: {done[0].content}")

    def create_ticket(args: dict[str, Any]) -> str:
        note(side, "tickets", str(args["summary"]))
        return f"ticket for {args['summary']}"

    tool = Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket)
    gate = PolicyGate(writes={"create_ticket"}, approve_within={"create_ticket": within})
    return Agent(AgentConfig(ScriptedModel(reply), [tool]), gate)


def budgeted(root: Path) -> Agent:
    """A model on the local provider (``$OPENAI_BASE_URL``) that looks something up every
    turn and never answers: only its budget stops it. Replies are bounded at 64 tokens."""
    from durableagent.models import OpenAIModel

    def lookup(args: dict[str, Any]) -> str:
        return f"nothing found for {args.get('n')}; " + "try again " * 8

    tool = Tool("lookup", "look something up", {"type": "object"}, lookup)
    model = OpenAIModel("fake", max_completion_tokens=64)
    return Agent(AgentConfig(model, [tool], max_turns=1000), PolicyGate())


def broken(root: Path) -> Agent:
    """A model that fails every call (the time of each attempt is noted)."""

    def reply(messages: Sequence[Message]) -> Message:
        note(root, "attempts", repr(time.time()))
        raise ConnectionError("the model service is down")

    return Agent(AgentConfig(ScriptedModel(reply)), PolicyGate())


SLOW = float(os.environ.get("SLOW_WRITE_SECONDS", "1.0"))


def slow(root: Path) -> Agent:
    """An unattended write that takes SLOW_WRITE_SECONDS, then a second model call."""

    def reply(messages: Sequence[Message]) -> Message:
        note(root, "model", "call")
        if not any(m.role == "tool" for m in messages):
            return Message("assistant", tool_calls=(ToolCall("w1", "slow_write", {}),))
        return Message("assistant", "written")

    def slow_write(args: dict[str, Any]) -> str:
        note(root, "writes", "begin")
        time.sleep(SLOW)
        note(root, "writes", "end")
        return "written"

    tool = Tool("slow_write", "a slow write", {"type": "object"}, slow_write)
    gate = PolicyGate(writes={"slow_write"}, approve=())
    return Agent(AgentConfig(ScriptedModel(reply), [tool]), gate)


def gate_file(root: Path, name: str, timeout: float = 30.0) -> None:
    """Block until the test creates ``<root>/.side/<name>`` (a step held open on purpose)."""
    path = root / ".side" / name
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)


def race(root: Path) -> Agent:
    """One turn asks two calls at once: a read held open until ``.side/go``, then a ticket (a
    write that needs approval) held open until ``.side/go-write``. Then the answer names
    both results."""

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            calls = (
                ToolCall("r1", "slow_lookup", {"topic": "access"}),
                ToolCall("w1", "create_ticket", {"summary": _request(messages)}),
            )
            return Message("assistant", tool_calls=calls)
        return Message("assistant", " | ".join(m.content for m in done))

    def slow_lookup(args: dict[str, Any]) -> str:
        note(root, "lookups", "begin")
        gate_file(root, "go")
        return "access needs a ticket"

    def create_ticket(args: dict[str, Any]) -> str:
        note(root, "tickets", "begin")
        gate_file(root, "go-write")
        note(root, "tickets", "end")
        return "TICKET-1"

    tools = [
        Tool("slow_lookup", "look up a policy", {"type": "object"}, slow_lookup),
        Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket),
    ]
    return Agent(AgentConfig(ScriptedModel(reply), tools), PolicyGate(writes={"create_ticket"}))


def flaky(root: Path) -> Agent:
    """One turn asks a lookup (a read that always fails, noting each attempt) and a ticket (a
    write that needs approval)."""

    def reply(messages: Sequence[Message]) -> Message:
        calls = (
            ToolCall("r1", "lookup", {"topic": "access"}),
            ToolCall("w1", "create_ticket", {"summary": _request(messages)}),
        )
        return Message("assistant", tool_calls=calls)

    def lookup(args: dict[str, Any]) -> str:
        note(root, "attempts", repr(time.time()))
        raise ConnectionError("the policy service is down")

    def create_ticket(args: dict[str, Any]) -> str:
        note(root, "tickets", "filed")
        return "TICKET-1"

    tools = [
        Tool("lookup", "look up a policy", {"type": "object"}, lookup),
        Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket),
    ]
    return Agent(AgentConfig(ScriptedModel(reply), tools), PolicyGate(writes={"create_ticket"}))


def fenced(root: Path) -> Agent:
    """lookup (a read), then create_ticket (a write that needs no approval), then the answer.
    Side effects go to ``$AGENTRUN_SIDE`` (any store: a PostgreSQL store has no folder).
    ``FENCE_HOLD=read`` or ``write`` holds that tool open, after noting that it began, until
    the test creates ``go-read`` or ``go-write`` there."""
    side = Path(os.environ["AGENTRUN_SIDE"])
    hold = os.environ.get("FENCE_HOLD", "")

    def mark(what: str, line: str) -> None:
        with open(side / f"{what}.log", "a") as f:
            f.write(line + "\n")
            f.flush()
            os.fsync(f.fileno())

    def wait_for(gate: str) -> None:
        deadline = time.monotonic() + 120
        while not (side / gate).exists():
            if time.monotonic() > deadline:
                raise TimeoutError(f"{side / gate} never appeared")
            time.sleep(0.01)

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if not done:
            return Message("assistant", tool_calls=(ToolCall("r1", "lookup", {}),))
        if len(done) == 1:
            return Message("assistant", tool_calls=(ToolCall("w1", "create_ticket", {}),))
        return Message("assistant", f"filed {done[-1].content}")

    def lookup(args: dict[str, Any]) -> str:
        mark("lookups", f"begin {os.getpid()}")
        if hold == "read":
            wait_for("go-read")
        return "tickets need IT"

    def create_ticket(args: dict[str, Any]) -> str:
        mark("tickets", f"begin {os.getpid()}")
        if hold == "write":
            wait_for("go-write")
        mark("tickets", f"end {os.getpid()}")
        return "TICKET-1"

    tools = [
        Tool("lookup", "look up a policy", {"type": "object"}, lookup),
        Tool("create_ticket", "file a ticket", {"type": "object"}, create_ticket),
    ]
    gate = PolicyGate(writes={"create_ticket"}, approve=())
    return Agent(AgentConfig(ScriptedModel(reply), tools), gate)


@contextlib.asynccontextmanager
async def mcp_helpdesk(root: Path) -> AsyncIterator[Agent]:
    """Tools from the test MCP server (``_mcp_server.py`` over stdio, counting into
    ``<root>/.mcp/``), its annotations trusted: ``lookup`` (a read), ``file_ticket`` (an
    idempotent write) and ``send_note`` (a write), none needing approval. A run's request
    names the one tool it calls; the answer is that call's result."""
    import mcp

    from durableagent import gate_for, mcp_tools

    calls = {
        "read": ToolCall("r", "lookup", {"topic": "vpn"}),
        "idempotent": ToolCall("i", "file_ticket", {"summary": "vpn is down"}),
        "write": ToolCall("w", "send_note", {"to": "bo", "text": "vpn is down"}),
    }

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if done:
            return Message("assistant", done[0].content)
        return Message("assistant", tool_calls=(calls[_request(messages)],))

    server = mcp.StdioServerParameters(
        command=sys.executable,
        args=[str(Path(__file__).parent / "_mcp_server.py"), str(Path(root) / ".mcp")],
    )
    async with mcp.Client(server) as client:
        tools = await mcp_tools(client, trust_annotations=True)
        yield Agent(AgentConfig(ScriptedModel(reply), tools), gate_for(tools))


def moving(root: Path) -> Agent:
    """Three lookups (reads), then a ticket (a write that needs no approval), then the answer.
    Every call notes ``RUN STEP PID`` in ``$AGENTRUN_SIDE/calls.log`` (any store: the workers
    of two stores share it), so a run executed by two stores shows. A lookup holds until the
    file ``$AGENTRUN_SIDE/release`` exists, so the runs are still live when a move (a new
    process, slow to start on a loaded machine) lands; then each takes 0.1 s."""
    side = Path(os.environ["AGENTRUN_SIDE"])
    side.mkdir(parents=True, exist_ok=True)

    def mark(ctx: Any) -> None:
        with open(side / "calls.log", "a") as f:
            f.write(f"{ctx.run_id} {ctx.step} {os.getpid()}\n")
            f.flush()
            os.fsync(f.fileno())

    def reply(messages: Sequence[Message]) -> Message:
        done = [m for m in messages if m.role == "tool"]
        if len(done) < 3:
            return Message("assistant", tool_calls=(ToolCall(f"l{len(done)}", "lookup", {}),))
        if len(done) == 3:
            return Message("assistant", tool_calls=(ToolCall("w", "file_ticket", {}),))
        return Message("assistant", "filed")

    def lookup(args: dict[str, Any], ctx: Any) -> str:
        mark(ctx)
        while not (side / "release").exists() and not ctx.cancelled.is_set():
            time.sleep(0.05)
        time.sleep(0.1)
        return "policy"

    def file_ticket(args: dict[str, Any], ctx: Any) -> str:
        mark(ctx)
        return "T-1"

    tools = [
        Tool("lookup", "look up a policy", {"type": "object"}, lookup),
        Tool("file_ticket", "file a ticket", {"type": "object"}, file_ticket),
    ]
    gate = PolicyGate(writes={"file_ticket"}, approve=())
    return Agent(AgentConfig(ScriptedModel(reply), tools), gate)

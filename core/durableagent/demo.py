"""The demo helpdesk agent and a store with runs in every state (``agentrun demo``).

The model is a :class:`ScriptedModel` driven by a function of the conversation, so a replayed
run (which skips recorded model calls) gets the same next reply. Its tools act on a tiny
ticket system and outbox kept as JSON files in ``<store>/.demo/``. The two writes show the
difference idempotency makes: the ticket system deduplicates on the step's idempotency key, so
``create_ticket`` is an *idempotent* write that simply runs again after a crash; the outbox
does not, so an unfinished ``send_email`` stops the run until a human opens ``outbox.json`` and
reconciles it.

Runs the demo store holds (``build_demo_store``):

- ``billing-access``: completed (a ticket approved and filed).
- ``admin-rights``: completed after a human denied the ticket.
- ``laptop-broken``: awaiting approval of two calls made in one turn (ticket and email).
- ``shared-drive``: awaiting approval of one ticket.
- ``crm-access``: indeterminate. A first child process was SIGKILLed inside ``create_ticket``
  after the ticket was filed: being idempotent, it ran again in the next child with the same
  key (one ticket, two attempts). That child was SIGKILLed inside ``send_email`` after the
  mail was queued: not idempotent, so it waits for a human.
- ``vpn-access``: failed three times (the policy service is down: delete
  ``.demo/policy-service-down``, then ``agentrun retry vpn-access``).
- ``password-reset``: ready (submitted, never run).
- ``access-audit``: slow (about a second per step). A child process ran it and was SIGKILLed
  inside its third model call: ready, its attempt lost; the demo's worker resumes it, replaying
  the four steps that have results and re-running the call that was cut off.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import fcntl
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

from .errors import StoreError
from .gate import gate_for
from .loop import AgentConfig
from .messages import Message, ToolCall
from .model import ScriptedModel
from .outcome import Status
from .record import STEP_STARTED
from .run import Config, run, submit
from .run import signal as send_signal
from .steps import model_step
from .stores import FileStore, Store
from .stores.file.fs import write_atomically
from .tools import Result, Tool, ToolContext, current_context
from .view import view_store
from .worker import Agent, note_failure

log = logging.getLogger("durableagent.demo")

DEMO_DIR = ".demo"
PACE = 1.0  # seconds per step of the slow run
SERVICE_DOWN = "policy-service-down"
REQUESTER = "alex@example.com"

POLICIES = {
    "billing": "Billing dashboard access needs a ticket approved by the finance lead.",
    "crm": "CRM access needs a ticket; sales operations grants it within a day.",
    "vpn": "VPN access is automatic for staff; connection problems need a ticket.",
    "hardware": "Broken hardware is replaced through a ticket; tell the manager by email.",
    "admin": "Production admin rights need a change request, never a helpdesk ticket.",
    "access": "Access to shared resources needs a ticket approved by the resource owner.",
}

SYSTEM = "You are a helpdesk agent. Look up the policy, then act on it."


def _topic(text: str) -> str:
    text = text.lower()
    for word, topic in (
        ("billing", "billing"),
        ("crm", "crm"),
        ("vpn", "vpn"),
        ("laptop", "hardware"),
        ("admin", "admin"),
    ):
        if word in text:
            return topic
    return "access"


def _request(messages: Sequence[Message]) -> str:
    return next((m.content for m in messages if m.role == "user"), "")


def _is_audit(messages: Sequence[Message]) -> bool:
    return "audit" in _request(messages).lower()


AUDIT_TOPICS = ("audit:billing", "audit:vpn", "audit:crm", "audit:hardware", "audit:access")
AUDIT_KILLED_AT = 3  # the audit's model call the demo's child process is killed in
KILL_AUDIT = "llm/3"  # crash_in for that child: a model step, not a tool
BUILDER = "demo-build"  # the lease owner of the runs the demo store is built with


def reply(messages: Sequence[Message]) -> Message:
    """The demo model: what to do next, from the conversation alone."""
    request = _request(messages)
    results = [m for m in messages if m.role == "tool"]
    if _is_audit(messages):
        if len(results) < len(AUDIT_TOPICS):
            topic = AUDIT_TOPICS[len(results)]
            call = ToolCall(f"audit-{len(results)}", "lookup_policy", {"topic": topic})
            return Message("assistant", tool_calls=(call,))
        lines = "; ".join(r.content for r in results)
        return Message("assistant", f"Audit done. {lines}")
    if not results:
        call = ToolCall("c1", "lookup_policy", {"topic": _topic(request)})
        return Message("assistant", tool_calls=(call,))
    if len(results) == 1:
        calls = [
            ToolCall("c2", "create_ticket", {"summary": request[:80], "requester": REQUESTER}),
        ]
        if "email" in request.lower():
            body = f"Your report was received: {request[:80]}"
            calls.append(
                ToolCall(
                    "c3",
                    "send_email",
                    {"to": "manager@example.com", "subject": "Helpdesk request", "body": body},
                )
            )
        return Message("assistant", tool_calls=tuple(calls))
    return Message("assistant", _report(results[1:]))


def _report(results: Sequence[Message]) -> str:
    """What the agent tells the user once its writes ran: the real ticket id it filed."""
    denied = [r.content for r in results if r.content.startswith("denied")]
    if denied:
        return f"I could not file your request: {denied[0]}."
    said = []
    for r in results:
        if r.name == "create_ticket":
            said.append(f"Filed {r.content} for you")
        elif r.name == "send_email":
            said.append(f"{r.content[:1].upper()}{r.content[1:]}")
        else:
            said.append(r.content)
    return "; ".join(said) + "."


class DemoModel:
    """The scripted demo model, paced: the audit run takes ``pace`` seconds per model call so
    that its records arrive visibly. ``kill_audit_at``: SIGKILL this process inside the
    audit's model call of that turn, once its start shows in ``store`` (a slow call's start
    is recorded while it runs; its result never is)."""

    def __init__(
        self,
        pace: float = PACE,
        kill_audit_at: int | None = None,
        store: Store | None = None,
    ) -> None:
        self.pace = pace
        self.kill_audit_at = kill_audit_at
        self.store = store
        self.scripted = ScriptedModel(reply)

    async def complete(self, messages: Sequence[Message], tools: Sequence[Tool]) -> Message:
        if _is_audit(messages):
            turn = 1 + sum(1 for m in messages if m.role == "assistant")
            if turn == self.kill_audit_at:
                await self._until_started(model_step(turn))
                os.kill(os.getpid(), signal.SIGKILL)
            if self.pace:
                await asyncio.sleep(self.pace)
        return await self.scripted.complete(messages, tools)

    async def _until_started(self, step: str) -> None:
        """Wait (a minute at most) until this call's start is in the journal."""
        run_id = current_context().run_id
        for _ in range(600):
            if self.store is None or not run_id:
                return
            records = await asyncio.to_thread(self.store.load, run_id)
            if any(r.type == STEP_STARTED and r.step == step for r in records[-3:]):
                return
            await asyncio.sleep(0.1)


# -- the ticket system ----------------------------------------------------------------------


def demo_dir(root: Path) -> Path:
    """Where the demo's ticket system lives inside the store."""
    return Path(root) / DEMO_DIR


def read_list(root: Path, name: str) -> list[dict[str, Any]]:
    """The demo's ``tickets`` or ``outbox`` list."""
    try:
        data = json.loads((demo_dir(root) / f"{name}.json").read_text())
    except (OSError, ValueError):
        return []
    return data if isinstance(data, list) else []


class StaleFenceError(Exception):
    """The demo's ticket system refused a write from a lease holder that was superseded."""


def add_item(
    root: Path,
    name: str,
    make: Callable[[int], dict[str, Any]],
    *,
    key: str | None = None,
    fence: Any = None,
) -> dict[str, Any]:
    """Append ``make(n)`` (n: the next number) to a list file, durably, under a lock: several
    runs and processes file tickets at once. With ``key``, an item already filed under that
    key is returned instead (how the ticket system deduplicates). With ``fence`` (a run's
    ``(run_id, epoch)``, see ToolContext.fence), a write whose epoch is lower than one seen
    for that run is refused (StaleFenceError): its holder was paused past its lease and
    another worker runs the run now."""
    folder = demo_dir(root)
    folder.mkdir(parents=True, exist_ok=True)
    lock = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)
        _check_fence(root, fence)
        items = read_list(root, name)
        if key is not None:
            for old in items:
                if isinstance(old, dict) and old.get("key") == key:
                    return old
        item = make(len(items) + 1)
        items.append(item)
        write_atomically(folder / f"{name}.json", (json.dumps(items, indent=2) + "\n").encode())
    finally:
        os.close(lock)
    return item


def _check_fence(root: Path, fence: Any) -> None:
    """Refuse a stale epoch; remember the highest one seen per run (under the list lock)."""
    if not (isinstance(fence, tuple | list) and len(fence) == 2):
        return
    run_id, epoch = str(fence[0]), fence[1]
    if not isinstance(epoch, int):
        return
    path = demo_dir(root) / "fences.json"
    try:
        seen = json.loads(path.read_text())
    except (OSError, ValueError):
        seen = {}
    if not isinstance(seen, dict):
        seen = {}
    highest = seen.get(run_id)
    if isinstance(highest, int) and epoch < highest:
        raise StaleFenceError(
            f"refused: run {run_id!r} is held at epoch {highest} now; this write carries "
            f"epoch {epoch} (its worker lost the lease)"
        )
    if highest != epoch:
        seen[run_id] = epoch
        write_atomically(path, (json.dumps(seen, indent=2) + "\n").encode())


def demo_hints(root: Path) -> dict[str, str]:
    """Where the on-call human checks whether each demo write happened (the reconcile
    dialog's hints)."""
    here = demo_dir(root)
    return {
        "create_ticket": f"look in {here / 'tickets.json'} for a ticket with this step's key",
        "send_email": f"look in {here / 'outbox.json'} for an email with this step's key",
    }


def _crash_if(crash_in: str | None, tool: str) -> None:
    if crash_in == tool:
        os.kill(os.getpid(), signal.SIGKILL)


def demo_tools(
    root: Path,
    *,
    pace: float = PACE,
    crash_in: str | None = None,
    tickets: Sequence[Tool] | None = None,
) -> list[Tool]:
    """lookup_policy (a read), create_ticket (an idempotent write: the ticket system
    deduplicates on the key) and send_email (a write that is not) on the store's ticket system.
    ``tickets``: the ticket server's tools (from :func:`demo_agent`); without them
    create_ticket files in-process, the same way. ``crash_in`` names a write that SIGKILLs
    the process right after it acted."""
    root = Path(root)
    hints = demo_hints(root)

    def crash_if(tool: str) -> None:
        _crash_if(crash_in, tool)

    def lookup_policy(args: dict[str, Any]) -> str:
        topic = str(args.get("topic", "access"))
        if topic.startswith("audit:"):
            time.sleep(pace)  # a sync tool runs in a thread: sleeping stalls nothing
            return f"{topic[6:]}: {POLICIES.get(topic[6:], POLICIES['access'])}"
        if topic == "vpn" and (demo_dir(root) / SERVICE_DOWN).exists():
            raise ConnectionError(
                "policy service unreachable (the demo's .demo/policy-service-down file exists)"
            )
        return POLICIES.get(topic, POLICIES["access"])

    def create_ticket(args: dict[str, Any], ctx: ToolContext) -> Result:
        ticket = add_item(
            root,
            "tickets",
            lambda n: {
                "id": f"TICKET-{n}",
                "summary": str(args.get("summary", "")),
                "requester": str(args.get("requester", "")),
                "key": ctx.idempotency_key,
            },
            key=ctx.idempotency_key,
            fence=ctx.fence,
        )
        crash_if("create_ticket")
        return Result(ticket["id"])

    def send_email(args: dict[str, Any], ctx: ToolContext) -> Result:
        # The outbox keeps the step's key with each mail (as a mail header would) but does
        # not deduplicate on it: a human can find the mail by its key, and must decide.
        mail = add_item(
            root,
            "outbox",
            lambda n: {
                "id": f"MAIL-{n}",
                **{k: str(v) for k, v in args.items()},
                "key": ctx.idempotency_key,
            },
            fence=ctx.fence,
        )
        crash_if("send_email")
        return Result(f"email {mail['id']} sent to {args.get('to', '?')}")

    obj = {"type": "object"}
    ticket_tools = list(tickets) if tickets is not None else []
    if not ticket_tools:
        ticket_tools = [
            Tool(
                "create_ticket",
                "File a ticket in the ticket system",
                obj,
                create_ticket,
                write=True,
                idempotent=True,
                hint=hints["create_ticket"],
            )
        ]
    return [
        Tool("lookup_policy", "Look up the helpdesk policy on a topic", obj, lookup_policy),
        *ticket_tools,
        Tool("send_email", "Send an email", obj, send_email, write=True, hint=hints["send_email"]),
    ]


@contextlib.asynccontextmanager
async def demo_agent(
    root: str | os.PathLike[str],
    *,
    pace: float = PACE,
    crash_in: str | None = None,
    in_process: bool = False,
) -> AsyncIterator[Agent]:
    """The demo helpdesk agent working on the ticket system of the store at ``root``, for as
    long as the context lasts; its gate comes from its tools (both writes need approval;
    create_ticket is idempotent).

    Its tickets are filed through the demo's MCP ticket server (``demo_ticket_server``),
    started over stdio; ``in_process`` runs that server inside this process instead (the
    SDK's in-memory transport: the demo store builds without starting one per child). The
    server's annotations are trusted; an override keeps a human on every ticket, though the
    server says filing one destroys nothing. Without the ``mcp`` extra the ticket system is
    called in-process, the same way, and the demo says so."""
    root = Path(root)
    async with contextlib.AsyncExitStack() as stack:
        try:
            tickets = await _ticket_tools(stack, root, in_process=in_process)
        except ImportError as e:
            log.warning("the demo files tickets in-process (no MCP server): %s", e)
            tickets = []
        if crash_in == "create_ticket":
            tickets = [_crashing(t, crash_in) for t in tickets]
        tools = demo_tools(root, pace=pace, crash_in=crash_in, tickets=tickets)
        kill_at = AUDIT_KILLED_AT if crash_in == KILL_AUDIT else None
        model = DemoModel(pace, kill_at, FileStore(root) if kill_at is not None else None)
        config = AgentConfig(model=model, tools=tools, system=SYSTEM)
        yield Agent(config, gate_for(tools))


async def _ticket_tools(
    stack: contextlib.AsyncExitStack, root: Path, *, in_process: bool
) -> list[Tool]:
    """The ticket server's tools, over a connection ``stack`` closes."""
    import mcp  # the extra; ImportError: the in-process ticket system instead

    from .demo_ticket_server import ticket_server
    from .mcp_adapter import mcp_tools

    server: Any = ticket_server(root) if in_process else _stdio_server(stack, root)
    client = await stack.enter_async_context(mcp.Client(server))
    overrides = {"create_ticket": {"approve": True, "hint": demo_hints(root)["create_ticket"]}}
    tools = await mcp_tools(client, trust_annotations=True, overrides=overrides)
    # The demo model never reads a ticket back; get_ticket is there for real models.
    return [t for t in tools if t.name == "create_ticket"]


def _stdio_server(stack: contextlib.ExitStack | contextlib.AsyncExitStack, root: Path) -> Any:
    """The ticket server as a child process over stdio; what it says on stderr goes to
    ``.demo/ticket-server.log``, never onto the TUI's screen."""
    import mcp

    params = mcp.StdioServerParameters(
        command=sys.executable,
        args=["-m", "durableagent.demo_ticket_server", str(root)],
        env=dict(os.environ),
    )
    errlog = stack.enter_context(open(demo_dir(root) / "ticket-server.log", "a"))  # noqa: SIM115
    return mcp.stdio_client(params, errlog=errlog)


def _crashing(tool: Tool, crash_in: str) -> Tool:
    """``tool``, but the process SIGKILLs itself once the server has answered (the ticket
    is filed; its result is not yet recorded)."""

    async def call(args: dict[str, Any]) -> Result:
        result = await tool.call(args)
        _crash_if(crash_in, tool.name)
        return result

    return dataclasses.replace(tool, fn=call)


# -- the store ------------------------------------------------------------------------------

RUNS = {
    "billing-access": "I need access to the billing dashboard.",
    "admin-rights": "Please give me admin rights on the production database.",
    "laptop-broken": "My laptop screen is cracked: please order a new one and email my manager.",
    "shared-drive": "I need access to the finance shared drive.",
    "crm-access": "I need access to the CRM; please email my manager when it is filed.",
    "vpn-access": "I cannot connect to the VPN from home.",
    "password-reset": "I forgot my password for the HR portal.",
    "access-audit": "Please audit my access rights: billing, VPN, CRM, hardware, shared drives.",
}


def is_demo_store(root: Path) -> bool:
    """True when ``root`` holds a store built by :func:`build_demo_store`."""
    return (demo_dir(root) / "README").is_file()


def build_demo_store(root: Path) -> None:
    """Build the demo store into ``root``, which must be new or empty. Takes a second or so:
    the crm-access run is made by really killing two child processes, inside create_ticket
    (which then resumes on its own) and inside send_email (which then waits for a human)."""
    root = Path(root)
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise StoreError(f"{root} is not empty: build the demo store into a new directory")
    store = FileStore(root)
    folder = demo_dir(root)
    folder.mkdir()
    (folder / "README").write_text(
        "The demo helpdesk's ticket system: tickets.json and outbox.json.\n"
        f"While {SERVICE_DOWN} exists, policy lookups about the VPN fail.\n"
    )
    for name in ("tickets", "outbox"):
        (folder / f"{name}.json").write_text("[]\n")
    (folder / SERVICE_DOWN).write_text("delete this file to bring the policy service back\n")
    asyncio.run(_build(store))


async def _build(store: FileStore) -> None:
    # The children that crash start now: they load the MCP SDK and connect while this
    # process builds the other runs, then wait for their turn. Two die inside crm-access's
    # writes; one inside access-audit's third model call.
    children = [_CrashChild(store.root, "crm-access", t) for t in ("create_ticket", "send_email")]
    children.append(_CrashChild(store.root, "access-audit", KILL_AUDIT))
    try:
        async with demo_agent(store.root, pace=0, in_process=True) as agent:
            await _build_runs(store, Config(agent.config, agent.gate, store), children)
    finally:
        for child in children:
            child.kill()


async def _build_runs(store: FileStore, config: Config, children: list[_CrashChild]) -> None:

    def start(run_id: str) -> list[Message]:
        return [Message("user", RUNS[run_id])]

    async def until_pending(run_id: str) -> list[str]:
        outcome = await run(config, run_id, start(run_id), owner=BUILDER)
        assert outcome.status == Status.AWAITING_APPROVAL, outcome
        return [p.marker for p in outcome.pending]

    for marker in await until_pending("billing-access"):
        send_signal(store, "billing-access", "approve", {"marker": marker}, by="demo")
    await run(config, "billing-access", None, owner=BUILDER)

    for marker in await until_pending("admin-rights"):
        send_signal(
            store,
            "admin-rights",
            "deny",
            {"marker": marker},
            by="demo",
            reason="production admin rights need a change request",
        )
    await run(config, "admin-rights", None, owner=BUILDER)

    await until_pending("laptop-broken")
    await until_pending("shared-drive")

    for marker in await until_pending("crm-access"):
        send_signal(store, "crm-access", "approve", {"marker": marker}, by="demo")
    await asyncio.to_thread(children[0].crash)  # inside create_ticket
    # An idempotent write left unfinished is not the human's problem: the run is ready.
    if view_store(store, "crm-access").status != "ready":
        raise StoreError("demo: crm-access should be ready after the crash in create_ticket")
    await asyncio.to_thread(children[1].crash)  # inside send_email

    submit(store, "vpn-access", start("vpn-access"))
    for _ in range(3):  # a worker's whole budget, so the demo's worker leaves it failed
        try:
            await run(config, "vpn-access", None, owner=BUILDER)
        except ConnectionError as e:
            note_failure(store, "vpn-access", e)

    submit(store, "password-reset", start("password-reset"))
    submit(store, "access-audit", start("access-audit"))
    # A worker killed partway: the demo's worker resumes it and replays what has results.
    await asyncio.to_thread(children[2].crash)  # inside the audit's third model call

    for run_id in ("crm-access", "vpn-access", "access-audit"):
        status = view_store(store, run_id).status
        if status not in ("indeterminate", "failed", "ready"):
            raise StoreError(f"demo: run {run_id} ended {status}; the demo store is incomplete")


class _CrashChild:
    """A child process that resumes ``run_id`` and SIGKILLs itself inside ``tool`` (or inside
    the audit's model call, for ``KILL_AUDIT``). It starts at once (loading what it needs) and
    resumes the run only when :meth:`crash` says so."""

    def __init__(self, root: Path, run_id: str, tool: str) -> None:
        self.tool = tool
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "durableagent.demo", "--crash-run", str(root), run_id, tool],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

    def crash(self) -> None:
        try:
            _, err = self.proc.communicate("go\n", timeout=60)
        except subprocess.TimeoutExpired:
            self.kill()
            raise StoreError(f"demo: the child meant to die inside {self.tool} hung") from None
        if self.proc.returncode != -signal.SIGKILL:
            raise StoreError(
                f"demo: the child meant to die inside {self.tool} exited "
                f"{self.proc.returncode}: {err.strip()[-500:]}"
            )

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.communicate()


def _crash_child(root: Path, run_id: str, tool: str) -> None:
    async def crash() -> None:
        async with demo_agent(root, pace=0, crash_in=tool, in_process=True) as agent:
            if not await asyncio.to_thread(sys.stdin.readline):  # the builder says when
                return  # it went away: nothing to do
            store = FileStore(root)
            await run(Config(agent.config, agent.gate, store), run_id, None, owner="demo-child")

    asyncio.run(crash())


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--crash-run":
        _crash_child(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        print("usage: python -m durableagent.demo --crash-run STORE RUN TOOL", file=sys.stderr)
        sys.exit(2)

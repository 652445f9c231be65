"""The demo store: runs in every state, some made by really killing child processes."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import signal
import subprocess
import sys
from pathlib import Path

from ..budget import Budget
from ..errors import StoreError
from ..loop import AgentConfig
from ..messages import Message
from ..outcome import Status
from ..run import Config, run, submit
from ..signals import signal as send_signal
from ..stores import Store, open_store
from ..view import view_store
from ..worker import DEFAULT_MAX_ATTEMPTS, note_failure
from .agent import demo_agent
from .script import (
    BUILDER,
    KILL_AUDIT,
)
from .tickets import SERVICE_DOWN, demo_dir

log = logging.getLogger("durableagent.demo")


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
    "report-export": "Export every ticket I filed this year into one report.",
    "printer-jam": "The office printer on floor 3 jams on every page.",
}
# report-export may make one model call: it stops over budget before its second.
REPORT_BUDGET = Budget(model_calls=1)
# printer-jam's ticket waits for an approval that lapses: then a worker denies it.
PRINTER_WITHIN = "15m"


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
    store = open_store(root)
    folder = demo_dir(root)
    folder.mkdir()
    (folder / "README").write_text(
        "The demo helpdesk's ticket system: tickets.json and outbox.json.\n"
        f"While {SERVICE_DOWN} exists, policy lookups about the VPN fail.\n"
    )
    for name in ("tickets", "outbox"):
        (folder / f"{name}.json").write_text("[]\n")
    (folder / SERVICE_DOWN).write_text("delete this file to bring the policy service back\n")
    asyncio.run(_build(store, root))


async def _build(store: Store, root: Path) -> None:
    # The children that crash start now: they load the MCP SDK and connect while this
    # process builds the other runs, then wait for their turn. Two die inside crm-access's
    # writes; one inside access-audit's third model call.
    children = [_CrashChild(root, "crm-access", t) for t in ("create_ticket", "send_email")]
    children.append(_CrashChild(root, "access-audit", KILL_AUDIT))
    try:
        async with demo_agent(root, pace=0, in_process=True) as agent:
            await _build_runs(store, Config(agent.config, agent.gate, store), children)
    finally:
        for child in children:
            child.kill()


async def _build_runs(store: Store, config: Config, children: list[_CrashChild]) -> None:

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

    submit(store, "report-export", start("report-export"), budget=REPORT_BUDGET)
    over = await run(config, "report-export", None, owner=BUILDER)
    assert over.status == Status.OVER_BUDGET, over

    assert isinstance(config.agent, AgentConfig)  # the demo's own agent
    lapsing = dataclasses.replace(config.agent, approve_within=PRINTER_WITHIN)
    waits = await run(
        dataclasses.replace(config, agent=lapsing),
        "printer-jam",
        start("printer-jam"),
        owner=BUILDER,
    )
    assert waits.status == Status.AWAITING_APPROVAL and waits.pending[0].deadline_at, waits

    submit(store, "vpn-access", start("vpn-access"))
    # A worker's whole budget, so the demo's worker leaves it failed; the count says the
    # workers gave up (exhausted), as a worker's own last failure says it, so the demo's
    # notifier tells of it.
    for _ in range(DEFAULT_MAX_ATTEMPTS):
        try:
            await run(config, "vpn-access", None, owner=BUILDER)
        except ConnectionError as e:
            note_failure(store, "vpn-access", e, max_attempts=DEFAULT_MAX_ATTEMPTS)

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


def crash_child(root: Path, run_id: str, tool: str) -> None:
    async def crash() -> None:
        async with demo_agent(root, pace=0, crash_in=tool, in_process=True) as agent:
            if not await asyncio.to_thread(sys.stdin.readline):  # the builder says when
                return  # it went away: nothing to do
            store = open_store(root)
            await run(Config(agent.config, agent.gate, store), run_id, None, owner="demo-child")

    asyncio.run(crash())

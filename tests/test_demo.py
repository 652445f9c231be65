"""agentrun demo: the demo store, its helpdesk agent, and the demo's worker behind the TUI."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest

from durableagent import (
    Attempt,
    FileStore,
    Reconcile,
    RunStatus,
    idempotency_key,
    signal,
    view_store,
)
from durableagent.demo import SERVICE_DOWN, build_demo_store, demo_agent, demo_dir, read_list
from durableagent.errors import StoreError
from durableagent.worker import Worker, reset_attempts

EVERY_STATUS = {"completed", "awaiting_approval", "indeterminate", "ready", "failed"}


def agentrun(
    *args: str, cwd: Path, pythonpath: Path | None = None
) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("AGENTRUN_STORE", None)
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(pythonpath), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=120,
    )


def statuses(root: Path, cwd: Path) -> dict[str, dict[str, Any]]:
    p = agentrun("ls", "--json", "--store", str(root), cwd=cwd)
    assert p.returncode == 0, p.stderr
    return {v["run_id"]: v for v in map(json.loads, p.stdout.splitlines())}


def test_demo_no_tui_in_a_fresh_directory_produces_every_status(tmp_path: Path) -> None:
    p = agentrun("demo", "--no-tui", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    root = tmp_path / "agentrun-demo"  # the documented default
    runs = statuses(root, tmp_path)
    assert {v["status"] for v in runs.values()} >= EVERY_STATUS
    assert runs["laptop-broken"]["status"] == "awaiting_approval"
    assert len(runs["laptop-broken"]["pending"]) == 2  # two calls of one turn
    # The crash in the idempotent create_ticket resumed on its own; the one in send_email
    # (not idempotent) waits for a human.
    assert runs["crm-access"]["indeterminate"]["tool"] == "send_email"
    assert runs["vpn-access"]["status"] == "failed"
    assert {runs[r]["status"] for r in ("password-reset", "access-audit")} == {"ready"}
    # One run stopped at its budget (one model call), one waits for an approval that lapses.
    over = runs["report-export"]
    assert over["status"] == "over_budget" and over["budget"] == {"model_calls": 1}
    assert over["spent"]["model_calls"] == 1
    (lapsing,) = runs["printer-jam"]["pending"]
    assert lapsing["deadline_at"] == pytest.approx(time.time() + 15 * 60, abs=120)
    assert "crm-access" in p.stdout and "STATUS" in p.stdout  # it printed ls
    # The killed writes really happened: one ticket (filed twice, deduplicated), one mail.
    crm = [t for t in read_list(root, "tickets") if "CRM" in t["summary"]]
    assert len(crm) == 1 and crm[0]["key"].startswith("crm-access:")
    assert [m["subject"] for m in read_list(root, "outbox")] == ["Helpdesk request"]


def test_the_demo_shows_an_idempotent_write_resume_and_another_write_wait(tmp_path: Path) -> None:
    root = tmp_path / "d"
    build_demo_store(root)
    view = view_store(FileStore(root), "crm-access")
    steps = {s.name: s for s in view.steps}
    ticket, mail = steps["tool/2/0/create_ticket"], steps["tool/2/1/send_email"]
    assert (ticket.idempotent, ticket.attempts, ticket.completed) == (True, 2, True)
    assert (mail.idempotent, mail.attempts, mail.completed) == (False, 1, False)
    assert view.indeterminate is not None and view.indeterminate.name == mail.name
    assert "outbox.json" in mail.hint and "tickets.json" in ticket.hint
    p = agentrun("show", "crm-access", "--store", str(root), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "check      look in " in p.stdout and "outbox.json" in p.stdout
    assert "idempotent write started" in p.stdout


def test_demo_reuses_its_store_and_rebuilds_it_only_when_asked(tmp_path: Path) -> None:
    root = tmp_path / "d"
    assert agentrun("demo", "--no-tui", "--store", str(root), cwd=tmp_path).returncode == 0
    (root / "marker").write_text("kept")
    again = agentrun("demo", "--no-tui", "--store", str(root), cwd=tmp_path)
    assert again.returncode == 0 and "reusing the demo store" in again.stdout
    assert (root / "marker").exists()
    fresh = agentrun("demo", "--no-tui", "--fresh", "--store", str(root), cwd=tmp_path)
    assert fresh.returncode == 0 and "building" in fresh.stdout
    assert not (root / "marker").exists()


def test_demo_never_touches_a_directory_that_is_not_a_demo_store(tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "precious.jsonl").write_text("")
    for extra in ([], ["--fresh"]):
        p = agentrun("demo", "--no-tui", "--store", str(mine), *extra, cwd=tmp_path)
        assert p.returncode == 1 and "not a demo store" in p.stderr and "Traceback" not in p.stderr
    assert (mine / "precious.jsonl").exists()
    with pytest.raises(StoreError, match="not empty"):
        build_demo_store(mine)


async def test_the_demo_story_with_a_worker(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    await asyncio.to_thread(build_demo_store, root)
    store = FileStore(root)
    worker = Worker(demo_agent(root, pace=0.02), store, rescan=0.5, backoff=0.05)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))

    async def until(run_id: str, want: RunStatus) -> None:
        deadline = time.monotonic() + 15
        while (got := view_store(store, run_id).status) != want:
            assert time.monotonic() < deadline, f"{run_id} stayed {got}, wanted {want}"
            await asyncio.sleep(0.02)

    async def attempt_ended(run_id: str) -> Attempt:
        deadline = time.monotonic() + 15
        while (last := store.attempts(run_id)[-1]).ended is None:
            assert time.monotonic() < deadline, f"{run_id}'s attempt {last.number} never ended"
            await asyncio.sleep(0.02)
        return last

    try:
        # The slow run was killed partway by the demo; the worker resumes it from the journal.
        [killed] = store.attempts("access-audit")
        assert (killed.owner, killed.ended) == ("demo-child", "lost")
        await until("access-audit", RunStatus.COMPLETED)
        audit = store.load("access-audit")
        llm3 = [r.type for r in audit if r.step == "llm/3"]
        assert llm3 == ["step.started", "step.started", "step.completed"]  # cut off, re-run
        # The attempt's end is logged when its lease is released, just after the run's last
        # record: a reader can see the run completed a moment before its attempt says so.
        resumed = await attempt_ended("access-audit")
        assert resumed.ended == "completed"
        # Its first record is the re-run: the four steps with results were replayed, not re-run.
        first = audit[resumed.first_seq - 1]
        assert (first.type, first.step) == ("step.started", "llm/3")
        await until("password-reset", RunStatus.AWAITING_APPROVAL)
        assert view_store(store, "vpn-access").status == RunStatus.FAILED  # budget used up

        # The on-call human finds the mail the killed process queued by the step's key (the
        # reconcile dialog shows it), and says so.
        started = store.load("crm-access")[0]
        key = idempotency_key("crm-access", "tool/2/1/send_email", started)
        (mail,) = [m for m in read_list(root, "outbox") if m["key"] == key]
        signal(
            store,
            "crm-access",
            "reconcile",
            Reconcile("tool/2/1/send_email", "done", mail["id"]),
        )
        await until("crm-access", RunStatus.COMPLETED)
        answer = view_store(store, "crm-access").answer
        ticket = next(t for t in read_list(root, "tickets") if "CRM" in t["summary"])
        assert answer is not None and answer.content.startswith(f"Filed {ticket['id']} for you")
        assert mail["id"] in answer.content

        for p in view_store(store, "laptop-broken").pending:
            signal(store, "laptop-broken", "approve", {"marker": p.marker}, by="test")
        await until("laptop-broken", RunStatus.COMPLETED)
        assert [m["to"] for m in read_list(root, "outbox")] == ["manager@example.com"] * 2

        # More budget lets the over-budget run go on: it files its ticket, once approved.
        signal(store, "report-export", "budget", {"add": {"model_calls": 2}}, by="t", reason="ok")
        await until("report-export", RunStatus.AWAITING_APPROVAL)

        (demo_dir(root) / SERVICE_DOWN).unlink()
        reset_attempts(FileStore(root), "vpn-access")  # what `agentrun retry vpn-access` does
        await until("vpn-access", RunStatus.AWAITING_APPROVAL)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 10)
    # billing, crm (filed once though two killed processes ran it), laptop: no ticket twice.
    assert len(read_list(root, "tickets")) == 3


FAKE_TUI = """
import json, time
from pathlib import Path
from durableagent import FileStore, view_store

def run_tui(store, *, read_only=False, poll=False, hints=None):
    seen = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        audit = store.load("access-audit")
        if view_store(store, "password-reset").status == "awaiting_approval" and len(audit) > 2:
            break
        time.sleep(0.05)
    root = store.root
    report = {"root": str(root), "read_only": read_only, "poll": poll,
              "reset": str(view_store(store, "password-reset").status),
              "audit_records": len(store.load("access-audit")), "hints": hints}
    (Path(root).parent / "tui-report.json").write_text(json.dumps(report))
    return 0
"""


def test_demo_runs_a_live_worker_behind_the_tui_and_stops_it(tmp_path: Path) -> None:
    fake = tmp_path / "fake"
    (fake / "durableagent_tui").mkdir(parents=True)
    (fake / "durableagent_tui" / "__init__.py").write_text(FAKE_TUI)
    root = tmp_path / "d"
    p = agentrun("demo", "--store", str(root), cwd=tmp_path, pythonpath=fake)
    assert p.returncode == 0, p.stderr
    report = json.loads((tmp_path / "tui-report.json").read_text())
    assert report["reset"] == "awaiting_approval"  # the worker ran it while the "TUI" was open
    assert report["audit_records"] > 2 and report["read_only"] is False
    # The reconcile dialog can say where to check: the demo tools' hints reach the TUI.
    assert sorted(report["hints"]) == ["create_ticket", "send_email"]
    assert "outbox.json" in report["hints"]["send_email"]
    # The worker stopped with the TUI: nothing holds a lease, the slow run is not broken.
    store = FileStore(root)
    assert not any(store.is_leased(r) for r in store.run_ids())
    assert view_store(store, "access-audit").status in (RunStatus.READY, RunStatus.COMPLETED)


def test_tui_command_passes_its_flags_and_explains_a_missing_ui(tmp_path: Path) -> None:
    root = tmp_path / "s"
    FileStore(root)
    fake = tmp_path / "fake"
    (fake / "durableagent_tui").mkdir(parents=True)
    (fake / "durableagent_tui" / "__init__.py").write_text(
        "import json\n"
        "def run_tui(store, *, read_only=False, poll=False):\n"
        "    print(json.dumps([store.description, read_only, poll]))\n"
        "    return 0\n"
    )
    p = agentrun(
        "tui", "--store", str(root), "--read-only", "--poll", cwd=tmp_path, pythonpath=fake
    )
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == [str(root), True, True]

    (fake / "durableagent_tui" / "__init__.py").write_text("")
    p = agentrun("tui", "--store", str(root), cwd=tmp_path, pythonpath=fake)
    assert p.returncode == 1 and "terminal UI is not available" in p.stderr


def test_the_ui_registers_tui_and_web_as_agentrun_commands() -> None:
    """The CLI finds the UI through the entry points it registers (pyproject.toml), never by
    its module's name."""
    import durableagent_tui
    import durableagent_tui.web

    found = {ep.name: ep for ep in entry_points(group="agentrun.commands")}
    assert {name: ep.value for name, ep in found.items()} == {
        "tui": "durableagent_tui:run_tui",
        "web": "durableagent_tui.web:serve",
    }
    assert found["tui"].load() is durableagent_tui.run_tui
    assert found["web"].load() is durableagent_tui.web.serve


FAKE_UI = """
import json
def tui(store, *, read_only=False, poll=False):
    print(json.dumps(["tui", store.description, read_only, poll]))
    return 0
def web(spec, **options):
    print(json.dumps(["web", spec, options]))
    return 0
"""


def test_agentrun_tui_and_web_reach_whatever_package_registers_them(tmp_path: Path) -> None:
    """Another installed package registering ``tui`` and ``web`` under agentrun.commands
    (found first on the path) is what the commands run: nothing names the UI's module."""
    root = tmp_path / "s"
    FileStore(root)
    fake = tmp_path / "fake"
    info = fake / "agentrun_fake_ui-0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: agentrun-fake-ui\nVersion: 0\n")
    (info / "entry_points.txt").write_text(
        "[agentrun.commands]\ntui = agentrun_fake_ui:tui\nweb = agentrun_fake_ui:web\n"
    )
    (fake / "agentrun_fake_ui.py").write_text(FAKE_UI)
    p = agentrun("tui", "--store", str(root), "--poll", cwd=tmp_path, pythonpath=fake)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout) == ["tui", str(root), False, True]
    p = agentrun(
        "web", "--store", str(root), "--port", "0", "--allow-host", "h", "--read-only",
        cwd=tmp_path, pythonpath=fake,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    options = {"host": "127.0.0.1", "port": 0, "read_only": True, "poll": False}
    assert json.loads(p.stdout) == ["web", str(root.resolve()), {**options, "allow_hosts": ["h"]}]

    (fake / "agentrun_fake_ui.py").write_text("")  # registered, but not there
    p = agentrun("tui", "--store", str(root), cwd=tmp_path, pythonpath=fake)
    assert p.returncode == 1 and "terminal UI is not available" in p.stderr
    assert "Traceback" not in p.stderr
    p = agentrun("web", "--store", str(root), cwd=tmp_path, pythonpath=fake)
    assert p.returncode == 1 and "pip install 'durableagent[web]'" in p.stderr
    assert "Traceback" not in p.stderr


async def test_the_demo_agent_on_a_postgresql_store_keeps_its_tickets_beside_it_not_in_a_url_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``agentrun worker --agent durableagent.demo:demo_agent --store postgresql://...`` (the
    README's several hosts): the ticket system goes to ./agentrun-demo-tickets, and nothing
    is made at a path named after the URL."""
    from durableagent import ToolContext
    from durableagent.tools import reset_context, set_context

    monkeypatch.chdir(tmp_path)
    url = "postgresql://agents@db.internal:5432/agents?schema=helpdesk"
    async with demo_agent(url, pace=0, in_process=True) as agent:
        (create,) = [t for t in agent.config.tools if t.name == "create_ticket"]
        token = set_context(ToolContext("a1", "tool/2/0/create_ticket", 1, "a1:k:t"))
        try:
            result = await create.call({"summary": "billing", "requester": "alex"})
        finally:
            reset_context(token)
    assert result.content == "TICKET-1"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["agentrun-demo-tickets"]
    assert read_list(tmp_path / "agentrun-demo-tickets", "tickets")[0]["id"] == "TICKET-1"

"""agentrun, run for real in subprocesses against temporary stores."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent.demo import read_list

TESTS = Path(__file__).parent


@dataclass
class Ran:
    code: int
    out: str
    err: str


def agentrun(*args: str, cwd: Path | None = None, **env: str) -> Ran:
    full_env = dict(os.environ)
    full_env.pop("AGENTRUN_STORE", None)
    full_env["PYTHONPATH"] = os.pathsep.join(
        filter(None, [str(TESTS), os.environ.get("PYTHONPATH")])
    )
    full_env.update(env)
    p = subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=60,
    )
    return Ran(p.returncode, p.stdout, p.stderr)


def refused(r: Ran, *words: str) -> None:
    """Exit 1 with one line on stderr naming the problem, and no traceback."""
    assert r.code == 1, (r.code, r.out, r.err)
    assert "Traceback" not in r.err
    assert len(r.err.strip().splitlines()) == 1, r.err
    for w in words:
        assert w in r.err, (w, r.err)


def usage(r: Ran, *words: str) -> None:
    assert r.code == 2, (r.code, r.out, r.err)
    assert "Traceback" not in r.err and "usage:" in r.err
    for w in words:
        assert w in r.err, (w, r.err)


def ls_json(root: Path, *extra: str) -> list[dict[str, Any]]:
    r = agentrun("ls", "--json", "--store", str(root), *extra)
    assert r.code == 0, r.err
    return [json.loads(line) for line in r.out.splitlines()]


def pending(root: Path, run_id: str) -> list[str]:
    return [p.marker for p in view_store(FileStore(root), run_id).pending]


def signals(root: Path, run_id: str) -> list[dict[str, Any]]:
    return [r.data for r in FileStore(root).load(run_id) if r.type == "signal"]


# -- reading --------------------------------------------------------------------------------


def test_ls_lists_needs_attention_first_with_glyph_and_word(demo: Path) -> None:
    r = agentrun("ls", "--store", str(demo))
    assert r.code == 0, r.err
    rows = r.out.splitlines()
    assert rows[0].split()[:3] == ["STATUS", "RUN", "STEPS"]
    order = [row.split()[2] for row in rows[1:]]
    words = [row.split()[1] for row in rows[1:]]
    assert words == sorted(
        words,
        key=[
            "corrupt",
            "indeterminate",
            "over_budget",
            "awaiting_approval",
            "paused",
            "failed",
            "running",
            "ready",
            "completed",
            "cancelled",
        ].index,
    )
    assert order[0] == "crm-access"
    assert "✖ indeterminate" in rows[1] and "reconcile tool/2/1/send_email" in rows[1]
    assert any("✓ completed" in row and "billing-access" in row for row in rows)


def test_ls_json_prints_one_object_per_run_and_filters_by_status(demo: Path) -> None:
    views = ls_json(demo)
    assert {v["run_id"] for v in views} == {
        "billing-access",
        "admin-rights",
        "laptop-broken",
        "shared-drive",
        "crm-access",
        "vpn-access",
        "password-reset",
        "access-audit",
        "report-export",
        "printer-jam",
    }
    laptop = next(v for v in views if v["run_id"] == "laptop-broken")
    assert laptop["status"] == "awaiting_approval" and len(laptop["pending"]) == 2
    only = ls_json(demo, "--status", "ready")
    assert sorted(v["run_id"] for v in only) == ["access-audit", "password-reset"]


def test_store_defaults_to_agentrun_store_then_runs(demo: Path, tmp_path: Path) -> None:
    r = agentrun("ls", AGENTRUN_STORE=str(demo))
    assert r.code == 0 and "crm-access" in r.out
    shutil.copytree(demo, tmp_path / "cwd" / "runs")
    r = agentrun("ls", cwd=tmp_path / "cwd")
    assert r.code == 0 and "crm-access" in r.out


def test_show_prints_pending_markers_with_arguments(demo: Path) -> None:
    r = agentrun("show", "laptop-broken", "--store", str(demo))
    assert r.code == 0, r.err
    for marker in pending(demo, "laptop-broken"):
        assert f"marker     {marker}" in r.out
    assert '"to": "manager@example.com"' in r.out
    assert "step.completed llm/2" in r.out and "asks create_ticket(" in r.out


def test_show_prints_the_indeterminate_call_and_how_to_reconcile(demo: Path) -> None:
    r = agentrun("show", "crm-access", "--store", str(demo))
    assert r.code == 0, r.err
    assert "write step tool/2/1/send_email started and never recorded a result" in r.out
    assert '"subject": "Helpdesk request"' in r.out
    assert "agentrun reconcile crm-access tool/2/1/send_email --done RESULT" in r.out


def test_show_json_is_the_run_view(demo: Path) -> None:
    r = agentrun("show", "vpn-access", "--json", "--store", str(demo))
    assert r.code == 0, r.err
    view = json.loads(r.out)
    assert view["status"] == "failed" and "policy service unreachable" in view["error"]
    assert view["records"][0]["type"] == "run.started"
    assert view["outcome"]["status"] == "failed"


def test_journal_text_is_never_interpreted_by_the_terminal(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    submit(store, "evil", [Message("user", "hi \x1b[2J\x1b]0;owned\x07 [/oops]")])
    r = agentrun("show", "evil", "--store", str(store.root))
    assert r.code == 0, r.err
    assert "\x1b" not in r.out and "\x07" not in r.out
    assert "\\x1b[2J" in r.out and "[/oops]" in r.out
    assert "\x1b" not in agentrun("show", "evil", "--json", "--store", str(store.root)).out


# -- signalling -----------------------------------------------------------------------------


def test_approve_all_approves_every_pending_call_once(demo: Path) -> None:
    markers = pending(demo, "laptop-broken")
    r = agentrun("approve", "laptop-broken", "--all", "--store", str(demo), "--by", "ana")
    assert r.code == 0, r.err
    assert [s["payload"]["marker"] for s in signals(demo, "laptop-broken")] == markers
    assert {s["by"] for s in signals(demo, "laptop-broken")} == {"ana"}
    assert view_store(FileStore(demo), "laptop-broken").status == RunStatus.READY
    refused(
        agentrun("approve", "laptop-broken", markers[0], "--store", str(demo)), "already approved"
    )
    refused(
        agentrun("approve", "laptop-broken", "--all", "--store", str(demo)),
        "no pending approvals",
    )


def test_deny_records_who_and_why(demo: Path) -> None:
    (marker,) = pending(demo, "shared-drive")
    r = agentrun("deny", "shared-drive", marker, "--store", str(demo), "--reason", "not your team")
    assert r.code == 0, r.err
    (sig,) = signals(demo, "shared-drive")
    assert sig["name"] == "deny" and sig["reason"] == "not your team" and sig["by"]


def test_reconcile_done_records_the_result_the_human_found(demo: Path) -> None:
    mail = read_list(demo, "outbox")[-1]["id"]
    step = "tool/2/1/send_email"
    r = agentrun("reconcile", "crm-access", step, "--done", mail, "--store", str(demo))
    assert r.code == 0, r.err
    *approvals, sig = signals(demo, "crm-access")
    assert [a["name"] for a in approvals] == ["approve", "approve"]
    assert sig["payload"] == {"step": step, "outcome": "done", "result": mail}
    refused(
        agentrun("reconcile", "crm-access", step, "--retry", "--store", str(demo)),
        "already reconciled",
    )


def test_submit_creates_the_store_and_is_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "new"
    r = agentrun("submit", "r1", "reset my password", "--store", str(root))
    assert r.code == 0 and "submitted r1" in r.out
    r = agentrun("submit", "r1", "reset my password", "--store", str(root))
    assert r.code == 0 and "already submitted" in r.out
    refused(agentrun("submit", "r1", "something else", "--store", str(root)), "different input")
    (only,) = ls_json(root)
    assert only["status"] == "ready"
    assert len(FileStore(root).load("r1")) == 1


# -- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["ls"],
        ["show", "r"],
        ["approve", "r", "m#1"],
        ["deny", "r", "m#1"],
        ["reconcile", "r", "tool/1/0/x", "--retry"],
        ["retry", "r"],
        ["tui"],
    ],
)
def test_read_and_signal_commands_refuse_a_missing_store(
    command: list[str], tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    refused(agentrun(*command, "--store", str(missing)), "no store at")
    assert not missing.exists()


def tree(root: Path) -> dict[str, bytes | None]:
    """Every entry under ``root``, with a file's bytes (None for a folder)."""
    return {
        str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None)
        for p in sorted(root.rglob("*"))
    }


READ_ONLY = [
    ["ls"],
    ["ls", "--json"],
    ["show", "r"],
    ["plan", "r"],
    ["audit"],
    ["workers"],
    ["tui", "--read-only"],
    ["web", "--read-only"],
]


@pytest.mark.parametrize("command", READ_ONLY, ids=" ".join)
@pytest.mark.parametrize("holding", ["nothing", "other files"])
def test_read_commands_never_write_into_a_directory_that_is_not_a_store(
    command: list[str], holding: str, tmp_path: Path
) -> None:
    """``agentrun --store /etc ls`` once made /etc/.summaries: a reader writes nothing into
    a directory that is not already a store, and says so."""
    plain = tmp_path / "plain"
    plain.mkdir()
    if holding != "nothing":
        (plain / "notes.txt").write_text("mine\n")
        (plain / "data.json").write_text("{}")
        (plain / "sub").mkdir()
    before, mtime = tree(plain), plain.stat().st_mtime_ns
    refused(agentrun("--store", str(plain), *command), f"no store at {plain}")
    assert tree(plain) == before
    assert plain.stat().st_mtime_ns == mtime


def test_a_new_store_made_by_a_writer_is_a_store_before_its_first_run(tmp_path: Path) -> None:
    """A worker's (or the library's) new store holds no run yet: readers still see a store."""
    root = tmp_path / "fresh"
    FileStore(root).close()
    r = agentrun("ls", "--store", str(root))
    assert r.code == 0 and f"no runs in {root}" in r.out
    plain = tmp_path / "plain"  # an existing empty directory made a store by submit
    plain.mkdir()
    assert agentrun("submit", "r1", "hi", "--store", str(plain)).code == 0
    assert [run["run_id"] for run in ls_json(plain)] == ["r1"]


def test_bad_run_ids_and_unknown_runs_are_refused(demo: Path) -> None:
    refused(agentrun("show", "../etc", "--store", str(demo)), "invalid run id")
    refused(agentrun("submit", "a b", "hi", "--store", str(demo)), "invalid run id")
    refused(agentrun("show", "nope", "--store", str(demo)), "no run 'nope'")
    refused(agentrun("approve", "nope", "m#1", "--store", str(demo)), "no run 'nope'")
    refused(agentrun("approve", "nope", "--all", "--store", str(demo)), "no run 'nope'")
    refused(agentrun("retry", "nope", "--store", str(demo)), "no run 'nope'")


def test_wrong_markers_steps_and_states_are_refused(demo: Path) -> None:
    s = str(demo)
    refused(
        agentrun("approve", "shared-drive", "tool/2/0/create_ticket#000000000000", "--store", s),
        "no tool call with marker",
    )
    usage(agentrun("approve", "shared-drive", "nohash", "--store", s), "is not a marker")
    refused(
        agentrun("deny", "billing-access", "tool/2/0/create_ticket#0", "--store", s), "completed"
    )
    refused(
        agentrun("reconcile", "shared-drive", "tool/9/0/x", "--retry", "--store", s),
        "never started",
    )
    refused(
        agentrun("reconcile", "shared-drive", "tool/1/0/lookup_policy", "--retry", "--store", s),
        "already has a result",
    )
    refused(agentrun("retry", "shared-drive", "--store", s), "not failed")
    usage(agentrun("submit", "x", "   ", "--store", s), "empty")


def test_a_corrupt_journal_is_listed_and_refused(demo: Path) -> None:
    path = demo / "shared-drive.jsonl"
    text = path.read_text().splitlines(keepends=True)
    text[1] = text[1].replace("llm/1", "llm/X")
    path.write_text("".join(text))
    rows = ls_json(demo)
    assert rows[0]["run_id"] == "shared-drive" and rows[0]["status"] == "corrupt"
    refused(agentrun("show", "shared-drive", "--store", str(demo)), "corrupt at line 2")
    refused(agentrun("approve", "shared-drive", "--all", "--store", str(demo)), "corrupt")


def test_usage_errors_exit_2(demo: Path) -> None:
    s = str(demo)
    usage(agentrun())
    usage(agentrun("frobnicate"))
    usage(agentrun("show"))
    usage(agentrun("approve", "r", "--store", s), "MARKER or --all")
    usage(agentrun("approve", "r", "m#1", "--all", "--store", s), "MARKER or --all")
    usage(agentrun("reconcile", "r", "step", "--store", s), "--done")
    usage(agentrun("reconcile", "r", "step", "--done", "x", "--retry", "--store", s))
    usage(agentrun("ls", "--status", "sleepy", "--store", s))
    usage(agentrun("worker", "--agent", "no-colon", "--store", s), "MODULE:ATTR")
    usage(agentrun("worker", "--agent", "_child_agents:gated", "--concurrency", "0", "--store", s))


def test_worker_refuses_an_agent_it_cannot_load(tmp_path: Path) -> None:
    s = str(tmp_path / "s")
    refused(agentrun("worker", "--agent", "no_such_module:x", "--store", s), "cannot import")
    refused(agentrun("worker", "--agent", "_child_agents:nothing", "--store", s), "no attribute")
    refused(
        agentrun("worker", "--agent", "_child_agents:SLOW", "--store", s),
        "not a durableagent.Agent",
    )


def test_python_dash_m_and_the_console_script_agree(demo: Path) -> None:
    script = Path(sys.executable).parent / "agentrun"
    p = subprocess.run(
        [str(script), "ls", "--json", "--store", str(demo)], capture_output=True, text=True
    )
    assert p.returncode == 0
    assert p.stdout == agentrun("ls", "--json", "--store", str(demo)).out


def test_a_leased_run_shows_as_running_with_its_holder(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "s")
    submit(store, "busy", [Message("user", "hi")])
    with store.lease("busy"):
        (row,) = ls_json(store.root)
        r = agentrun("show", "busy", "--store", str(store.root))
    assert row["status"] == "running"
    assert f"a worker holds its lease (pid {os.getpid()}" in r.out

"""Many runs at once (SPEC §10): ``ls --where`` and the bulk forms of cancel, pause, resume,
retry, approve and deny. They show what they will do, ask once, apply each run's signal on its
own and report applied / refused per run; a bad query, a query matching nothing and a dry run
write nothing at all."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from durableagent import FileStore, RunStatus, signal, view_store
from durableagent.bulk import ACTIONS, apply_action, plan_action, replan, select_runs
from durableagent.cli.bulk import ask
from durableagent.cli.common import Refused
from durableagent.cli.main import main
from durableagent.query import parse_query


def journals(root: Path) -> dict[str, bytes]:
    """Every journal of the store, byte for byte (and the workers' failure counts)."""
    files = [*root.glob("*.jsonl"), *(root / ".worker").glob("*")]
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(files)}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's usage errors
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def one_line(err: str) -> str:
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


class Tty(io.StringIO):
    """What a human types at a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize(
    "argv",
    [
        ["ls", "--where", "colour:red"],
        ["ls", "--json", "--where", "colour:red"],
        ["cancel", "--where", "colour:red", "--reason", "r", "--yes"],
        ["approve", "--where", "colour:red", "--yes"],
        ["retry", "--where", "colour:red", "--yes"],
    ],
)
def test_a_bad_query_is_one_line_naming_the_fields_exit_2_and_writes_nothing(
    argv: list[str], demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = journals(demo)
    code, out, err = run(capsys, *argv, "--store", str(demo))
    assert code == 2
    line = one_line(err)
    assert "unknown field 'colour'" in line
    for field in ("status", "needs", "tool", "run", "owner", "age"):
        assert field in line
    assert out == ""
    assert journals(demo) == before


BULK_FORMS = [
    ["cancel", "--reason", "r"],
    ["pause", "--reason", "r"],
    ["resume"],
    ["retry"],
    ["approve"],
    ["deny"],
]


@pytest.mark.parametrize("where", ["", " ", "\t \n"])
@pytest.mark.parametrize("argv", BULK_FORMS, ids=lambda a: a[0])
@pytest.mark.parametrize("how", ["--dry-run", "--yes"])
def test_an_empty_or_blank_query_is_refused_by_every_bulk_action_and_writes_nothing(
    argv: list[str], where: str, how: str, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An unset shell variable (``--where "$Q"``) must not select, let alone act on, every
    run of the store: exit 2, one line that says how to mean every run."""
    before = journals(demo)
    code, out, err = run(capsys, *argv, "--where", where, how, "--store", str(demo))
    assert code == 2
    line = one_line(err)
    assert "empty query" in line and "run:*" in line
    assert out == ""
    assert journals(demo) == before


def test_run_star_is_the_explicit_way_to_select_every_run(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "cancel", "--where", "run:*", "--reason", "r", "--dry-run", "--store", str(demo)
    )
    assert code == 0
    assert f"will cancel {len(FileStore(demo).summaries())} run(s) matching 'run:*'" in out


def test_the_core_refuses_an_empty_query_too(demo: Path) -> None:
    from durableagent.query import QueryError

    with pytest.raises(QueryError, match=r"run:\*"):
        select_runs(FileStore(demo), parse_query("  "))


def test_ls_where_lists_only_what_the_query_selects(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(
        capsys, "ls", "--json", "--where", "needs:human -status:failed", "--store", str(demo)
    )
    assert code == 0
    listed = {json.loads(line)["run_id"] for line in out.splitlines()}
    assert listed == {"crm-access", "shared-drive", "laptop-broken", "printer-jam", "report-export"}
    code, out, _ = run(capsys, "ls", "--where", "run:nomatch-*", "--store", str(demo))
    assert code == 0 and "matching 'run:nomatch-*'" in out


def test_a_query_matching_nothing_is_one_line_exit_1_and_writes_nothing(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = journals(demo)
    for argv in (
        ["cancel", "--where", "run:nomatch-*", "--reason", "r", "--yes"],
        ["deny", "--where", "status:paused", "--yes"],
        ["retry", "--where", "status:cancelled", "--yes"],
    ):
        code, _, err = run(capsys, *argv, "--store", str(demo))
        assert code == 1
        assert "matches" in one_line(err) and "nothing was written" in err
    assert journals(demo) == before


def test_a_dry_run_prints_what_it_would_do_to_which_runs_and_writes_nothing(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = journals(demo)
    code, out, _ = run(
        capsys, "pause", "--where", "run:*-access", "--reason", "outage", "--dry-run",
        "--store", str(demo),
    )  # fmt: skip
    assert code == 0
    assert "will pause 3 run(s) matching 'run:*-access'" in out
    for rid in ("billing-access", "crm-access", "vpn-access"):
        assert f"  {rid}  (" in out
    assert "dry run: nothing was written" in out
    assert journals(demo) == before


def test_each_run_is_applied_on_its_own_and_a_refused_one_is_reported_exit_1(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = journals(demo)
    code, out, _ = run(
        capsys, "pause", "--where", "run:*-access", "--reason", "outage", "--yes", "--by", "ana",
        "--store", str(demo),
    )  # fmt: skip
    assert code == 1
    assert "applied  paused crm-access" in out
    assert "applied  paused vpn-access" in out
    refused = [line for line in out.splitlines() if line.startswith("refused")]
    assert len(refused) == 1 and "billing-access" in refused[0] and "completed" in refused[0]
    assert out.rstrip().endswith("2 applied, 1 refused")
    after = journals(demo)
    assert after["billing-access.jsonl"] == before["billing-access.jsonl"]  # completed: refused
    store = FileStore(demo)
    for rid in ("crm-access", "vpn-access"):
        halt = view_store(store, rid).halt
        assert halt is not None and halt.name == "pause" and halt.by == "ana"


def test_without_a_terminal_and_without_yes_it_refuses_and_writes_nothing(
    demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))  # piped: not a human at a terminal
    before = journals(demo)
    code, out, err = run(capsys, "resume", "--where", "run:*", "--store", str(demo))
    assert code == 1
    assert "--yes" in one_line(err) and "nothing was written" in err
    assert "will resume 10 run(s)" in out  # it said what it would have done
    assert journals(demo) == before


@pytest.mark.parametrize(
    "typed, goes_on", [("y\n", True), ("yes\n", True), ("n\n", False), ("\n", False)]
)
def test_a_terminal_is_asked_once_and_only_y_goes_on(typed: str, goes_on: bool) -> None:
    out = io.StringIO()
    if goes_on:
        ask("cancel 3 run(s)? [y/N] ", Tty(typed), out)
    else:
        with pytest.raises(Refused, match="not confirmed; nothing was written"):
            ask("cancel 3 run(s)? [y/N] ", Tty(typed), out)
    assert out.getvalue() == "cancel 3 run(s)? [y/N] "


def test_a_yes_at_the_terminal_applies_and_a_no_writes_nothing(
    demo: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    before = journals(demo)
    monkeypatch.setattr("sys.stdin", Tty("n\n"))
    code, _, err = run(
        capsys, "cancel", "--where", "status:failed", "--reason", "x", "--store", str(demo)
    )
    assert code == 1 and "not confirmed" in err
    assert journals(demo) == before
    monkeypatch.setattr("sys.stdin", Tty("y\n"))
    code, out, _ = run(
        capsys, "cancel", "--where", "status:failed", "--reason", "x", "--store", str(demo)
    )
    assert code == 0, out
    assert "cancel 1 run(s)? [y/N] " in out and "1 applied, 0 refused" in out
    assert view_store(FileStore(demo), "vpn-access").status == RunStatus.CANCELLED


def test_approve_by_query_decides_the_pending_calls_of_the_query_s_tools_only(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FileStore(demo)
    tools = {p.tool for p in view_store(store, "laptop-broken").pending}
    assert tools == {"create_ticket", "send_email"}
    code, out, _ = run(
        capsys,
        "approve",
        "--where",
        "status:awaiting tool:send_email",
        "--yes",
        "--store",
        str(demo),
    )
    assert code == 0, out
    assert "(1 pending call(s))" in out and "laptop-broken  (awaiting_approval)  send_email" in out
    assert [p.tool for p in view_store(store, "laptop-broken").pending] == ["create_ticket"]
    # -tool: every pending call but that tool's; a run with none of them is refused.
    code, out, _ = run(
        capsys, "deny", "--where", "status:awaiting -tool:send_email", "--yes", "--store", str(demo)
    )
    assert code == 0, out
    assert view_store(store, "shared-drive").pending == ()
    assert view_store(store, "laptop-broken").pending == ()


def test_a_bulk_retry_does_what_agentrun_retry_does(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    store = FileStore(demo)
    assert store.read_failures("vpn-access") is not None
    code, out, _ = run(capsys, "retry", "--where", "needs:human", "--yes", "--store", str(demo))
    assert code == 1  # crm-access, shared-drive and laptop-broken are not failed
    assert "applied  vpn-access will be retried" in out
    assert "refused  run crm-access is indeterminate, not failed: nothing to retry" in out
    assert store.read_failures("vpn-access") is None


def test_a_bulk_retry_records_who_retried_and_why_and_the_audit_shows_it(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``retry --where`` once only cleared the failure count: no signal, so ``by`` and
    ``reason`` were lost and the audit could not say who retried. It is agentrun retry's."""
    store = FileStore(demo)
    before = journals(demo)
    code, out, _ = run(
        capsys, "retry", "--where", "status:failed", "--by", "ana", "--reason", "vpn fixed",
        "--yes", "--store", str(demo),
    )  # fmt: skip
    assert code == 0, out
    assert "applied  vpn-access will be retried" in out
    last = store.load("vpn-access")[-1]
    assert last.type == "signal"
    said = (last.data["name"], last.data["by"], last.data["reason"])
    assert said == ("retry", "ana", "vpn fixed")
    assert store.read_failures("vpn-access") is None
    after = journals(demo)
    changed = {name for name in after if after[name] != before.get(name)}
    assert {n for n in changed if n.endswith(".jsonl")} == {"vpn-access.jsonl"}
    code, out, _ = run(capsys, "audit", "--run", "vpn-access", "--json", "--store", str(demo))
    assert code == 0
    (retried,) = [d for d in map(json.loads, out.splitlines()) if d["decision"] == "retried"]
    assert (retried["by"], retried["reason"]) == ("ana", "vpn fixed")


@pytest.mark.parametrize(
    "argv, says",
    [
        (["cancel", "vpn-access", "--where", "status:failed", "--reason", "r"], "not both"),
        (["cancel", "--reason", "r"], "a RUN or --where"),
        (["approve", "laptop-broken", "--yes"], "go with --where"),
        (["approve", "--where", "status:awaiting", "--all"], "no MARKER or --all"),
        (["cancel", "--where", "status:failed", "--yes"], "needs --reason"),
    ],
)
def test_a_run_and_a_query_together_or_neither_is_a_usage_error(
    argv: list[str], says: str, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = journals(demo)
    code, _, err = run(capsys, *argv, "--store", str(demo))
    assert code == 2 and says in err and "usage:" in err
    assert journals(demo) == before


def test_the_single_run_forms_are_unchanged(demo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "pause", "vpn-access", "--reason", "hold", "--store", str(demo))
    assert code == 0 and out.startswith("paused vpn-access")
    code, out, _ = run(capsys, "resume", "vpn-access", "--store", str(demo))
    assert code == 0 and out.startswith("resumed vpn-access")


def test_owner_selects_the_runs_whose_lease_that_worker_holds(demo: Path) -> None:
    store = FileStore(demo)
    with store.lease("access-audit", owner="host-a:7"):
        held = [s.run_id for s in select_runs(store, parse_query("owner:host-a*"))]
        others = select_runs(store, parse_query("-owner:host-a*"))
    assert held == ["access-audit"]
    assert "access-audit" not in {s.run_id for s in others} and len(others) == 9


def test_the_library_reports_applied_and_refused_per_run(demo: Path) -> None:
    store = FileStore(demo)
    runs = select_runs(store, parse_query("run:*-access"))
    targets = plan_action(ACTIONS["cancel"], runs)
    done = apply_action(store, ACTIONS["cancel"], targets, by="ana", reason="outage")
    assert {d.run_id: d.applied for d in done} == {
        "billing-access": False,
        "crm-access": True,
        "vpn-access": True,
    }
    (refused,) = [d for d in done if not d.applied]
    assert "completed" in refused.message


def test_at_a_real_terminal_it_asks_once_and_y_goes_on(demo: Path) -> None:
    """The question through a pseudo-terminal, as a human at a shell sees it."""
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "AGENTRUN_STORE"}
    argv = ["cancel", "--where", "status:failed", "--reason", "stuck", "--store", str(demo)]
    p = subprocess.Popen(
        [sys.executable, "-m", "durableagent.cli", *argv],
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    os.close(slave)
    try:
        os.write(master, b"y\n")
        out, err = p.communicate(timeout=60)
    finally:
        os.close(master)
    assert p.returncode == 0, (out, err)
    assert "will cancel 1 run(s) matching 'status:failed':" in out
    assert out.count("[y/N]") == 1 and "1 applied, 0 refused" in out
    assert view_store(FileStore(demo), "vpn-access").status == RunStatus.CANCELLED


def test_after_a_slow_yes_only_the_calls_shown_are_decided(demo: Path) -> None:
    """The runs are planned again after the question: a run that no longer matches is
    refused, and a call that became pending meanwhile is not approved unseen."""
    store = FileStore(demo)
    query = parse_query("status:awaiting")
    action = ACTIONS["approve"]
    shown = plan_action(action, select_runs(store, query), query)
    (laptop,) = [t for t in shown if t.run_id == "laptop-broken"]
    only_one = replace(laptop, signals=laptop.signals[:1], calls=laptop.calls[:1])
    shown = [only_one if t is laptop else t for t in shown]
    marker = view_store(store, "shared-drive").pending[0].marker
    signal(store, "shared-drive", "deny", {"marker": marker}, by="bo")  # decided meanwhile
    again = {t.run_id: t for t in replan(store, action, shown, query)}
    assert again["laptop-broken"].calls == laptop.calls[:1]
    assert "no longer matches" in again["shared-drive"].note


def test_status_paused_selects_every_run_whose_pause_is_in_force(
    demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A pause over runs that need a human leaves them showing awaiting_approval,
    indeterminate, over_budget (``· then held: paused``): ``ls --status paused``, a
    ``status:paused`` query and ``resume --where status:paused`` select every one of them."""
    where = "needs:human -status:failed"
    held = {s.run_id for s in parse_query(where).select(FileStore(demo).summaries())}
    assert len(held) >= 3
    code, out, _ = run(
        capsys, "pause", "--where", where, "--reason", "r", "--yes", "--store", str(demo)
    )
    assert code == 0 and f"{len(held)} applied" in out
    assert {s.status for s in FileStore(demo).summaries() if s.run_id in held} != {"paused"}

    code, out, _ = run(capsys, "ls", "--json", "--status", "paused", "--store", str(demo))
    assert code == 0
    assert {json.loads(line)["run_id"] for line in out.splitlines()} == held
    code, out, _ = run(capsys, "ls", "--json", "--where", "status:paused", "--store", str(demo))
    assert {json.loads(line)["run_id"] for line in out.splitlines()} == held
    code, out, _ = run(capsys, "ls", "--json", "--where", "-status:paused", "--store", str(demo))
    assert not {json.loads(line)["run_id"] for line in out.splitlines()} & held

    code, out, _ = run(capsys, "resume", "--where", "status:paused", "--yes", "--store", str(demo))
    assert code == 0 and f"{len(held)} applied, 0 refused" in out
    assert parse_query("status:paused").select(FileStore(demo).summaries()) == []
    code, out, _ = run(capsys, "ls", "--json", "--status", "paused", "--store", str(demo))
    assert out == ""


def store_files(root: Path) -> dict[str, bytes]:
    """Every file under the store but its listing's cache (.summaries), byte for byte."""
    files = [p for p in sorted(root.rglob("*")) if p.is_file() and ".summaries" not in p.parts]
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


# A query selecting runs each action would change in the demo (resume: the one paused here).
CHANGING = {
    "cancel": ["--where", "run:*-access", "--reason", "r"],
    "pause": ["--where", "run:*-access", "--reason", "r"],
    "resume": ["--where", "run:crm-access"],
    "retry": ["--where", "status:failed"],
    "approve": ["--where", "needs:human"],
    "deny": ["--where", "needs:human"],
}


@pytest.mark.parametrize("action", sorted(ACTIONS))
def test_dry_run_with_yes_writes_nothing_for_every_action(
    action: str, demo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--yes says do not ask; --dry-run still wins: the plan is printed, nothing written."""
    assert set(CHANGING) == set(ACTIONS)
    store = FileStore(demo)
    signal(store, "crm-access", "pause", {}, by="ana", reason="so that resume has one")
    before = store_files(demo)
    code, out, _ = run(
        capsys, action, *CHANGING[action], "--dry-run", "--yes", "--by", "ana",
        "--store", str(demo),
    )  # fmt: skip
    assert code == 0, out
    assert f"will {ACTIONS[action].verb} " in out and "dry run: nothing was written" in out
    assert "applied" not in out
    assert store_files(demo) == before

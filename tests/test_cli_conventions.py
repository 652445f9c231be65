"""The command-line conventions a kubectl or temporal user reaches for, run for real in
subprocesses: --version, --store on either side of the command, the TUI's status words,
an unknown run named before anything else, each command's own usage, and versioned JSON."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
from test_cli import agentrun, refused, usage

ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")
JSON_DOC = Path(__file__).resolve().parent.parent / "docs" / "json.md"


def json_lines(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def test_version_prints_the_installed_version() -> None:
    r = agentrun("--version")
    assert r.code == 0 and r.out == f"agentrun {version('durableagent')}\n"


def test_store_goes_before_or_after_the_command_and_after_wins(demo: Path, tmp_path: Path) -> None:
    nowhere = str(tmp_path / "nowhere")
    before = agentrun("--store", str(demo), "ls", "--json")
    after = agentrun("ls", "--json", "--store", str(demo))
    assert before.code == after.code == 0 and before.out == after.out and before.out
    assert agentrun("--store", nowhere, "ls", "--json", "--store", str(demo)).out == before.out
    refused(agentrun("--store", str(demo), "ls", "--store", nowhere), "no store at")
    r = agentrun("--store", str(demo), "show", "crm-access", AGENTRUN_STORE=nowhere)
    assert r.code == 0 and "crm-access" in r.out
    r = agentrun("--store", str(demo), "approve", "laptop-broken", "--all", "--by", "ana")
    assert r.code == 0 and r.out.count("approved") == 2


def test_ls_status_takes_the_words_the_tui_shows(demo: Path) -> None:
    from durableagent_tui.styles import LOOKS

    for status, look in LOOKS.items():
        r = agentrun("ls", "--json", "--status", look.word, "--store", str(demo))
        assert r.code == 0, (look.word, r.err)
        assert {v["status"] for v in json_lines(r.out)} <= {str(status)}
    short = agentrun("ls", "--json", "--status", "awaiting", "--store", str(demo)).out
    long = agentrun("ls", "--json", "--status", "awaiting_approval", "--store", str(demo)).out
    assert short == long and len(json_lines(short)) == 3
    assert agentrun("ls", "--json", "--status", "AWAITING", "--store", str(demo)).out == short
    usage(agentrun("ls", "--status", "sleepy", "--store", str(demo)), "awaiting_approval")


@pytest.mark.parametrize(
    "command",
    [
        ["approve", "nosuch", "BADMARKER"],
        ["approve", "nosuch", "--all"],
        ["deny", "nosuch", "BADMARKER"],
        ["reconcile", "nosuch", "not-a-step", "--done", "  "],
        ["reconcile", "nosuch", "tool/1/0/x", "--retry"],
        ["show", "nosuch"],
        ["show", "nosuch", "--json"],
        ["retry", "nosuch"],
    ],
)
def test_an_unknown_run_is_reported_before_any_other_complaint(
    command: list[str], demo: Path
) -> None:
    refused(agentrun(*command, "--store", str(demo)), "no run 'nosuch'")


def test_complaints_about_a_known_run_still_name_the_problem(demo: Path) -> None:
    usage(agentrun("approve", "laptop-broken", "BADMARKER", "--store", str(demo)), "marker")
    usage(
        agentrun(
            "reconcile", "crm-access", "tool/2/0/create_ticket", "--done", " ", "--store", str(demo)
        ),
        "needs the result",
    )
    unknown = "tool/1/0/create_ticket#000000000000"  # a marker's shape, no call's marker
    refused(agentrun("approve", "laptop-broken", unknown, "--store", str(demo)), "no tool call")


def test_usage_errors_print_the_commands_own_usage(demo: Path) -> None:
    s = str(demo)
    for args in (
        ["worker", "--agent", "no-colon", "--store", s],
        ["worker", "--agent", "_child_agents:gated", "--concurrency", "0", "--store", s],
        ["worker", "--store", s],
    ):
        r = agentrun(*args)
        usage(r)
        assert r.err.startswith("usage: agentrun worker "), r.err
    r = agentrun("approve", "laptop-broken", "--store", s)
    usage(r, "MARKER or --all")
    assert r.err.startswith("usage: agentrun approve ")


def test_every_json_object_carries_a_schema_version_and_iso_times(demo: Path) -> None:
    rows = json_lines(agentrun("ls", "--json", "--store", str(demo)).out)
    assert len(rows) == 10
    for row in rows:
        assert next(iter(row)) == "v" and row["v"] == 1
        for key in ("started_at", "last_activity"):
            assert row[f"{key}_iso"] == iso(row[key]), (key, row)
    (show,) = json_lines(agentrun("show", "crm-access", "--json", "--store", str(demo)).out)
    assert show["v"] == 1
    assert all(r["at_iso"] == iso(r["at"]) for r in show["records"])
    for step in show["step_views"]:
        assert step["started_at_iso"] == iso(step["started_at"])
        assert step["completed_at_iso"] == iso(step["completed_at"])
    indeterminate = show["indeterminate"]
    assert indeterminate["started_at_iso"] == iso(indeterminate["started_at"])
    assert ISO.fullmatch(show["started_at_iso"])


def iso(at: float | None) -> str | None:
    return None if at is None else datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_json_keeps_the_fields_it_had(demo: Path) -> None:
    (row,) = json_lines(
        agentrun("ls", "--json", "--status", "indeterminate", "--store", str(demo)).out
    )
    assert {
        "run_id",
        "status",
        "needs_human",
        "waiting_on",
        "steps",
        "model_calls",
        "started_at",
        "last_activity",
        "last_seq",
        "error",
        "pending",
        "indeterminate",
        "answer",
        "leased",
    } <= set(row)


def test_the_readme_lists_every_json_field(demo: Path) -> None:
    """docs/json.md names each field that --json prints."""
    section = JSON_DOC.read_text()
    documented = set(re.findall(r"`([a-z_]+)`", section))
    (show,) = json_lines(agentrun("show", "crm-access", "--json", "--store", str(demo)).out)
    fields = set(show) | set(show["indeterminate"]) | set(show["step_views"][0])
    fields |= set(show["records"][0]) | set(show["outcome"])
    (awaiting,) = json_lines(agentrun("show", "shared-drive", "--json", "--store", str(demo)).out)
    fields |= set(awaiting["pending"][0])
    assert fields - documented == set()

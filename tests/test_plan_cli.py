"""agentrun plan RUN [--json]: the recovery plan on the demo store, run for real."""

from __future__ import annotations

import json
import re
from pathlib import Path

from test_cli import agentrun, refused

JSON_DOC = Path(__file__).resolve().parent.parent / "docs" / "json.md"


def test_plan_of_an_indeterminate_run_names_the_blocked_write(demo: Path) -> None:
    r = agentrun("plan", "crm-access", "--store", str(demo))
    assert r.code == 0, r.err
    lines = r.out.splitlines()
    assert "next     it stops at tool/2/1/send_email: an open write nobody reconciled" in r.out
    assert re.search(r"^  replay +llm/1 +has a result", r.out, re.M)
    # The idempotent write that ran again after a kill has its result: replayed.
    assert re.search(r"^  replay +tool/2/0/create_ticket +has a result", r.out, re.M)
    [stop] = [line for line in lines if line.startswith("→")]
    assert re.match(r"→ blocked +tool/2/1/send_email +a write started at seq \d+", stop)
    assert "agentrun reconcile crm-access tool/2/1/send_email --done RESULT" in r.out


def test_plan_of_a_run_awaiting_approval_stops_at_its_turn(demo: Path) -> None:
    r = agentrun("plan", "laptop-broken", "--store", str(demo))
    assert r.code == 0, r.err
    assert "waiting for a human to approve or deny create_ticket, send_email" in r.out
    assert len(re.findall(r"waiting +tool/2/\d/", r.out)) == 2


def test_plan_json_is_versioned_and_says_each_steps_action(demo: Path) -> None:
    r = agentrun("plan", "vpn-access", "--json", "--store", str(demo))
    assert r.code == 0, r.err
    d = json.loads(r.out)
    assert d["v"] == 1 and d["run_id"] == "vpn-access" and d["status"] == "failed"
    assert d["ending"] == "continues" and d["stops_at"] is None
    assert [(s["step"], s["action"]) for s in d["steps"]] == [
        ("llm/1", "replay"),
        ("tool/1/0/lookup_policy", "re-run"),
        ("llm/2", "run"),
    ]


def test_plan_refuses_an_unknown_run(demo: Path) -> None:
    refused(agentrun("plan", "nope", "--store", str(demo)), "no run 'nope'")


def test_the_readme_lists_every_plan_json_field(demo: Path) -> None:
    section = JSON_DOC.read_text()
    documented = set(re.findall(r"`([a-z_]+)`", section))
    d = json.loads(agentrun("plan", "crm-access", "--json", "--store", str(demo)).out)
    fields = set(d) | set(d["steps"][0])
    assert fields - documented == set()

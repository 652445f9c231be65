"""The audit of human decisions: every signal with who, when, which call, why and what became
of it, from the library and from ``agentrun audit``."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_cli import agentrun, refused, usage

from durableagent import FileStore, Message, Reconcile, Record, Status, fork, run, signal, submit
from durableagent.audit import audit, decisions
from durableagent.cli.operations import since_arg
from helpdesk import INPUT, Side, helpdesk


async def awaiting(store: FileStore, side: Side, run_id: str) -> str:
    """A helpdesk run waiting for the approval of create_ticket: its marker."""
    config, _ = helpdesk(store, side)
    out = await run(config, run_id, INPUT)
    assert out.status == Status.AWAITING_APPROVAL
    return out.pending[0].marker


async def test_each_decision_says_what_became_of_it(store: FileStore, side: Side) -> None:
    config, _ = helpdesk(store, side)
    marker = await awaiting(store, side, "a1")
    signal(store, "a1", "approve", {"marker": marker}, by="ana", reason="looks right")
    (approved,) = decisions(store.load("a1"), "a1")
    assert (approved.decision, approved.effect) == ("approved", "pending")
    assert approved.by == "ana" and approved.reason == "looks right"
    assert approved.step == "tool/2/0/create_ticket" and approved.tool == "create_ticket"
    assert approved.marker == marker and approved.digest == marker.rpartition("#")[2]

    await run(config, "a1", None)
    (approved,) = decisions(store.load("a1"), "a1")
    assert approved.effect == "applied" and approved.note.startswith("the call ran (seq")

    marker = await awaiting(store, side, "b1")
    signal(store, "b1", "approve", {"marker": marker}, by="ana")
    signal(store, "b1", "deny", {"marker": marker}, by="bo", reason="not for contractors")
    await run(config, "b1", None)
    approved, denied = decisions(store.load("b1"), "b1")
    assert approved.effect == "overridden" and "denied by bo" in approved.note
    assert (denied.decision, denied.effect, denied.reason) == (
        "denied",
        "applied",
        "not for contractors",
    )


async def test_reconciles_are_audited_with_the_writes_marker(store: FileStore, side: Side) -> None:
    config, _ = helpdesk(store, side)
    marker = await awaiting(store, side, "a1")
    signal(store, "a1", "approve", {"marker": marker})
    step = "tool/2/0/create_ticket"
    store.append("a1", Record.make("step.started", step, "tool", {"write": True}))
    signal(store, "a1", "reconcile", Reconcile(step, "done", "TICKET-9"), by="cy", reason="seen")
    *_, done = decisions(store.load("a1"), "a1")
    assert (done.decision, done.effect, done.result) == ("reconciled_done", "pending", "TICKET-9")
    assert done.marker == marker and done.by == "cy"
    await run(config, "a1", None)
    *_, done = decisions(store.load("a1"), "a1")
    assert done.effect == "applied" and "recorded as the write's result" in done.note

    marker = await awaiting(store, side, "b1")
    signal(store, "b1", "approve", {"marker": marker})
    store.append("b1", Record.make("step.started", step, "tool", {"write": True}))
    signal(store, "b1", "reconcile", Reconcile(step, "retry"))
    await run(config, "b1", None)
    *_, retry = decisions(store.load("b1"), "b1")
    assert (retry.decision, retry.effect) == ("reconciled_retry", "applied")


async def test_a_reconcile_retry_is_pending_until_the_write_runs_again(
    store: FileStore, side: Side
) -> None:
    config, _ = helpdesk(store, side)
    marker = await awaiting(store, side, "a1")
    signal(store, "a1", "approve", {"marker": marker})
    step = "tool/2/0/create_ticket"
    store.append("a1", Record.make("step.started", step, "tool", {"write": True}))
    signal(store, "a1", "reconcile", Reconcile(step, "retry"), by="cy", reason="not filed")
    *_, retry = decisions(store.load("a1"), "a1")
    assert (retry.decision, retry.effect, retry.by) == ("reconciled_retry", "pending", "cy")
    assert retry.note == "the write runs again when the run resumes"
    await run(config, "a1", None)
    *_, retry = decisions(store.load("a1"), "a1")
    assert retry.effect == "applied" and retry.note.startswith("the write ran again (seq")
    assert len(side.tickets()) == 1


async def test_a_forks_copied_decisions_name_where_they_were_made(
    store: FileStore, side: Side
) -> None:
    marker = await awaiting(store, side, "a1")
    signal(store, "a1", "approve", {"marker": marker}, by="ana")
    fork(store, "a1", "a2", at_step="tool/2/0/create_ticket")
    (copy,) = decisions(store.load("a2"), "a2")
    assert copy.copied_from == "a1" and copy.by == "ana" and copy.marker == marker
    assert decisions(store.load("a1"), "a1")[0].copied_from is None


class Counting:
    """A store that counts which journals were read whole."""

    def __init__(self, store: FileStore) -> None:
        self.store = store
        self.loaded: list[str] = []

    def load(self, run_id: str) -> list[Record]:
        self.loaded.append(run_id)
        return self.store.load(run_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


async def test_audit_reads_only_the_journals_that_hold_signals(
    store: FileStore, side: Side
) -> None:
    for i in range(20):
        submit(store, f"quiet{i:02}", INPUT)
    marker = await awaiting(store, side, "a1")
    signal(store, "a1", "deny", {"marker": marker}, by="bo")
    await awaiting(store, side, "b1")  # asked, nobody decided yet

    counting = Counting(store)
    found = audit(counting)  # type: ignore[arg-type]
    assert [d.run_id for d in found.decisions] == ["a1"] and counting.loaded == ["a1"]
    counting.loaded.clear()
    assert audit(counting, run_id="b1").decisions == ()  # type: ignore[arg-type]
    assert counting.loaded == ["b1"]


async def test_audit_is_oldest_first_and_filters_by_time_and_author(
    store: FileStore, side: Side
) -> None:
    for run_id, who in (("a1", "ana"), ("b1", "bo"), ("c1", "ana")):
        marker = await awaiting(store, side, run_id)
        signal(store, run_id, "approve", {"marker": marker}, by=who)
    found = audit(store).decisions
    assert [d.run_id for d in found] == ["a1", "b1", "c1"]
    assert [d.run_id for d in audit(store, by="ana").decisions] == ["a1", "c1"]
    assert [d.run_id for d in audit(store, since=found[1].at).decisions] == ["b1", "c1"]
    assert audit(store, since=time.time() + 60).decisions == ()


def test_since_takes_iso_times_and_times_ago() -> None:
    now = 1_800_000_000.0
    assert since_arg("2h", now) == now - 7200
    assert since_arg("30m", now) == now - 1800
    assert since_arg("1d", now) == now - 86400 and since_arg("1w", now) == now - 7 * 86400
    assert since_arg("2026-11-30T09:00:00Z") == 1796029200.0
    assert since_arg("2026-11-30T10:00:00+01:00") == 1796029200.0
    with pytest.raises(Exception, match="not a time"):
        since_arg("yesterday")


# -- agentrun audit -------------------------------------------------------------------------


@pytest.fixture
async def decided(tmp_path: Path, side: Side) -> Path:
    root = tmp_path / "runs"
    store = FileStore(root)
    marker = await awaiting(store, side, "a1")
    signal(store, "a1", "approve", {"marker": marker}, by="ana", reason="ok \x1b[31mred")
    marker = await awaiting(store, side, "b1")
    signal(store, "b1", "deny", {"marker": marker}, by="bo", reason="use the portal")
    return root


def test_agentrun_audit_prints_a_table_oldest_first(decided: Path) -> None:
    r = agentrun("audit", "--store", str(decided))
    assert r.code == 0, r.err
    head, first, second = r.out.splitlines()
    assert head.split() == [
        "TIME", "BY", "RUN", "STEP", "DIGEST", "DECISION", "EFFECT", "REASON", "NOTE",
    ]  # fmt: skip
    assert "ana" in first and "a1" in first and "approved" in first and "pending" in first
    assert "\x1b" not in r.out and "ok \\x1b[31mred" in first  # journal text escaped
    assert "bo" in second and "denied" in second and "use the portal" in second
    r = agentrun("audit", "--by", "bo", "--store", str(decided))
    assert len(r.out.splitlines()) == 2 and "b1" in r.out
    r = agentrun("audit", "--since", "1h", "--run", "a1", "--store", str(decided))
    assert len(r.out.splitlines()) == 2 and "a1" in r.out
    r = agentrun("audit", "--since", "2099-01-01", "--store", str(decided))
    assert r.code == 0 and r.out.startswith("no decisions in") and "that match" in r.out


def test_agentrun_audit_json_lines_follow_the_documented_schema(decided: Path) -> None:
    r = agentrun("audit", "--json", "--store", str(decided))
    rows = [json.loads(line) for line in r.out.splitlines()]
    assert [row["run_id"] for row in rows] == ["a1", "b1"]
    fields = [
        "v", "at", "at_iso", "by", "run_id", "seq", "step", "tool", "marker", "digest",
        "decision", "effect", "note", "reason", "result", "copied_from",
    ]  # fmt: skip
    for row in rows:
        assert list(row) == fields and row["v"] == 1
    assert rows[0]["reason"] == "ok \x1b[31mred" and "\\u001b" in r.out.splitlines()[0]
    assert (rows[1]["decision"], rows[1]["tool"], rows[1]["by"]) == (
        "denied",
        "create_ticket",
        "bo",
    )
    section = (Path(__file__).resolve().parent.parent / "docs" / "json.md").read_text()
    for field in fields:
        assert f"`{field}`" in section, field


def test_agentrun_audit_refuses_an_unknown_run_first_and_bad_times(decided: Path) -> None:
    refused(agentrun("audit", "--run", "nosuch", "--store", str(decided)), "no run 'nosuch'")
    usage(agentrun("audit", "--since", "soon", "--store", str(decided)), "not a time")


def test_agentrun_audit_lists_the_rest_and_fails_when_a_journal_does_not_load(
    decided: Path,
) -> None:
    with open(decided / "b1.jsonl", "ab") as f:
        f.write(b'{"not": "a record"}\n{"seq": 99}\n')
    r = agentrun("audit", "--store", str(decided))
    assert r.code == 1 and "a1" in r.out and "b1" not in r.out
    assert "run b1 left out" in r.err and "audit is incomplete" in r.err


def test_the_controls_are_audited_with_who_why_and_what_they_did(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    submit(store, "c1", [Message("user", "hi")])
    signal(store, "c1", "pause", {}, by="ana", reason="vendor outage")
    signal(store, "c1", "budget", {"set": {"tokens": 5000}}, by="bo", reason="long doc")
    signal(store, "c1", "resume", {}, by="bo", reason=None)
    signal(store, "c1", "cancel", {}, by="cy", reason="wrong customer")
    got = [(d.decision, d.by, d.reason, d.effect) for d in decisions(store.load("c1"), "c1")]
    assert got == [
        ("paused", "ana", "vendor outage", "applied"),
        ("budget", "bo", "long doc", "applied"),
        ("resumed", "bo", None, "applied"),
        ("cancelled", "cy", "wrong customer", "applied"),
    ]
    notes = [d.note for d in audit(store).decisions]
    assert notes[0].startswith("lifted by a resume (seq ")
    assert notes[1] == "limits set to tokens=5000"
    assert notes[3] == "the run is cancelled: no step starts after it"
    table = agentrun("audit", "--store", str(tmp_path / "runs")).out
    assert "cancelled" in table and "wrong customer" in table and "paused" in table

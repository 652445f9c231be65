"""A deploy never strands a run (issue 25): every run knows the code it was made by, and a
resume checks the run's journal against the agent before it runs anything.

These tests run v1 and v2 of one agent (tests/_deploy_agents.py) in this process through
``run()``; tests/test_deploys_workers.py does the same with real worker processes."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from pathlib import Path

import pytest
from _deploy_agents import TITLE, TITLE_PRIORITY, Scripted, _tools, v1, v2

from durableagent import (
    Agent,
    AgentConfig,
    Config,
    FileStore,
    Message,
    PlanEnding,
    PolicyGate,
    Reconcile,
    RunStatus,
    SignalError,
    Status,
    Tool,
    Worker,
    accept_change,
    code_of,
    made_by,
    marker_for,
    plan,
    run,
    schema_problem,
    signal,
    submit,
    verdict,
    view_store,
)
from durableagent.cli import main


def config(agent: Agent, store: FileStore) -> Config:
    return Config(agent.config, agent.gate, store, agent.code)


def ask(text: str) -> list[Message]:
    return [Message("user", text)]


def side(root: Path, tool: str) -> list[str]:
    p = root / ".side" / f"{tool}.log"
    return p.read_text().splitlines() if p.exists() else []


# -- the fingerprint ----------------------------------------------------------------------


def test_the_fingerprint_names_tools_schemas_model_and_prompt(tmp_path: Path) -> None:
    one, two = v1(tmp_path).code, v2(tmp_path).code
    assert one.version == "v1" and two.version == "v2"
    assert set(one.fingerprint["tools"]) == {"create_ticket", "lookup"}
    assert set(two.fingerprint["tools"]) == {"create_ticket"}
    assert one.fingerprint["tools"]["create_ticket"] != two.fingerprint["tools"]["create_ticket"]
    assert one.fingerprint["model"] == "scripted-1" == two.fingerprint["model"]
    assert one.fingerprint["prompt"] != two.fingerprint["prompt"]
    # Without a label, the version is a short digest of the fingerprint: the same code gives
    # the same version in every process, and another code another one.
    a, b = code_of(v1(tmp_path).config), code_of(v1(tmp_path / "x").config)
    assert a.version == b.version and len(a.version) == 8
    assert code_of(v2(tmp_path).config).version != a.version


async def test_run_started_and_each_outcome_record_the_code(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    out = await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    assert out.status == Status.AWAITING_APPROVAL
    first = store.load("a1")[0].data
    assert first["version"] == "v1"
    assert first["fingerprint"] == v1(tmp_path).code.fingerprint
    assert first["schemas"] == {"create_ticket": TITLE}  # the gated write's schema, kept
    (attempt,) = store.attempts("a1")
    assert attempt.outcome is not None and attempt.outcome.version == "v1"
    assert attempt.outcome.fingerprint == v1(tmp_path).code.fingerprint


# -- the rule -------------------------------------------------------------------------------


def test_arguments_are_checked_against_the_new_schema() -> None:
    assert schema_problem(TITLE_PRIORITY, {"title": "x"}) == "new required argument 'priority'"
    assert schema_problem(TITLE_PRIORITY, {"title": "x", "priority": "high"}) is None
    closed = {**TITLE, "additionalProperties": False}
    assert schema_problem(closed, {"title": "x", "old": 1}) == "argument 'old' is no longer taken"
    typed = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert schema_problem(typed, {"n": "3"}) == "argument 'n' must now be integer, not a string"
    enum = {"type": "object", "properties": {"p": {"enum": ["low", "high"]}}}
    assert "no longer one of" in (schema_problem(enum, {"p": "urgent"}) or "")
    nested = {
        "type": "object",
        "properties": {"who": {"$ref": "#/$defs/person"}},
        "$defs": {"person": {"type": "object", "required": ["email"]}},
    }
    assert schema_problem(nested, {"who": {}}) == "new required argument 'who.email'"


async def test_a_pending_call_whose_schema_gained_a_required_argument_stops_the_run(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    records = store.load("a1")
    last = store.last_outcome("a1")
    assert last is not None
    pending = [p.marker for p in last.pending]
    check = verdict(records, v2(tmp_path).code, v2(tmp_path).gate, pending=pending)
    assert check.kind == "incompatible"
    assert check.why == "create_ticket: new required argument 'priority'"
    (b,) = check.blockers
    assert (
        b.old == TITLE and b.new == TITLE_PRIORITY and b.arguments == {"title": "approval: printer"}
    )

    out = await run(config(v2(tmp_path), store), "a1", None)
    assert out.status == Status.INCOMPATIBLE
    assert out.error == "create_ticket: new required argument 'priority'"
    assert store.load("a1") == records  # stopped before any step: nothing written
    view = view_store(store, "a1")
    assert view.status == RunStatus.INCOMPATIBLE
    assert view.waiting_on == "create_ticket: new required argument 'priority'"
    # Never retried in a loop: the next attempt (nothing changed) finds the same and writes
    # nothing; an approval of the old arguments does not make them valid.
    approve = signal(store, "a1", "approve", {"marker": b.marker}, by="ann")
    out = await run(config(v2(tmp_path), store), "a1", None)
    assert out.status == Status.INCOMPATIBLE and store.load("a1")[-1] == approve
    assert side(tmp_path, "create_ticket") == []


async def test_accept_change_answers_the_call_and_the_model_asks_again(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    await run(config(v2(tmp_path), store), "a1", None)
    with pytest.raises(SignalError, match="needs a reason"):
        accept_change(store, "a1", by="ann")
    accept_change(store, "a1", by="ann", reason="v2 wants a priority")
    assert view_store(store, "a1").status == RunStatus.READY
    out = await run(config(v2(tmp_path), store), "a1", None)
    # The old call was answered, never run; the new call waits for a new approval.
    assert out.status == Status.AWAITING_APPROVAL
    (p,) = out.pending
    assert p.arguments == {"title": "approval: printer", "priority": "high"}
    assert p.step == "tool/2/0/create_ticket"
    refused = [r for r in store.load("a1") if r.step == "tool/1/0/create_ticket"]
    assert "changed since this call was made" in refused[-1].data["content"]
    assert "ann accepted the change (v2 wants a priority)" in refused[-1].data["content"]
    signal(store, "a1", "approve", {"marker": p.marker}, by="ann")
    out = await run(config(v2(tmp_path), store), "a1", None)
    assert out.status == Status.COMPLETED
    assert side(tmp_path, "create_ticket") == [
        "v2 [('priority', 'high'), ('title', 'approval: printer')]"
    ]
    with pytest.raises(SignalError, match="not incompatible"):
        accept_change(store, "a1", by="ann", reason="again")


async def test_completed_steps_whose_tool_or_prompt_changed_replay(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "r1", ask("lookup: the printer"))
    # v1 finished it; a v2 looking at it finds what replays changed.
    check = verdict(store.load("r1"), v2(tmp_path).code, v2(tmp_path).gate)
    assert check.kind == "changed" and check.was == "v1"
    assert check.changed == ("llm/1", "tool/1/0/lookup", "llm/2")


async def test_an_open_write_whose_tool_changed_is_incompatible_until_reconciled_done(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "i1", ask("indeterminate: fail"))
    marker = marker_for("tool/1/0/create_ticket", {"title": "indeterminate: fail"})
    signal(store, "i1", "approve", {"marker": marker}, by="ann")
    with pytest.raises(RuntimeError):
        await run(config(v1(tmp_path), store), "i1", None)
    assert view_store(store, "i1").status == RunStatus.INDETERMINATE
    check = verdict(store.load("i1"), v2(tmp_path).code, v2(tmp_path).gate)
    assert check.why == "create_ticket: new required argument 'priority'"
    signal(store, "i1", "reconcile", Reconcile("tool/1/0/create_ticket", "retry"), by="ann")
    out = await run(config(v2(tmp_path), store), "i1", None)
    assert out.status == Status.INCOMPATIBLE  # never re-run with arguments v2 rejects
    assert side(tmp_path, "create_ticket") == []


async def test_made_by_reads_run_started_then_accept_change(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    made = made_by(store.load("a1"))
    assert made is not None and made.version == "v1"
    await run(config(v2(tmp_path), store), "a1", None)
    accept_change(store, "a1", by="ann", reason="go")
    made = made_by(store.load("a1"))
    assert made is not None and made.version == "v2"


async def test_a_pending_call_whose_tool_is_gone_is_incompatible(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    # v3 has no create_ticket at all (and so its gate asks nobody about it): the call a
    # human was asked about is still one, and nothing can run it.
    v3 = Agent(
        AgentConfig(v2(tmp_path).config.model, [Tool("lookup", parameters={"type": "object"})]),
        PolicyGate(),
        version="v3",
    )
    out = await run(config(v3, store), "a1", None)
    assert out.status == Status.INCOMPATIBLE
    assert out.error == "create_ticket: tool removed"
    (blocked,) = out.blocked
    assert blocked["old"] == TITLE and blocked["new"] is None


async def test_a_completed_call_of_a_changed_tool_replays(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    marker = marker_for("tool/1/0/create_ticket", {"title": "approval: printer"})
    signal(store, "a1", "approve", {"marker": marker}, by="ann")
    await run(config(v1(tmp_path), store), "a1", None)
    check = verdict(store.load("a1"), v2(tmp_path).code, v2(tmp_path).gate)
    assert check.kind == "changed" and check.blockers == ()
    assert "tool/1/0/create_ticket" in check.changed


async def test_accept_change_is_checked_under_the_lock(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    before = store.load("a1")
    stale = {"version": "v2", "calls": [{"marker": "tool/1/0/create_ticket#000000000000"}]}
    with pytest.raises(SignalError, match="no tool call with marker"):
        signal(store, "a1", "accept-change", stale, by="ann", reason="go")
    with pytest.raises(SignalError, match="not incompatible"):
        accept_change(store, "a1", by="ann", reason="go")  # nothing found it incompatible
    assert store.load("a1") == before


async def test_plan_under_a_new_version_says_changed_since_and_incompatible(
    tmp_path: Path,
) -> None:
    store = FileStore(tmp_path / "runs")
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    two = v2(tmp_path)
    # Were it approved by v1's arguments' standards, only the prompt would have changed.
    relaxed = Agent(two.config, PolicyGate(), version="v2")
    done = plan(store.load("a1"), gate=relaxed.gate, code=code_of(v1(tmp_path).config))
    assert {s.changed_since for s in done.steps} == {None}  # the same code: nothing changed
    waiting = plan(store.load("a1"), gate=two.gate, code=code_of(relaxed.config, "v2b"))
    assert {s.step: s.changed_since for s in waiting.steps}["llm/1"] == "v1"
    assert "changed since v1" in next(s.why for s in waiting.steps if s.step == "llm/1")
    waiting = plan(store.load("a1"), gate=two.gate, code=two.code, outcome=store.last_outcome("a1"))
    assert waiting.ending == PlanEnding.INCOMPATIBLE
    assert waiting.stops_at == "tool/1/0/create_ticket"
    assert waiting.why == (
        "stops before any step, incompatible with v2: "
        "create_ticket: new required argument 'priority'"
    )


async def test_the_same_code_never_finds_its_own_calls_incompatible(tmp_path: Path) -> None:
    # v1's model asks create_ticket with arguments v1's own schema rejects: that is no deploy's
    # doing. Approved, the call runs (the tool answers for its arguments, as it always did).
    store = FileStore(tmp_path / "runs")
    one = v1(tmp_path)
    await run(config(one, store), "a1", ask("approval: printer"))
    records = store.load("a1")
    assert records[-1].step == "llm/1"
    bad = dict(records[-1].data)
    bad["tool_calls"] = [{"id": "c1", "name": "create_ticket", "arguments": {"titel": "x"}}]
    check = verdict(
        [*records[:-1], replace(records[-1], data=bad)], one.code, one.gate, made=made_by(records)
    )
    assert check.kind == "resumes cleanly"
    # v2 changed the schema: the same call is then v2's to refuse.
    assert verdict(
        [*records[:-1], replace(records[-1], data=bad)], v2(tmp_path).code, one.gate
    ).blockers


async def test_a_submitted_run_takes_the_version_of_its_first_attempt(tmp_path: Path) -> None:
    store = FileStore(tmp_path / "runs")
    submit(store, "s1", ask("approval: printer"))
    await run(config(v1(tmp_path), store), "s1", None)
    assert "version" not in store.load("s1")[0].data
    made = made_by(store.load("s1"), store.attempts("s1"))
    assert made is not None and made.version == "v1"
    out = await run(config(v2(tmp_path), store), "s1", None)
    assert out.status == Status.INCOMPATIBLE


async def test_a_worker_checks_an_awaiting_run_once_not_in_a_loop(tmp_path: Path) -> None:
    # An agent whose own model leaves out an argument its own schema requires: the pending
    # call looks unrunnable from the summary, the journal says it is no deploy's doing. The
    # worker checks once, and leaves it awaiting its human.
    store = FileStore(tmp_path / "runs")
    odd = Agent(AgentConfig(Scripted(1), _tools(tmp_path, 2)), v1(tmp_path).gate, version="odd")
    await run(config(odd, store), "a1", ask("approval: printer"))
    assert view_store(store, "a1").status == RunStatus.AWAITING_APPROVAL
    worker = Worker(odd, store, rescan=0.2)
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    await asyncio.sleep(3)  # fifteen rescans
    stop.set()
    await asyncio.wait_for(serving, 10)
    assert view_store(store, "a1").status == RunStatus.AWAITING_APPROVAL
    assert len(store.attempts("a1")) <= 2, store.attempts("a1")


async def test_show_and_plan_name_the_ways_out_as_pasteable_commands(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "runs"
    store = FileStore(root)
    await run(config(v1(tmp_path), store), "a1", ask("approval: printer"))
    await run(config(v2(tmp_path), store), "a1", None)
    assert main(["show", "a1", "--store", str(root)]) == 0
    out = capsys.readouterr().out
    assert "create_ticket: new required argument 'priority'" in out
    assert f"accept the change: agentrun accept-change a1 --reason WHY --store {root}" in out
    assert f"agentrun fork a1 --at llm/1 --as NEW --reason WHY --store {root}" in out
    assert f"agentrun cancel a1 --reason WHY --store {root}" in out
    assert main(["show", "a1", "--json", "--store", str(root)]) == 0
    shown = json.loads(capsys.readouterr().out)
    versions = [a["version"] for a in shown["attempts"]]
    assert versions == ["v1", "v2"]
    assert shown["outcome"]["blocked"][0]["reason"] == "new required argument 'priority'"
    assert main(["accept-change", "a1", "--reason", "go", "--by", "ann", "--store", str(root)]) == 0
    assert "answered, never run" in capsys.readouterr().out

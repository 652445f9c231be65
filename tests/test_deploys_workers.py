"""A deploy with real worker processes, on both stores (issue 25).

Runs are started under v1 (tests/_deploy_agents.py) and left awaiting approval, indeterminate
and ready. v2 changes the gated ``create_ticket`` (a new required argument), removes
``lookup`` (already used) and changes the prompt. ``agentrun deploy-check`` says what v2 will
do with each run; a pinned v2 worker leaves them alone; an unpinned one then does exactly
what deploy-check said."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest
from _deploy_agents import v1
from procs import WorkerProcess, child_env, wait_for

from durableagent import (
    Config,
    Message,
    RunStatus,
    Store,
    marker_for,
    open_store,
    run,
    signal,
    submit,
    view_store,
)

pytestmark = pytest.mark.slow


@pytest.fixture(params=["file", "postgres"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "file":
        yield str(tmp_path / "runs")
        return
    with pgserver.fresh_schema() as schema:
        yield pgserver.url(schema)


def agentrun(spec: str, side: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", "--store", spec, *args],
        capture_output=True,
        text=True,
        env=child_env(AGENTRUN_SIDE=str(side)),
        timeout=120,
    )


def status(store: Store, run_id: str) -> RunStatus:
    return view_store(store, run_id).status


def side_lines(side: Path, tool: str) -> list[str]:
    p = side / ".side" / f"{tool}.log"
    return p.read_text().splitlines() if p.exists() else []


async def start_under_v1(store: Store, side: Path) -> None:
    """a1 awaiting approval, i1 indeterminate (its approved write died), r1 ready (its second
    model call was in flight when its attempt was cut off)."""
    agent = v1(side)
    config = Config(agent.config, agent.gate, store, agent.code)
    await run(config, "a1", [Message("user", "approval: printer")])
    await run(config, "i1", [Message("user", "indeterminate: fail")])
    marker = marker_for("tool/1/0/create_ticket", {"title": "indeterminate: fail"})
    signal(store, "i1", "approve", {"marker": marker}, by="ann")
    with pytest.raises(RuntimeError):
        await run(config, "i1", None)
    attempt = asyncio.create_task(run(config, "r1", [Message("user", "lookup: hang")]))
    for _ in range(3000):
        if any(r.step == "llm/2" for r in store.load("r1")):
            break
        await asyncio.sleep(0.01)
    attempt.cancel()
    with pytest.raises(asyncio.CancelledError):
        await attempt
    assert status(store, "a1") == RunStatus.AWAITING_APPROVAL
    assert status(store, "i1") == RunStatus.INDETERMINATE
    assert status(store, "r1") == RunStatus.READY


async def test_deploy_check_predicts_what_a_v2_worker_does(spec: str, tmp_path: Path) -> None:
    side = tmp_path / "side"
    store = open_store(spec)
    await start_under_v1(store, side)

    checked = agentrun(spec, side, "deploy-check", "--agent", "_deploy_agents:v2", "--json")
    assert checked.returncode == 1, checked.stderr  # some run would be incompatible
    report = json.loads(checked.stdout)
    verdicts = {r["run"]: r for r in report["runs"]}
    assert report["version"] == "v2"
    assert {k: v["verdict"] for k, v in verdicts.items()} == {
        "a1": "incompatible",
        "i1": "incompatible",
        "r1": "changed",
    }
    assert verdicts["a1"]["why"] == "create_ticket: new required argument 'priority'"
    assert verdicts["i1"]["why"] == "create_ticket: new required argument 'priority'"
    assert (
        verdicts["r1"]["changed"] == ["llm/1", "tool/1/0/lookup"] and verdicts["r1"]["was"] == "v1"
    )
    assert report["counts"] == {"resumes cleanly": 0, "changed": 1, "incompatible": 2}
    text = agentrun(spec, side, "deploy-check", "--agent", "_deploy_agents:v2")
    assert text.returncode == 1
    assert (
        "3 unfinished run(s) against version v2: 0 resume cleanly, 1 changed, 2 incompatible"
        in text.stdout
    )

    # A pinned v2 worker leaves v1's runs alone and takes a new run.
    submit(store, "n1", [Message("user", "new: mouse")])
    pinned = WorkerProcess(
        spec,
        "_deploy_agents:v2",
        tmp_path / "pinned.log",
        "--pin",
        "--heartbeat",
        "0.5",
        AGENTRUN_SIDE=str(side),
    )
    try:
        wait_for(lambda: status(store, "n1") == RunStatus.AWAITING_APPROVAL, 60, "n1 to wait")

        def listed() -> bool:
            rows = json.loads(agentrun(spec, side, "workers", "--json").stdout)["workers"]
            live = [w for w in rows if w["state"] == "live"]
            return bool(live) and live[0]["waiting"] == {"a1": "v1", "r1": "v1"}

        wait_for(listed, 60, "the pinned worker to list what it leaves")
        shown = agentrun(spec, side, "workers").stdout
        assert "v2 pinned" in shown and "leaves to version v1: a1, r1" in shown
    finally:
        assert pinned.stop() == 0
    assert status(store, "a1") == RunStatus.AWAITING_APPROVAL
    assert status(store, "r1") == RunStatus.READY
    assert status(store, "i1") == RunStatus.INDETERMINATE
    (pending,) = view_store(store, "n1").pending
    assert pending.arguments == {"title": "new: mouse", "priority": "high"}

    # An unpinned v2 worker does what deploy-check said, run by run.
    worker = WorkerProcess(spec, "_deploy_agents:v2", tmp_path / "v2.log", AGENTRUN_SIDE=str(side))
    try:
        wait_for(lambda: status(store, "a1") == RunStatus.INCOMPATIBLE, 60, "a1 incompatible")
        wait_for(lambda: status(store, "r1") == RunStatus.COMPLETED, 60, "r1 to finish")
        view = view_store(store, "a1")
        assert view.waiting_on == "create_ticket: new required argument 'priority'"
        answer = view_store(store, "r1").answer
        assert (
            answer is not None and answer.content == "v2 answered after lookup: found lookup: hang"
        )
        assert side_lines(side, "lookup") == ["v1 lookup: hang"]  # v1 ran it; v2 replayed it
        assert status(store, "i1") == RunStatus.INDETERMINATE  # waits for its human
        done = agentrun(
            spec, side, "reconcile", "i1", "tool/1/0/create_ticket", "--retry", "--by", "ann"
        )
        assert done.returncode == 0, done.stderr
        wait_for(lambda: status(store, "i1") == RunStatus.INCOMPATIBLE, 60, "i1 incompatible")

        # The way out: accept the change; the model asks again with v2's arguments, which
        # wait for a new approval; nothing ran with arguments a human did not approve.
        accepted = agentrun(
            spec, side, "accept-change", "a1", "--by", "ann", "--reason", "v2 sets a priority"
        )
        assert accepted.returncode == 0, accepted.stderr
        wait_for(lambda: status(store, "a1") == RunStatus.AWAITING_APPROVAL, 60, "a1 re-asks")
        (again,) = view_store(store, "a1").pending
        assert again.arguments == {"title": "approval: printer", "priority": "high"}
        assert side_lines(side, "create_ticket") == []
        ok = agentrun(spec, side, "approve", "a1", again.marker, "--by", "ann")
        assert ok.returncode == 0, ok.stderr
        wait_for(lambda: status(store, "a1") == RunStatus.COMPLETED, 60, "a1 to finish")
        assert side_lines(side, "create_ticket") == [
            "v2 [('priority', 'high'), ('title', 'approval: printer')]"
        ]
        # Nothing was retried in a loop: one incompatible attempt per run and human signal.
        ended = [a.ended for a in store.attempts("i1")]
        assert ended.count("incompatible") == 1, ended
    finally:
        assert worker.stop() == 0
    after = agentrun(spec, side, "deploy-check", "--agent", "_deploy_agents:v2")
    assert after.returncode == 1 and "i1" in after.stdout and "a1" not in after.stdout

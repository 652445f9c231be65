"""Workers in the store (SPEC §11) on both stores: registrations beat, listed live or gone,
forgotten at a clean stop; a live owner name is refused to a second worker."""

from __future__ import annotations

import asyncio
import json
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from durableagent import Agent, AgentConfig, Message, PolicyGate, ScriptedModel, Store, open_store
from durableagent.cli.main import main
from durableagent.durations import parse_duration
from durableagent.roster import GONE_KEPT, OwnerInUseError, WorkerInfo, this_process
from durableagent.worker import Worker


def info(owner: str, *, ago: float = 0.0, pid: int = 4242, host: str = "host-b") -> WorkerInfo:
    now = time.time()
    return WorkerInfo(
        owner=owner,
        host=host,
        pid=pid,
        version="0.1.0",
        agent="helpdesk:agent",
        store="runs",
        started_at=now - ago - 60,
        beat_at=now - ago,
        concurrency=4,
        runs=("a1",),
        heartbeat=5.0,
    )


def agent() -> Agent:
    return Agent(AgentConfig(ScriptedModel([Message("assistant", "done")])), PolicyGate())


def test_a_beat_registers_a_worker_and_the_next_replaces_it(any_store: Store) -> None:
    any_store.beat(info("w1"))
    any_store.beat(replace(info("w1"), runs=("a1", "a2")))
    any_store.beat(info("host-b:77"))
    got = any_store.workers()
    assert [w.owner for w in got] == ["host-b:77", "w1"]
    assert got[1].runs == ("a1", "a2") and got[1].agent == "helpdesk:agent"
    assert (
        got[1].to_dict()
        == replace(
            info("w1"), runs=("a1", "a2"), beat_at=got[1].beat_at, started_at=got[1].started_at
        ).to_dict()
    )


def test_a_worker_is_live_within_three_heartbeats_then_gone(any_store: Store) -> None:
    any_store.beat(info("fresh", ago=1))
    any_store.beat(info("stale", ago=16))
    state = {w.owner: w.state() for w in any_store.workers()}
    assert state == {"fresh": "live", "stale": "gone"}


def test_liveness_is_judged_from_each_workers_own_heartbeat(any_store: Store) -> None:
    """A worker beating every minute is live 100 s after its beat and gone at 200 s; one
    beating every half second is live 1 s after and gone at 2 s (the default period, 5 s,
    would say the opposite of each)."""
    now = time.time()
    for owner, heartbeat, ago in [
        ("slow-live", 60.0, 100.0),
        ("slow-gone", 60.0, 200.0),
        ("quick-live", 0.5, 1.0),
        ("quick-gone", 0.5, 2.0),
    ]:
        any_store.beat(replace(info(owner), heartbeat=heartbeat, beat_at=now - ago))
    workers = any_store.workers()
    assert {w.owner: w.heartbeat for w in workers} == {
        "slow-live": 60.0,
        "slow-gone": 60.0,
        "quick-live": 0.5,
        "quick-gone": 0.5,
    }
    assert {w.owner: w.state(now) for w in workers} == {
        "slow-live": "live",
        "slow-gone": "gone",
        "quick-live": "live",
        "quick-gone": "gone",
    }


def test_forgetting_a_worker_removes_only_it(any_store: Store) -> None:
    any_store.beat(info("w1"))
    any_store.beat(info("w2"))
    assert any_store.forget_worker("w1") is True
    assert any_store.forget_worker("w1") is False
    assert [w.owner for w in any_store.workers()] == ["w2"]


def test_owner_names_with_slashes_and_dots_stay_in_the_registry(any_store: Store) -> None:
    for owner in ("../evil", ".hidden", "a/b c"):
        any_store.beat(info(owner))
    assert sorted(w.owner for w in any_store.workers()) == sorted(["../evil", ".hidden", "a/b c"])


def serve_briefly(worker: Worker, seconds: float) -> None:
    async def go() -> None:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(seconds, stop.set)
        await worker.serve(stop)

    asyncio.run(go())


def test_a_worker_beats_while_it_serves_and_forgets_itself_at_a_clean_stop(
    any_store: Store,
) -> None:
    worker = Worker(agent(), any_store, owner="beater", heartbeat=0.1, rescan=0.5)
    seen: list[list[WorkerInfo]] = []

    async def go() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.serve(stop))
        await asyncio.sleep(0.5)
        seen.append(await asyncio.to_thread(any_store.workers))
        stop.set()
        await task

    asyncio.run(go())
    (me,) = seen[0]
    assert me.owner == "beater" and me.pid == os.getpid() and me.live()
    assert me.beat_at - me.started_at >= 0.2  # it beat again since it started
    assert any_store.workers() == []


def test_a_worker_refuses_an_owner_a_live_worker_uses(any_store: Store) -> None:
    any_store.beat(info("taken", ago=1))
    worker = Worker(agent(), any_store, owner="taken", heartbeat=0.1)
    with pytest.raises(OwnerInUseError, match="'taken' is in use by a live worker"):
        serve_briefly(worker, 0.2)
    assert [w.pid for w in any_store.workers()] == [4242]  # the live one is untouched


def test_a_gone_workers_owner_may_be_taken_again(any_store: Store) -> None:
    any_store.beat(info("restarted", ago=60))
    serve_briefly(Worker(agent(), any_store, owner="restarted", heartbeat=0.1), 0.2)
    assert any_store.workers() == []


def test_a_starting_worker_forgets_the_workers_gone_for_more_than_a_day(
    any_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    any_store.beat(info("killed-yesterday", ago=GONE_KEPT + 60))
    any_store.beat(info("killed-an-hour-ago", ago=3600))
    any_store.beat(info("live-elsewhere", ago=1))
    worker = Worker(agent(), any_store, owner="starting", heartbeat=0.1)

    async def go() -> list[str]:
        stop = asyncio.Event()
        task = asyncio.create_task(worker.serve(stop))
        await asyncio.sleep(0.3)
        owners = sorted(w.owner for w in await asyncio.to_thread(any_store.workers))
        stop.set()
        await task
        return owners

    with caplog.at_level("INFO", logger="durableagent.worker"):
        seen = asyncio.run(go())
    assert seen == ["killed-an-hour-ago", "live-elsewhere", "starting"]
    assert "forgot 1 worker gone for more than 1d: killed-yesterday" in caplog.text


def test_a_worker_killed_on_this_host_does_not_hold_its_name(any_store: Store) -> None:
    dead = replace(this_process("crashed"), pid=2**22 + 12345)  # no such process here
    any_store.beat(dead)
    serve_briefly(Worker(agent(), any_store, owner="crashed", heartbeat=0.1), 0.2)


def test_agentrun_workers_lists_live_then_gone(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    any_store.beat(info("w-gone", ago=100))
    any_store.beat(info("w-live", ago=1))
    assert main(["workers", "--store", store_spec]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "OWNER",
        "HOST:PID",
        "AGENT",
        "VERSION",
        "UP",
        "LAST",
        "BEAT",
        "RUNS",
        "STATE",
    ]
    assert out[1].startswith("w-live") and out[1].endswith("live")
    assert "host-b:4242" in out[1] and "helpdesk:agent" in out[1] and "1 a1" in out[1]
    assert out[2].startswith("w-gone") and out[2].endswith("gone") and "1m ago" in out[2]
    assert out[3] == "1 live, 1 gone"
    assert main(["workers", "--json", "--store", store_spec]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [(w["owner"], w["state"]) for w in doc["workers"]] == [
        ("w-live", "live"),
        ("w-gone", "gone"),
    ]
    assert doc["workers"][0]["runs"] == ["a1"] and doc["workers"][0]["beat_at_iso"]


def test_agentrun_workers_on_a_store_with_none(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    any_store.beat(info("x"))
    any_store.forget_worker("x")
    assert main(["workers", "--store", store_spec]) == 0
    assert "no worker has registered" in capsys.readouterr().out


def test_a_registry_file_that_is_not_json_is_one_line_and_the_others_are_listed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from durableagent import FileStore

    store = FileStore(tmp_path / "runs")
    store.beat(info("good", ago=1))
    (tmp_path / "runs" / ".workers" / "bad.json").write_text("{not json")
    assert main(["workers", "--store", str(tmp_path / "runs")]) == 0
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "bad.json is not a worker registration" in err
    assert "Traceback" not in err
    assert any(line.startswith("good") for line in out.splitlines())
    # A worker still starts, and beats, beside it.
    serve_briefly(Worker(agent(), store, owner="next", heartbeat=0.1), 0.2)


# -- notices: claimed before sending, marked after ------------------------------------------


def test_a_notice_is_claimed_once_and_never_again_once_sent(any_store: Store) -> None:
    key = ("a1", 7, "approval", "t1")
    assert any_store.claim_notice(*key, by="n1") is True
    assert any_store.claim_notice(*key, by="n2") is False  # n1's, and fresh
    assert any_store.claim_notice(*key, by="n1") is True  # n1 refreshing its own claim
    any_store.mark_notice(*key)
    assert any_store.claim_notice(*key, by="n1") is False
    assert any_store.claim_notice(*key, by="n2", stale_after=0.0) is False
    (n,) = any_store.notices("a1")
    assert (n.seq, n.kind, n.target, n.claimed_by) == (7, "approval", "t1", "n1")
    assert n.sent_at is not None


def test_a_stale_claim_never_marked_is_taken_over(any_store: Store) -> None:
    key = ("a1", 7, "approval", "t1")
    assert any_store.claim_notice(*key, by="dead") is True
    time.sleep(0.05)
    assert any_store.claim_notice(*key, by="n2", stale_after=0.01) is True
    assert any_store.claim_notice(*key, by="dead", stale_after=60) is False
    assert [n.claimed_by for n in any_store.notices("a1")] == ["n2"]


def test_notices_are_kept_per_target_kind_and_transition(any_store: Store) -> None:
    for key in (
        ("a1", 7, "approval", "t1"),
        ("a1", 7, "approval", "t2"),
        ("a1", 9, "approval", "t1"),
        ("a1", 7, "deadline", "t1"),
    ):
        assert any_store.claim_notice(*key, by="n1") is True
    assert len(any_store.notices("a1")) == 4
    assert any_store.notices("b2") == []


def test_two_workers_that_started_at_once_under_one_owner_are_told_in_the_log(
    any_store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    worker = Worker(agent(), any_store, owner="twin", heartbeat=0.1)
    worker.heartbeat.register()  # alone so far
    any_store.beat(info("twin", ago=0))  # the other process's first beat lands
    with caplog.at_level("ERROR", logger="durableagent.worker"):
        worker.heartbeat.beat()
        worker.heartbeat.beat()
    said = [r.getMessage() for r in caplog.records if "also used" in r.getMessage()]
    assert said == [
        "owner 'twin' is also used by a live worker at host-b:4242: their leases and "
        "attempts cannot be told apart; restart one with another --owner"
    ]


def test_a_live_worker_is_up_since_it_started_not_until_its_last_beat(
    store_spec: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A real worker beating every 30 s: seconds after its first beat, `workers` says it has
    been up at least as long as its last beat is old (it said `UP 0s` beside `4s ago`)."""
    from procs import WorkerProcess, wait_for

    store = open_store(store_spec)
    w = WorkerProcess(
        store_spec, "broken", tmp_path / "w.log", "--owner", "up-1", "--heartbeat", "30"
    )
    try:
        wait_for(lambda: [x.owner for x in store.workers()] == ["up-1"], 60, "registration")
        (first,) = store.workers()
        wait_for(lambda: time.time() - first.beat_at >= 3, 30, "3 s past the beat")
        assert main(["workers", "--json", "--store", store_spec]) == 0
        (row,) = json.loads(capsys.readouterr().out)["workers"]
        assert row["state"] == "live" and row["beat_at"] == first.beat_at  # no beat since
        assert row["up"] >= time.time() - first.beat_at - 1 >= 2
        assert main(["workers", "--store", store_spec]) == 0
        line = capsys.readouterr().out.splitlines()[1].split()
        up, last = line[4], line[5]
        assert up != "0s" and parse_duration(up) >= parse_duration(last), line
    finally:
        w.stop()
        store.close()


def test_a_worker_refused_its_owner_says_nothing_before_the_refusal(
    store_spec: str, tmp_path: Path
) -> None:
    """`agentrun worker --owner X` with X live elsewhere: one line, the refusal, exit 1; no
    "serving … (X)" and no metrics address first (it printed both, then the refusal)."""
    import subprocess
    import sys

    from procs import WorkerProcess, child_env, wait_for

    store = open_store(store_spec)
    first = WorkerProcess(store_spec, "broken", tmp_path / "a.log", "--owner", "X")
    try:
        wait_for(lambda: [w.owner for w in store.workers()] == ["X"], 60, "X registered")
        (live,) = store.workers()
        second = subprocess.run(
            [
                sys.executable,
                "-m",
                "durableagent.cli",
                "worker",
                "--agent",
                "_child_agents:broken",
                "--store",
                store_spec,
                "--owner",
                "X",
                "--metrics-port",
                "0",
            ],
            env=child_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert second.returncode == 1
        assert second.stderr.splitlines() == [second.stderr.strip()] and second.stderr.startswith(
            "agentrun worker: owner 'X' is in use by a live worker"
        ), second.stderr
        assert second.stdout == ""
        assert [(w.owner, w.pid) for w in store.workers()] == [("X", live.pid)]
    finally:
        first.stop()
        store.close()

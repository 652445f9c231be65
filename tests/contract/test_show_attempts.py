"""Attempts in the CLI (SPEC §11): ``show`` prints the attempt log, ``show --json`` has
``attempts``, ``ls`` names the owner of a running run. Both stores."""

from __future__ import annotations

import json

import pytest

from durableagent import Message, Outcome, Status, Store, submit
from durableagent.cli.main import main


def two_attempts(store: Store) -> None:
    """Attempt 1 by host-a:11 failed with ``quota exceeded``; attempt 2 by host-b:22 runs."""
    submit(store, "a1", [Message("user", "file it")])
    with store.lease("a1", owner="host-a:11") as lease:
        seq = store.load("a1")[-1].seq
        store.save_outcome(
            "a1", Outcome(Status.FAILED, error="quota exceeded", seq=seq), lease=lease
        )


def test_show_prints_each_attempt_with_its_owner_epoch_ending_and_error(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    two_attempts(any_store)
    with any_store.lease("a1", owner="host-b:22"):
        assert main(["show", "a1", "--store", store_spec]) == 0
    out = capsys.readouterr().out.splitlines()
    at = out.index("attempts")
    assert out[at + 1].split()[:5] == ["#", "OWNER", "EPOCH", "VERSION", "STARTED"]
    first, second = out[at + 2], out[at + 3]
    assert first.split()[:3] == ["1", "host-a:11", "1"]
    assert first.endswith("failed: quota exceeded")
    assert second.split()[:3] == ["2", "host-b:22", "2"] and second.endswith("running")


def test_show_json_has_the_attempts(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    two_attempts(any_store)
    assert main(["show", "a1", "--json", "--store", store_spec]) == 0
    (a,) = json.loads(capsys.readouterr().out)["attempts"]
    assert (a["number"], a["owner"], a["epoch"], a["ended"], a["error"]) == (
        1,
        "host-a:11",
        1,
        "failed",
        "quota exceeded",
    )
    assert a["started_at_iso"] and a["ended_at_iso"]


def test_show_says_when_no_worker_has_taken_the_run(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    submit(any_store, "new", [Message("user", "hi")])
    assert main(["show", "new", "--store", store_spec]) == 0
    assert "none yet (no worker has taken the run)" in capsys.readouterr().out


def test_ls_names_the_owner_of_a_running_run(
    any_store: Store, store_spec: str, capsys: pytest.CaptureFixture[str]
) -> None:
    two_attempts(any_store)
    submit(any_store, "idle", [Message("user", "hi")])
    with any_store.lease("a1", owner="host-b:22"):
        assert main(["ls", "--store", store_spec]) == 0
        table = capsys.readouterr().out
        assert main(["ls", "--json", "--store", store_spec]) == 0
        rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    running = next(line for line in table.splitlines() if " a1 " in line)
    assert "held by host-b:22" in running
    assert {r["run_id"]: r["owner"] for r in rows} == {"a1": "host-b:22", "idle": None}


def test_show_follow_says_once_that_no_worker_is_live_and_keeps_following(
    any_store: Store, store_spec: str
) -> None:
    import subprocess
    import sys
    import time

    from procs import child_env

    submit(any_store, "lonely", [Message("user", "hi")])
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "durableagent.cli",
            "show",
            "lonely",
            "--follow",
            "--store",
            store_spec,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
    )
    try:
        assert proc.stdout is not None
        seen = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            seen.append(line)
            if "no live worker" in line:
                break
        assert any("no live worker on this store" in s for s in seen), seen
        time.sleep(0.5)
        assert proc.poll() is None  # it follows on
    finally:
        proc.kill()
        proc.wait()

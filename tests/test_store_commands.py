"""agentrun export, agentrun copy and the worker's --lease-ttl. Runs move between a
directory and PostgreSQL byte for byte, with their attempts; copying again changes nothing; a
bad or conflicting run is refused by name and the others still move."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pgserver
import pytest
from procs import child_env

from durableagent import (
    FileStore,
    Message,
    Reconcile,
    Record,
    Store,
    open_store,
    run,
    signal,
    submit,
)
from helpdesk import INPUT, Side, helpdesk


def agentrun(*args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args],
        capture_output=True,
        timeout=120,
        env=child_env(),
    )


@pytest.fixture
def pg_url() -> Iterator[str]:
    with pgserver.fresh_schema() as schema:
        yield pgserver.url(schema)


KILLED = """
import os, signal, sys
from durableagent import open_store
held = open_store(sys.argv[1]).lease("fixed", owner="crashed")
held.__enter__()
os.kill(os.getpid(), signal.SIGKILL)
"""


async def build(store: FileStore, side: Side) -> None:
    """Runs in several states: awaiting approval, completed, approved and then stopped by
    an attempt that never said how it ended, and one only submitted."""
    config, _ = helpdesk(store, side)
    await run(config, "waiting", INPUT)
    first = await run(config, "done", INPUT)
    signal(store, "done", "approve", {"marker": first.pending[0].marker}, by="alice")
    await run(config, "done", None)
    first = await run(config, "fixed", INPUT)
    signal(store, "fixed", "approve", {"marker": first.pending[0].marker}, by="bob")
    killed = subprocess.run([sys.executable, "-c", KILLED, str(store.root)], env=child_env())
    assert killed.returncode == -9  # an attempt that never said how it ended
    submit(store, "fresh", [Message("user", "later")])


def journals(root: Path) -> dict[str, bytes]:
    return {p.stem: p.read_bytes() for p in sorted(root.glob("*.jsonl"))}


def attempts_of(store: Store) -> dict[str, list[tuple]]:
    return {
        r: [
            (a.number, a.owner, a.epoch, a.first_seq, a.ended, a.last_seq)
            for a in store.attempts(r)
        ]
        for r in store.run_ids()
    }


def statuses(store: Store) -> dict[str, str]:
    return {s.run_id: str(s.status) for s in store.summaries()}


async def test_a_copy_takes_only_finished_runs_and_names_the_ones_that_could_still_run(
    tmp_path: Path, pg_url: str
):
    src = FileStore(tmp_path / "src")
    await build(src, Side(tmp_path / "side"))
    before = journals(tmp_path / "src")
    p = agentrun("copy", str(tmp_path / "src"), pg_url)
    assert p.returncode == 1
    err = p.stderr.decode()
    for run_id in ("waiting", "fixed", "fresh"):
        assert f"run {run_id!r} is " in err and "live in both stores" in err
    assert "--move" in err and "Traceback" not in err
    assert b"copied 1 run(s)" in p.stdout and b"3 refused: fixed, fresh, waiting" in p.stdout
    assert journals(tmp_path / "src") == before  # nothing written to the source
    pg = open_store(pg_url)
    try:
        assert pg.run_ids() == ["done"]
    finally:
        pg.close()


async def test_a_cancelled_run_is_finished_and_copied_as_it_is(tmp_path: Path, pg_url: str):
    """SPEC §7: a plain copy takes completed and cancelled runs. A cancelled run starts no
    attempt anywhere, so it is copied byte for byte and is cancelled in both stores (it was
    refused: "it would be live in both stores and run twice")."""
    src = FileStore(tmp_path / "src")
    await build(src, Side(tmp_path / "side"))
    signal(src, "fresh", "cancel", {}, by="ops", reason="not wanted")
    signal(src, "waiting", "cancel", {}, by="ops", reason="asked twice")
    before = journals(tmp_path / "src")
    p = agentrun("copy", str(tmp_path / "src"), pg_url)
    assert p.returncode == 1, p.stderr  # "fixed" still could run: refused, by name only
    err = p.stderr.decode()
    assert "'fixed'" in err and "'fresh'" not in err and "'waiting'" not in err
    assert b"copied 3 run(s)" in p.stdout and b"1 refused: fixed" in p.stdout
    assert journals(tmp_path / "src") == before  # nothing written to the source
    pg = open_store(pg_url)
    try:
        assert pg.run_ids() == ["done", "fresh", "waiting"]
        assert statuses(pg) == {"done": "completed", "fresh": "cancelled", "waiting": "cancelled"}
        for run_id in ("fresh", "waiting"):
            assert pg.export_run(run_id) == src.export_run(run_id)
    finally:
        pg.close()
    again = agentrun("copy", str(tmp_path / "src"), pg_url)
    assert b"copied 0 run(s)" in again.stdout, again.stdout  # copying again changes nothing


async def test_a_round_trip_file_postgres_file_by_moves_is_byte_identical(
    tmp_path: Path, pg_url: str
):
    src = FileStore(tmp_path / "src")
    await build(src, Side(tmp_path / "side"))
    before, was = journals(tmp_path / "src"), statuses(src)
    there = agentrun("copy", "--move", str(tmp_path / "src"), pg_url, "--by", "ops")
    assert there.returncode == 0, there.stderr
    assert b"moved 4 run(s)" in there.stdout
    # In the source every run that could move is moved (by ops, to the URL), never to run.
    assert statuses(src) == {
        "done": "completed",
        "fixed": "moved",
        "fresh": "moved",
        "waiting": "moved",
    }
    (summary,) = [s for s in src.summaries() if s.run_id == "fresh"]
    assert summary.waiting_on == f"moved to {open_store(pg_url).description}"
    back = agentrun("copy", "--move", pg_url, str(tmp_path / "back"))
    assert back.returncode == 0, back.stderr

    assert journals(tmp_path / "back") == before  # without the move records, byte for byte
    pg, dst = open_store(pg_url), FileStore(tmp_path / "back")
    try:
        assert attempts_of(pg) == attempts_of(src) == attempts_of(dst)
        assert statuses(dst) == was
        assert [(a.owner, a.ended) for a in dst.attempts("fixed")][-1] == ("crashed", "lost")
        for run_id, data in before.items():
            exported = agentrun("export", run_id, "--store", str(tmp_path / "back"))
            assert exported.returncode == 0 and exported.stdout == data
    finally:
        pg.close()


async def test_moving_again_changes_nothing(tmp_path: Path, pg_url: str):
    src = FileStore(tmp_path / "src")
    await build(src, Side(tmp_path / "side"))
    assert agentrun("copy", "--move", str(tmp_path / "src"), pg_url).returncode == 0
    pg = open_store(pg_url)
    try:
        before = ({r: pg.export_run(r) for r in pg.run_ids()}, attempts_of(pg))
        moved = journals(tmp_path / "src")
        again = agentrun("copy", "--move", str(tmp_path / "src"), pg_url)
        assert again.returncode == 0, again.stderr
        assert b"moved 0 run(s)" in again.stdout and b"4 already there" in again.stdout
        assert ({r: pg.export_run(r) for r in pg.run_ids()}, attempts_of(pg)) == before
        assert journals(tmp_path / "src") == moved  # no second move record
        elsewhere = agentrun("copy", "--move", str(tmp_path / "src"), str(tmp_path / "other"))
        assert elsewhere.returncode == 1
        assert "was moved to postgresql://" in elsewhere.stderr.decode()
    finally:
        pg.close()


async def test_a_moved_run_refuses_every_signal_and_every_runner_naming_where_it_went(
    tmp_path: Path, pg_url: str
):
    from durableagent import RunHalted, SignalError

    src = FileStore(tmp_path / "src")
    side = Side(tmp_path / "side")
    await build(src, side)
    assert agentrun("copy", "--move", str(tmp_path / "src"), pg_url).returncode == 0
    marker = src.summary("waiting").pending  # type: ignore[union-attr]
    before = src.path("waiting").read_bytes()
    with pytest.raises(SignalError, match=r"was moved to postgresql://.*decide on it there"):
        signal(src, "waiting", "deny", {"marker": "tool/1/0/create_ticket#000000000000"})
    assert marker == ()
    config, model = helpdesk(src, side)
    with pytest.raises(RunHalted, match=r"moved to postgresql://.*run it there"):
        await run(config, "waiting", None)
    assert model.calls == 0 and src.path("waiting").read_bytes() == before
    refused = agentrun("approve", "waiting", "--all", "--store", str(tmp_path / "src"))
    assert refused.returncode == 1 and b"moved" in refused.stderr


async def test_a_corrupt_source_line_is_refused_with_its_line(tmp_path: Path, pg_url: str):
    src = FileStore(tmp_path / "src")
    await build(src, Side(tmp_path / "side"))
    path = tmp_path / "src" / "done.jsonl"
    lines = path.read_bytes().split(b"\n")
    lines[2] = lines[2].replace(b"lookup_policy", b"lookup_polixy")  # the crc no longer fits
    path.write_bytes(b"\n".join(lines))

    p = agentrun("copy", "--move", str(tmp_path / "src"), pg_url)
    assert p.returncode == 1
    err = p.stderr.decode()
    assert "run 'done' is corrupt at line 3: crc mismatch" in err and "Traceback" not in err
    assert b"moved 3 run(s)" in p.stdout and b"1 refused: done" in p.stdout
    pg = open_store(pg_url)
    try:
        assert sorted(pg.run_ids()) == ["fixed", "fresh", "waiting"]
    finally:
        pg.close()
    exported = agentrun("export", "done", "--store", str(tmp_path / "src"))
    assert exported.returncode == 1 and b"corrupt at line 3" in exported.stderr


async def test_a_run_with_other_records_in_the_destination_is_refused_by_name(
    tmp_path: Path, pg_url: str
):
    src = FileStore(tmp_path / "src")
    await build(src, Side(tmp_path / "side"))
    pg = open_store(pg_url)
    try:
        submit(pg, "waiting", [Message("user", "another question")])
        theirs = pg.export_run("waiting")
        p = agentrun("copy", "--move", str(tmp_path / "src"), pg_url)
        assert p.returncode == 1
        assert "run 'waiting' is already in" in p.stderr.decode()
        assert b"1 refused: waiting" in p.stdout
        assert pg.export_run("waiting") == theirs  # nothing of it was lost
        assert sorted(pg.run_ids()) == ["done", "fixed", "fresh", "waiting"]
    finally:
        pg.close()


def test_exporting_an_unknown_run_is_refused(tmp_path: Path):
    FileStore(tmp_path / "runs")
    p = agentrun("export", "nobody", "--store", str(tmp_path / "runs"))
    assert p.returncode == 1 and b"no run 'nobody'" in p.stderr


async def test_a_reconciled_run_copies_with_its_signals(tmp_path: Path, pg_url: str):
    src = FileStore(tmp_path / "src")
    side = Side(tmp_path / "side")
    config, _ = helpdesk(src, side)
    first = await run(config, "r", INPUT)
    signal(src, "r", "approve", {"marker": first.pending[0].marker}, by="alice")
    # A worker died inside the write: its start is the journal's last record.
    src.append("r", Record.make("step.started", "tool/2/0/create_ticket", "tool", {"write": True}))
    signal(src, "r", "reconcile", Reconcile("tool/2/0/create_ticket", "done", "T-1"), by="oncall")
    before = src.export_run("r")
    assert agentrun("copy", "--move", str(tmp_path / "src"), pg_url).returncode == 0
    pg = open_store(pg_url)
    try:
        assert pg.export_run("r") == before
        config2, model = helpdesk(pg, side)
        done = await run(config2, "r", None)  # resumes on the other store
        assert done.message is not None and "T-1" in done.message.content
        assert model.calls == 1
    finally:
        pg.close()


def test_a_worker_lease_ttl_must_be_positive(tmp_path: Path):
    p = agentrun(
        "worker", "--agent", "_child_agents:gated", "--store", str(tmp_path), "--lease-ttl", "0"
    )
    assert p.returncode == 2 and b"--lease-ttl must be a positive" in p.stderr

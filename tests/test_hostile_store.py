"""One bad entry never blocks a store, nothing is written outside its root, a refused write
leaves nothing, and a worker on a store it cannot write backs off."""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from procs import WorkerProcess, wait_for

from durableagent import (
    FileStore,
    Message,
    Outcome,
    RunStatus,
    Status,
    StoreError,
    signal,
    submit,
    view_store,
)


def agentrun(
    root: Path, *args: str | bytes, timeout: float = 20
) -> subprocess.CompletedProcess[str]:
    """The CLI in a child; a hang fails the test instead of hanging it."""
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args, "--store", str(root)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def ask(store: FileStore, run_id: str) -> None:
    submit(store, run_id, [Message("user", f"ticket for {run_id}")])


BAD_ENTRIES: dict[str, tuple[Callable[[Path], None], str]] = {
    "fifo": (os.mkfifo, "is a FIFO"),
    "directory": (os.mkdir, "is a directory"),
}


@pytest.mark.parametrize("kind", BAD_ENTRIES)
def test_a_non_regular_journal_is_one_corrupt_run_and_the_store_works(store: FileStore, kind: str):
    make, says = BAD_ENTRIES[kind]
    ask(store, "good")
    make(store.root / "bad.jsonl")
    ls = agentrun(store.root, "ls", "--json")
    assert ls.returncode == 0, ls.stderr
    rows = {row["run_id"]: row for row in map(json.loads, ls.stdout.splitlines())}
    assert rows["good"]["status"] == "ready"
    assert rows["bad"]["status"] == "corrupt"
    assert says in rows["bad"]["error"] and "bad.jsonl" in rows["bad"]["error"]
    show = agentrun(store.root, "show", "bad")
    assert show.returncode == 1 and says in show.stderr
    view = view_store(store, "bad")
    assert view.status == RunStatus.CORRUPT and says in view.error
    with pytest.raises(StoreError, match=says):
        signal(store, "bad", "approve", {"marker": "tool/1/0/x#abc"})
    with pytest.raises(StoreError, match=says):
        submit(store, "bad", [Message("user", "hi")])


def test_ls_on_a_store_holding_a_fifo_and_a_directory_takes_bounded_time(store: FileStore):
    ask(store, "good")
    os.mkfifo(store.root / "pipe.jsonl")
    os.mkdir(store.root / "folder.jsonl")
    ls = agentrun(store.root, "ls", timeout=10)
    assert ls.returncode == 0, ls.stderr
    assert "pipe" in ls.stdout and "folder" in ls.stdout and "good" in ls.stdout


def test_a_worker_serves_a_store_holding_a_fifo_and_stops_on_sigterm(
    store: FileStore, workers: Callable[..., WorkerProcess]
):
    os.mkfifo(store.root / "pipe.jsonl")
    os.mkdir(store.root / "folder.jsonl")
    ask(store, "good")
    w = workers(store.root, "gated")
    wait_for(
        lambda: view_store(store, "good").status == RunStatus.AWAITING_APPROVAL,
        why="the good run to be served",
    )
    assert w.stop(timeout=10) == 0
    assert "Traceback" not in w.log.read_text()


# -- nothing escapes the root ---------------------------------------------------------------

FOLDER_WRITES: dict[str, Callable[[FileStore], object]] = {
    ".leases": lambda s: s.lease("r").__enter__(),
    ".attempts": lambda s: s.save_outcome("r", Outcome(Status.FAILED, error="x")),
    ".worker": lambda s: s.write_failures("r", {"failures": 1}),
}


@pytest.mark.parametrize("folder", FOLDER_WRITES)
def test_a_symlinked_store_folder_is_refused_and_nothing_lands_outside(tmp_path: Path, folder: str):
    store = FileStore(tmp_path / "runs")
    ask(store, "r")
    outside = tmp_path / "outside"
    outside.mkdir()
    (store.root / folder).symlink_to(outside)
    with pytest.raises(StoreError, match="symlink"):
        FOLDER_WRITES[folder](store)
    assert list(outside.iterdir()) == []
    assert store.last_outcome("r") is None and store.read_failures("r") is None
    assert store.is_leased("r") is False


def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(tmp_path: Path):
    store = FileStore(tmp_path / "runs")
    target = tmp_path / "precious"
    target.write_text("keep me")
    (store.root / ".leases").mkdir()
    (store.root / ".leases" / "r.lock").symlink_to(target)
    with pytest.raises(StoreError, match="symlink"), store.lease("r"):
        pass
    assert target.read_text() == "keep me"


@pytest.mark.parametrize("folder", [".worker"])
def test_a_symlinked_file_in_a_store_folder_is_replaced_never_written_through(
    tmp_path: Path, folder: str
):
    store = FileStore(tmp_path / "runs")
    target = tmp_path / "precious"
    target.write_text("keep me")
    (store.root / folder).mkdir()
    (store.root / folder / "r.json").symlink_to(target)
    assert store.last_outcome("r") is None and store.read_failures("r") is None
    FOLDER_WRITES[folder](store)
    assert target.read_text() == "keep me"
    assert not (store.root / folder / "r.json").is_symlink()


def test_a_symlinked_attempts_log_is_refused_and_its_target_untouched(tmp_path: Path):
    store = FileStore(tmp_path / "runs")
    target = tmp_path / "precious"
    target.write_text("keep me")
    (store.root / ".attempts").mkdir()
    (store.root / ".attempts" / "r.jsonl").symlink_to(target)
    with pytest.raises(StoreError, match="symlink"):
        store.save_outcome("r", Outcome(Status.FAILED, error="x"))
    assert store.last_outcome("r") is None and store.attempts("r") == []
    assert target.read_text() == "keep me"


# -- a refused submit leaves nothing ---------------------------------------------------------


def test_a_submit_of_text_that_is_not_utf8_writes_nothing(tmp_path: Path):
    root = tmp_path / "runs"
    r = subprocess.run(
        [sys.executable, "-m", "durableagent.cli", "submit", "new", b"hi\xff", "--store", root],
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert r.returncode == 1
    assert "not valid UTF-8" in r.stderr and "0xff" in r.stderr
    assert not root.exists() or list(root.iterdir()) == []
    assert "no runs" in agentrun(root, "ls").stdout or not root.exists()


def test_a_record_that_cannot_be_encoded_creates_no_journal(store: FileStore):
    with pytest.raises(StoreError, match="not plain JSON"):
        submit(store, "new", [Message("user", "hi\udcff")])
    # Only the empty summaries folder that makes a new directory a store.
    assert [p.name for p in store.root.iterdir()] == [".summaries"]
    assert list((store.root / ".summaries").iterdir()) == []
    assert store.run_ids() == []


# -- full and read-only disks (a real tmpfs) --------------------------------------------------


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 512 KiB tmpfs: a disk that fills up, and can be made read-only."""
    mnt = tmp_path / "fs"
    mnt.mkdir()
    made = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", str(mnt)], capture_output=True
    )
    if made.returncode != 0:
        pytest.fail(
            "these tests mount a small tmpfs to fill a real disk; run them as root (CI does): "
            + made.stderr.decode(errors="replace")
        )
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(folder: Path) -> None:
    """Write until the disk is full: big blocks first, then small files for the last ones."""
    for i, size in enumerate([65536] * 1024 + [512] * 256):
        try:
            fd = os.open(folder / f"ballast{i}", os.O_WRONLY | os.O_CREAT, 0o644)
        except OSError:
            return
        try:
            while os.write(fd, b"\0" * size) == size and size == 65536:
                pass
        except OSError as e:
            assert e.errno == errno.ENOSPC
        finally:
            os.close(fd)


def leftovers(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.name.startswith("."))


def test_a_submit_on_a_full_disk_leaves_no_journal(tiny_fs: Path):
    store = FileStore(tiny_fs / "runs")
    fill(tiny_fs)
    with pytest.raises(StoreError):
        submit(store, "new", [Message("user", "x" * 8192)])
    assert [p.name for p in store.root.iterdir()] == [".summaries"]  # the store's own mark
    assert list((store.root / ".summaries").iterdir()) == []
    assert store.run_ids() == []


def test_a_lease_on_a_full_disk_is_a_store_error(tiny_fs: Path):
    store = FileStore(tiny_fs / "runs")
    ask(store, "r")
    fill(tiny_fs)
    with pytest.raises(StoreError, match=r"lease|cannot"), store.lease("r"):
        pass
    assert store.is_leased("r") is False


def test_an_outcome_write_on_a_full_disk_leaves_the_old_one_whole_and_no_temp_file(
    tiny_fs: Path,
):
    store = FileStore(tiny_fs / "runs")
    ask(store, "r")
    store.save_outcome("r", Outcome(Status.FAILED, error="old"))
    store.write_failures("r", {"failures": 1})
    fill(tiny_fs)
    with pytest.raises(StoreError, match="cannot write"):
        store.save_outcome("r", Outcome(Status.FAILED, error="x" * 100_000))
    with pytest.raises(StoreError, match="cannot write"):
        store.write_failures("r", {"failures": 2, "error": "x" * 100_000})
    outcome = store.last_outcome("r")
    assert outcome is not None and outcome.error == "old"
    assert store.read_failures("r") == {"failures": 1}
    assert [p for p in leftovers(store.root) if p.endswith(".tmp")] == []


@pytest.mark.parametrize("how", ["read-only", "full"])
def test_a_worker_on_a_store_it_cannot_write_backs_off_and_says_so_once_per_step(
    tiny_fs: Path, workers: Callable[..., WorkerProcess], how: str
):
    store = FileStore(tiny_fs / "runs")
    ask(store, "r")
    store.close()  # a file open for writing would keep the remount from happening
    if how == "read-only":
        subprocess.run(["mount", "-o", "remount,ro", str(tiny_fs)], check=True)
    else:
        (store.root / ".worker").mkdir()
        fill(tiny_fs)
    w = workers(store.root, "gated", "--backoff", "0.4", "--max-backoff", "0.8")
    import time

    time.sleep(3.0)
    assert w.stop(timeout=10) == 0
    log = w.log.read_text()
    assert "never retrieved" not in log and "Traceback" not in log
    tries = log.count("run r failed (")
    # 0.4 s, 0.8 s, 0.8 s ... between tries over 3 s: a handful, never a storm.
    assert 1 <= tries <= 6, log
    assert log.count("cannot record its failure count") == tries, log
    assert [p for p in leftovers(store.root) if p.endswith(".tmp")] == []

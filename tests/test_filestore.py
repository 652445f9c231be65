"""FileStore on disk: torn tails, corruption, faults, and concurrent appends."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durableagent import (
    CorruptJournalError,
    DurabilityError,
    FileStore,
    Outcome,
    Record,
    Status,
    StoreError,
)

ROOT = Path(__file__).resolve().parent.parent


def fill(store: FileStore, run_id: str, n: int, payload: str = "x") -> list[bytes]:
    """Append n records; return the file's lines (with newlines)."""
    store.append(run_id, Record.make("run.started", data={"input": []}))
    for i in range(2, n + 1):
        store.append(run_id, Record.make("step.started", f"llm/{i}", "model", {"p": payload}))
    return store.path(run_id).read_bytes().splitlines(keepends=True)


def test_lines_have_the_spec_key_order_and_a_crc_over_the_rest(store: FileStore):
    store.append("r", Record(99, "run.started", "", "", {"input": []}, 1.5))
    line = store.path("r").read_bytes()
    assert line.startswith(b'{"seq":1,"type":"run.started","step":"","kind":"","data":')
    body, _, crc = line.rstrip(b"\n").rpartition(b',"crc":"')
    assert crc[-2:] == b'"}'
    assert crc[:-2] == b"%08x" % zlib.crc32(body + b"}")


def test_a_line_without_crc_still_loads(store: FileStore):
    store.path("h").write_text(
        '{"seq":1,"type":"run.started","step":"","kind":"","data":{"input":[]},"at":0}\n'
    )
    assert [r.seq for r in store.load("h")] == [1]


@pytest.mark.parametrize(
    "payload", ["x", "é" * 40_000], ids=["short-line", "line-past-the-tail-read"]
)
def test_torn_tail_at_every_byte_offset_is_ignored_then_cut(tmp_path: Path, payload: str):
    store = FileStore(tmp_path / "runs")
    lines = fill(store, "t", 4, payload)
    head, last = b"".join(lines[:-1]), lines[-1]
    # Every cut short of the whole record (the whole record without its newline is kept:
    # see test_a_whole_final_record_without_its_newline_is_kept).
    offsets = (
        range(len(last) - 1)
        if len(last) < 2000
        else [*range(0, 300), *range(len(last) - 300, len(last) - 1)]
    )
    path = store.path("t")
    for k in offsets:
        path.write_bytes(head + last[:k])
        assert [r.seq for r in store.load("t")] == [1, 2, 3], k
        stored = store.append("t", Record.make("signal", "llm/2", "", {"k": k}))
        assert stored.seq == 4
        data = path.read_bytes()
        assert data.startswith(head)
        assert [r.seq for r in store.load("t")] == [1, 2, 3, 4]
        assert store.load("t")[-1].data == {"k": k}


@pytest.mark.parametrize("newline", [b"", b"\n"])
def test_nul_filled_last_line_is_a_torn_tail(store: FileStore, newline: bytes):
    lines = fill(store, "z", 3)
    path = store.path("z")
    path.write_bytes(b"".join(lines[:-1]) + b"\0" * (len(lines[-1]) - 1) + newline)
    assert [r.seq for r in store.load("z")] == [1, 2]
    assert store.append("z", Record.make("signal", "s", "", {})).seq == 3
    assert [r.seq for r in store.load("z")] == [1, 2, 3]
    assert b"\0" not in path.read_bytes()


def test_the_issue_example_a_zero_block_inside_the_last_line_is_a_torn_tail(store: FileStore):
    """``{"seq":8,"type":"sig`` + 300 NULs + ``"}\\n``: a power loss zero-filled a block in the
    middle of the last write, and its later bytes (the newline too) reached the disk."""
    fill(store, "z", 7)
    path = store.path("z")
    path.write_bytes(path.read_bytes() + b'{"seq":8,"type":"sig' + b"\0" * 300 + b'"}\n')
    assert [r.seq for r in store.load("z")] == list(range(1, 8))
    assert store.append("z", Record.make("signal", "s", "", {})).seq == 8
    assert b"\0" not in path.read_bytes()
    assert [r.seq for r in store.load("z")] == list(range(1, 9))


@given(data=st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_zeros_anywhere_in_the_final_line_are_a_tear_and_anywhere_before_it_corruption(
    tmp_path: Path, data: st.DataObject
):
    """Where the zeros fall decides: inside the final line (its newline kept or not) the line
    was never acknowledged and is cut off by the next append; in any earlier line they are
    damage to an acknowledged record, reported with its line number, the file unchanged."""
    store = FileStore(tmp_path / "p")
    path = store.path("p")
    if not path.exists():
        fill(store, "p", 5, "payload " * 20)
    lines = path.read_bytes().splitlines(keepends=True)
    victim = data.draw(st.integers(0, len(lines) - 1), label="line")
    body = lines[victim][:-1]  # the zeros fall inside the line, its newline kept
    start = data.draw(st.integers(0, len(body) - 1), label="start")
    length = data.draw(st.integers(1, len(body) - start), label="length")
    damaged = list(lines)
    damaged[victim] = body[:start] + b"\0" * length + body[start + length :] + b"\n"
    original = b"".join(lines)
    path.write_bytes(b"".join(damaged))
    try:
        if victim == len(lines) - 1:
            assert [r.seq for r in store.load("p")] == [1, 2, 3, 4]
            assert store.append("p", Record.make("signal", "s", "", {})).seq == 5
            assert b"\0" not in path.read_bytes()
            assert [r.seq for r in store.load("p")] == [1, 2, 3, 4, 5]
        else:
            before = path.read_bytes()
            with pytest.raises(CorruptJournalError) as e:
                store.load("p")
            assert e.value.line == victim + 1
            assert path.read_bytes() == before
    finally:
        path.write_bytes(original)


@pytest.mark.parametrize("payload", ["x", "é" * 40_000], ids=["short", "past-the-tail-read"])
@pytest.mark.parametrize("bit", [None, *range(8)], ids=["missing", *(f"bit{b}" for b in range(8))])
def test_a_whole_final_record_without_its_newline_is_kept(
    tmp_path: Path, payload: str, bit: int | None
):
    """An fsynced final record whose newline was lost (or flipped by one bit) is a complete
    record: it loads, and the next append restores the newline instead of cutting it."""
    store = FileStore(tmp_path / "runs")
    lines = fill(store, "n", 3, payload)
    path = store.path("n")
    damaged = b"" if bit is None else bytes([ord("\n") ^ (1 << bit)])
    path.write_bytes(b"".join(lines[:-1]) + lines[-1][:-1] + damaged)
    assert [r.seq for r in store.load("n")] == [1, 2, 3]
    assert store.load("n")[-1].data == {"p": payload}
    assert store.append("n", Record.make("signal", "s", "", {"after": 1})).seq == 4
    assert path.read_bytes().startswith(b"".join(lines))
    assert [r.seq for r in store.load("n")] == [1, 2, 3, 4]
    assert path.read_bytes().endswith(b"\n") and path.read_bytes().count(b"\n") == 4


def test_a_whole_final_record_without_its_newline_is_kept_by_a_checked_append(store: FileStore):
    lines = fill(store, "c", 2)
    path = store.path("c")
    path.write_bytes(b"".join(lines)[:-1])
    seen: list[int] = []
    store.append(
        "c", Record.make("signal", "s", "", {}), check=lambda rs: seen.extend(r.seq for r in rs)
    )
    assert seen == [1, 2]
    assert [r.seq for r in store.load("c")] == [1, 2, 3]


@given(tail=st.binary(min_size=1, max_size=200).filter(lambda b: b"\n" not in b))
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_any_unterminated_garbage_tail_is_torn(tmp_path: Path, tail: bytes):
    store = FileStore(tmp_path / "g")
    path = store.path("g")
    if not path.exists():
        fill(store, "g", 2)
    good = b"".join(path.read_bytes().splitlines(keepends=True)[:2])
    path.write_bytes(good + tail)
    assert [r.seq for r in store.load("g")] == [1, 2]
    store.append("g", Record.make("signal", "s", "", {}))
    assert [r.seq for r in store.load("g")] == [1, 2, 3]
    path.write_bytes(good)


def corrupt_variants(line: bytes) -> dict[str, bytes]:
    body = line.rstrip(b"\n")
    flipped = body.replace(b'"p":"x"', b'"p":"y"')  # valid JSON, crc no longer matches
    return {
        "crc-mismatch": flipped + b"\n",
        "not-json": body[:20] + b"\n",
        "empty-line": b"\n",
        "not-an-object": b"[1,2,3]\n",
        "missing-keys": b'{"seq":2,"type":"step.started"}\n',
        "nul-filled": b"\0" * len(body) + b"\n",
    }


@pytest.mark.parametrize("variant", list(corrupt_variants(b'{"p":"x"}\n')))
def test_corrupt_middle_line_raises_with_its_line_and_leaves_the_file(
    store: FileStore, variant: str
):
    lines = fill(store, "c", 4)
    lines[1] = corrupt_variants(lines[1])[variant]
    data = b"".join(lines)
    store.path("c").write_bytes(data)
    with pytest.raises(CorruptJournalError) as e:
        store.load("c")
    assert e.value.run_id == "c" and e.value.line == 2
    assert "line 2" in str(e.value) and "'c'" in str(e.value)
    with pytest.raises(CorruptJournalError):
        store.append("c", Record.make("signal", "s", "", {}), check=lambda recs: None)
    assert store.path("c").read_bytes() == data


def test_seq_gap_and_repeat_are_corrupt(store: FileStore):
    lines = fill(store, "q", 4)
    store.path("q").write_bytes(lines[0] + lines[1] + lines[3])
    with pytest.raises(CorruptJournalError, match="seq 4 where 3 was due") as e:
        store.load("q")
    assert e.value.line == 3
    store.path("q").write_bytes(lines[0] + lines[1] + lines[1] + lines[2])
    with pytest.raises(CorruptJournalError) as e:
        store.load("q")
    assert e.value.line == 3


def test_append_refuses_when_the_last_complete_line_is_corrupt(store: FileStore):
    lines = fill(store, "l", 3)
    lines[-1] = corrupt_variants(lines[-1])["crc-mismatch"]
    data = b"".join(lines)
    store.path("l").write_bytes(data)
    with pytest.raises(CorruptJournalError) as e:
        store.append("l", Record.make("signal", "s", "", {}))
    assert e.value.line == 3
    assert store.path("l").read_bytes() == data


def test_check_refusal_writes_nothing_and_creates_nothing(store: FileStore):
    class No(Exception):
        pass

    def refuse(records: list[Record]) -> None:
        raise No

    with pytest.raises(No):
        store.append("new", Record.make("signal", "s", "", {}), check=refuse)
    assert not store.path("new").exists()
    fill(store, "old", 2)
    data = store.path("old").read_bytes()
    with pytest.raises(No):
        store.append("old", Record.make("signal", "s", "", {}), check=refuse)
    assert store.path("old").read_bytes() == data


def test_check_sees_the_current_records(store: FileStore):
    fill(store, "c", 3)
    seen = []
    store.append("c", Record.make("signal", "s", "", {}), check=lambda r: seen.extend(r))
    assert [r.seq for r in seen] == [1, 2, 3]


def test_data_that_is_not_plain_json_is_refused_before_writing(store: FileStore):
    fill(store, "j", 2)
    data = store.path("j").read_bytes()
    for bad in [float("nan"), {"s": "\ud800"}, {1, 2}]:
        with pytest.raises(StoreError, match="not plain JSON"):
            store.append("j", Record.make("signal", "s", "", bad))
    assert store.path("j").read_bytes() == data


def test_short_write_is_cut_back_and_raised(store: FileStore, monkeypatch: pytest.MonkeyPatch):
    fill(store, "w", 3)
    data = store.path("w").read_bytes()
    real = os.pwrite
    monkeypatch.setattr(os, "pwrite", lambda fd, b, off: real(fd, b[: len(b) // 2], off))
    with pytest.raises(StoreError, match="short write"):
        store.append("w", Record.make("signal", "s", "", {}))
    monkeypatch.undo()
    assert store.path("w").read_bytes() == data


def test_failed_write_is_cut_back_and_raised(store: FileStore, monkeypatch: pytest.MonkeyPatch):
    fill(store, "w", 3)
    data = store.path("w").read_bytes()

    real = os.pwrite

    def enospc(fd, b, off):
        real(fd, b[:5], off)  # the kernel may have taken some bytes before failing
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "pwrite", enospc)
    with pytest.raises(StoreError, match="No space left"):
        store.append("w", Record.make("signal", "s", "", {}))
    monkeypatch.undo()
    assert store.path("w").read_bytes() == data


def test_failed_fsync_raises_durability_error_once(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    fill(store, "f", 2)
    calls = []

    def eio(fd):
        calls.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", eio)
    with pytest.raises(DurabilityError, match="do not retry"):
        store.append("f", Record.make("signal", "s", "", {}))
    assert len(calls) == 1  # never retried: the kernel may have dropped the data


def test_a_symlinked_journal_is_refused(store: FileStore, tmp_path: Path):
    target = tmp_path / "elsewhere.jsonl"
    target.write_bytes(b"")
    os.symlink(target, store.path("s"))
    with pytest.raises(StoreError, match="symlink"):
        store.load("s")
    with pytest.raises(StoreError, match="symlink"):
        store.append("s", Record.make("run.started", data={"input": []}))
    assert target.read_bytes() == b""


def test_missing_store_is_a_clear_error_when_not_creating(tmp_path: Path):
    with pytest.raises(StoreError, match="no store at"):
        FileStore(tmp_path / "nope", create=False)
    (tmp_path / "file").write_text("")
    with pytest.raises(StoreError, match="not a directory"):
        FileStore(tmp_path / "file")


def test_run_ids_lists_journals_only(store: FileStore):
    fill(store, "b", 1)
    fill(store, "a", 1)
    (store.root / "notes.txt").write_text("")
    (store.root / ".hidden.jsonl").write_text("")
    assert store.run_ids() == ["a", "b"]


def test_load_since_returns_only_the_records_after_a_seq(store: FileStore):
    fill(store, "t", 3)
    assert [r.seq for r in store.load_since("t", 0)] == [1, 2, 3]
    assert [r.seq for r in store.load_since("t", 2)] == [3]
    with open(store.path("t"), "ab") as f:
        f.write(b'{"seq":4,"ty')  # torn: not yet acknowledged
    assert store.load_since("t", 3) == []
    store.append("t", Record.make("signal", "s", "", {}))
    assert [r.seq for r in store.load_since("t", 3)] == [4]
    assert [r.seq for r in store.load_since("t", 1)] == [2, 3, 4]  # not where it left off
    assert store.load_since("nobody", 0) == []


def test_load_since_reads_only_the_new_bytes_when_following(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    fill(store, "f", 50, payload="x" * 200)
    assert len(store.load_since("f", 0)) == 50
    store.append("f", Record.make("signal", "s", "", {}))
    reads: list[int] = []
    real = os.pread

    def spy(fd: int, n: int, offset: int) -> bytes:
        reads.append(n)
        return real(fd, n, offset)

    monkeypatch.setattr(os, "pread", spy)
    assert [r.seq for r in store.load_since("f", 50)] == [51]
    assert sum(reads) < 300  # the new line only, not the 12 KB before it


APPENDER = """
import sys
from durableagent import FileStore, Record
store = FileStore(sys.argv[1])
for i in range(int(sys.argv[3])):
    store.append("shared", Record.make("signal", sys.argv[2], "", {"i": i}))
"""


def test_two_processes_appending_500_each_lose_nothing(store: FileStore):
    procs = [
        subprocess.Popen([sys.executable, "-c", APPENDER, str(store.root), who, "500"])
        for who in ("p1", "p2")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    recs = store.load("shared")
    assert [r.seq for r in recs] == list(range(1, 1001))
    for who in ("p1", "p2"):
        assert [r.data["i"] for r in recs if r.step == who] == list(range(500))


def note(i: int) -> Record:
    return Record.make("signal", "s", "", {"i": i})


def test_a_summary_counts_the_records_another_process_appended_in_between(store: FileStore):
    """This process folds the runs it appends to as it goes; a record another process
    appended meanwhile must not be left out of that fold at this process's next append."""
    store.append("r", Record.make("run.started", data={"input": []}))
    store.append("r", note(1))
    other = subprocess.run(
        [sys.executable, "-c", APPENDER.replace("shared", "r"), str(store.root), "s", "2"]
    )
    assert other.returncode == 0
    store.append("r", note(4))
    assert [r.seq for r in store.load("r")] == [1, 2, 3, 4, 5]
    for reader in (store, FileStore(store.root)):
        (summary,) = reader.summaries()
        assert (summary.run_id, summary.signals, summary.last_seq) == ("r", 4, 5)


def test_a_run_imported_after_a_listing_is_listed(store: FileStore, tmp_path: Path):
    """The summary index remembers the last full listing of the store; a journal that
    import_run brings in (it writes no summary row) must still be listed after it."""
    store.append("old", Record.make("run.started", data={"input": []}))
    assert [s.run_id for s in store.summaries()] == ["old"]  # the index has its listing now
    source = FileStore(tmp_path / "source")
    source.append("new", Record.make("run.started", data={"input": []}))
    source.append("new", note(2))
    assert store.import_run("new", source.export_run("new"), source.attempts("new"))
    for reader in (store, FileStore(store.root)):
        listed = {s.run_id: s.signals for s in reader.summaries()}
        assert listed == {"new": 1, "old": 0}


def fsynced(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Spy on os.fsync: the paths it is called on, in order."""
    paths: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        paths.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    return paths


def test_creating_a_journal_fsyncs_it_then_its_folder(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    store.append("first", Record.make("run.started", data={"input": []}))  # makes the folders
    synced = fsynced(monkeypatch)
    store.append("new", Record.make("run.started", data={"input": []}))
    assert len(synced) == 2
    assert synced[0].startswith(str(store.root) + "/.new.jsonl.")  # the temp file, whole
    assert synced[1] == str(store.root)  # then the folder that now names it
    assert sorted(p.name for p in store.root.iterdir() if p.suffix == ".jsonl") == [
        "first.jsonl",
        "new.jsonl",
    ]


def test_failure_counts_are_replaced_through_an_fsynced_temp_file_and_folder(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    store.write_failures("r", {"failures": 1})
    synced = fsynced(monkeypatch)
    store.write_failures("r", {"failures": 2})
    where = str(store.root / ".worker")
    assert len(synced) == 2
    assert synced[0].startswith(where + "/.") and synced[0].endswith(".tmp")
    assert synced[1] == where


def test_an_outcome_is_fsynced_in_the_attempts_log(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    store.append("r", Record.make("run.started", data={"input": []}))
    synced = fsynced(monkeypatch)
    store.save_outcome("r", Outcome(Status.FAILED, error="new", seq=1))
    assert str(store.root / ".attempts" / "r.jsonl") in synced


@pytest.mark.parametrize("folder", [".attempts", ".worker"])
def test_a_store_file_write_that_fails_halfway_leaves_the_old_one_whole(
    store: FileStore, monkeypatch: pytest.MonkeyPatch, folder: str
):
    store.save_outcome("r", Outcome(Status.FAILED, error="old"))
    store.write_failures("r", {"failures": 1})
    real = os.write

    def half(fd: int, data) -> int:
        if len(data) > 8:
            return real(fd, bytes(data)[: len(data) // 2])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half)
    with pytest.raises(StoreError, match="No space left"):
        if folder == ".attempts":
            store.save_outcome("r", Outcome(Status.FAILED, error="new" * 100))
        else:
            store.write_failures("r", {"failures": 2, "error": "new" * 100})
    monkeypatch.undo()
    outcome = store.last_outcome("r")
    assert outcome is not None and outcome.error == "old"
    assert store.read_failures("r") == {"failures": 1}
    assert [p.name for p in (store.root / ".worker").iterdir()] == ["r.json"]


def test_a_summary_row_never_claims_more_than_the_journal_durably_holds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The row that says a run completed is written only once its run.completed is on disk:
    here its fsync fails, and the record is then lost as a crash would lose it. A listing
    (which never re-reads a completed run's journal) must not call the run completed."""
    store = FileStore(tmp_path / "runs")
    store.append("r", Record.make("run.started", data={"input": []}))
    before = store.path("r").read_bytes()
    answer = {"message": {"role": "assistant", "content": "done"}}

    def failing(fd: int) -> None:
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(os, "fsync", failing)
    with pytest.raises(DurabilityError):
        store.append("r", Record.make("run.completed", data=answer))
    monkeypatch.undo()
    store.path("r").write_bytes(before)  # what the disk kept
    (summary,) = FileStore(tmp_path / "runs").summaries()
    assert summary.status == "ready"
    assert summary.last_seq == 1


@given(
    step=st.text(max_size=30),
    data=st.dictionaries(st.text(max_size=8), st.text(max_size=20) | st.integers(), max_size=4),
    at=st.floats(allow_nan=False, allow_infinity=False) | st.integers(-(2**40), 2**40),
)
@settings(max_examples=200, deadline=None)
def test_the_fast_line_encoder_writes_the_bytes_json_would(step: str, data: dict, at: float):
    """encode_line's fast path (every append's) and the general one agree byte for byte."""
    from durableagent.record import _dumps, encode_line

    for kind, typ in (("tool", "step.completed"), ("", "signal"), ("model", "step.started")):
        record = Record(0, typ, step, kind, data, at)
        try:
            body = _dumps(
                {"seq": 7, "type": typ, "step": step, "kind": kind, "data": data, "at": at}
            ).encode()
        except UnicodeEncodeError:  # a lone surrogate: refused either way
            with pytest.raises(ValueError):
                encode_line(record, 7)
            continue
        want = body[:-1] + b',"crc":"%08x"}\n' % zlib.crc32(body)
        assert encode_line(record, 7) == want

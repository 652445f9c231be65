"""FileStore on disk: torn tails, corruption, faults, and concurrent appends."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import tempfile
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
from durableagent.stores.lines import SECTOR, zeroed_blocks

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


def test_a_zeroed_sector_inside_the_last_line_is_a_torn_tail(store: FileStore):
    """A power loss zero-filled a whole sector in the middle of the last write, and its later
    bytes (the newline too) reached the disk: the line was never acknowledged."""
    fill(store, "z", 7)
    path = store.path("z")
    data = path.read_bytes()
    head = b'{"seq":8,"type":"sig'
    pad = -(len(data) + len(head)) % SECTOR  # text up to a sector boundary, then one sector
    line = head + b"x" * pad + b"\0" * SECTOR + b'"}\n'
    assert (len(data) + len(head) + pad) % SECTOR == 0
    path.write_bytes(data + line)
    assert [r.seq for r in store.load("z")] == list(range(1, 8))
    fresh = FileStore(store.root)  # reads the journal's tail to find where to append
    assert fresh.append("z", Record.make("signal", "s", "", {})).seq == 8
    assert b"\0" not in path.read_bytes()
    assert [r.seq for r in store.load("z")] == list(range(1, 9))


def test_a_lone_nul_in_the_last_line_is_corruption_not_a_tear(store: FileStore):
    """One space flipped to NUL (0x20 -> 0x00) in an acknowledged last record: refused with
    its line, never dropped silently, and the file is left as it is."""
    fill(store, "a", 3, "an approval note")
    path = store.path("a")
    data = path.read_bytes()
    at = data.rindex(b"an approval note") + 2  # the space after "an"
    assert data[at : at + 1] == b" "
    damaged = data[:at] + b"\0" + data[at + 1 :]
    path.write_bytes(damaged)
    with pytest.raises(CorruptJournalError) as e:
        store.load("a")
    assert e.value.line == 3 and "crc mismatch" in e.value.reason
    with pytest.raises(CorruptJournalError):
        store.append("a", Record.make("signal", "s", "", {}))
    with pytest.raises(CorruptJournalError):
        store.load_since("a", 0)
    assert path.read_bytes() == damaged


def test_a_lone_nul_in_the_last_line_is_refused_by_the_cli(tmp_path: Path):
    store = FileStore(tmp_path / "runs")
    fill(store, "flip", 3, "an approval note")
    path = store.path("flip")
    data = path.read_bytes()
    at = data.rindex(b"an approval note") + 2
    path.write_bytes(data[:at] + b"\0" + data[at + 1 :])
    p = subprocess.run(
        [sys.executable, "-m", "durableagent.cli", "show", "flip", "--store", str(store.root)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr
    assert "journal of run 'flip' is corrupt at line 3: crc mismatch" in p.stderr


def block_shaped_zeros(data: st.DataObject, line_start: int, body: bytes) -> tuple[int, int]:
    """Where a power loss may zero part of a line that starts at ``line_start`` in the file:
    from the line's start or a sector boundary to a sector boundary or the line's end."""
    end = line_start + len(body)
    starts = [line_start, *range(line_start - line_start % SECTOR + SECTOR, end, SECTOR)]
    a = data.draw(st.sampled_from(starts), label="zeros from")
    ends = [*range(a - a % SECTOR + SECTOR, end, SECTOR), end]
    b = data.draw(st.sampled_from(ends), label="zeros to")
    return a - line_start, b - line_start


@given(data=st.data())
@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_zeroed_blocks_in_the_final_line_are_a_tear_and_anywhere_before_it_corruption(
    tmp_path: Path, data: st.DataObject
):
    """Where the zeros fall decides: a block a power loss zeroed inside the final line (its
    newline kept or not) means the line was never acknowledged, and it is cut off by the next
    append; NULs of the shape no power loss leaves (a short run between intact text), and NULs
    in any earlier line, are damage to an acknowledged record, reported with its line number,
    the file unchanged."""
    store = FileStore(tmp_path / "p")
    path = store.path("p")
    if not path.exists():
        fill(store, "p", 5, "payload " * 150)
    lines = path.read_bytes().splitlines(keepends=True)
    victim = data.draw(st.integers(0, len(lines) - 1), label="line")
    body = lines[victim][:-1]  # the zeros fall inside the line, its newline kept
    line_start = sum(len(x) for x in lines[:victim])
    final = victim == len(lines) - 1
    if final and data.draw(st.booleans(), label="a lost block"):
        start, stop = block_shaped_zeros(data, line_start, body)
    else:
        start = data.draw(st.integers(0, len(body) - 1), label="start")
        stop = start + data.draw(st.integers(1, len(body) - start), label="length")
    zeroed = body[:start] + b"\0" * (stop - start) + body[stop:]
    torn = final and zeroed_blocks(zeroed, line_start)
    damaged = list(lines)
    damaged[victim] = zeroed + b"\n"
    original = b"".join(lines)
    path.write_bytes(b"".join(damaged))
    try:
        if torn:
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


def test_the_shape_of_a_lost_block():
    """A run of NULs is a lost block when it reaches the end of the line, or runs from a
    sector boundary (or the line's start) to a sector boundary; never one byte inside text."""
    text = b"x" * 2000
    assert zeroed_blocks(text[:10] + b"\0" * 5, 0)  # to the end of the line
    assert zeroed_blocks(b"\0" * 502 + text[:10], 10)  # line start to a sector boundary
    assert zeroed_blocks(text[:502] + b"\0" * 512 + text[:10], 10)  # a whole sector inside
    assert not zeroed_blocks(text[:502] + b"\0" * 511 + text[:10], 10)  # ends short of it
    assert not zeroed_blocks(text[:501] + b"\0" + text[:10], 10)  # lone NUL up to a boundary
    assert not zeroed_blocks(text[:502] + b"\0" + text[:10], 10)  # lone NUL from a boundary
    assert not zeroed_blocks(text[:100] + b"\0" * 300 + text[:10], 0)  # between text


@given(
    note=st.text(st.sampled_from(" @ab\u00e9"), min_size=1, max_size=120),
    pad=st.integers(0, 2 * SECTOR),
    tail=st.integers(1, 300),
)
@settings(  # each example flips every bit of its last line: a few thousand loads
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_every_bit_flip_in_the_last_line_is_refused_or_loses_nothing(
    tmp_path: Path, note: str, pad: int, tail: int
):
    """Every single-bit flip of the last line (spaces and ``@`` flip to NUL): the load is
    refused with the last line's number, or it returns every record as written. Never an
    acknowledged record dropped in silence. And a NUL-filled tail of the same line (zeros
    from any point to its end) still loads as a torn tail."""
    store = FileStore(Path(tempfile.mkdtemp(dir=tmp_path)) / "runs")
    path = store.path("b")
    store.append("b", Record.make("run.started", data={"input": [], "pad": "p" * pad}))
    store.append("b", Record.make("signal", "s", "", {"note": note, "by": "ann@example.com"}))
    want = store.load("b")
    data = path.read_bytes()
    start = data.rindex(b"\n", 0, len(data) - 1) + 1
    last = len(want)
    for i in range(start, len(data)):
        for bit in range(8):
            flipped = bytearray(data)
            flipped[i] ^= 1 << bit
            path.write_bytes(bytes(flipped))
            try:
                got = store.load("b")
            except CorruptJournalError as e:
                assert e.line == last, (i, bit, e)
            else:
                assert got == want, (i, bit)
    body = len(data) - 1 - start
    cut = start + body - min(tail, body)
    path.write_bytes(data[:cut] + b"\0" * (len(data) - 1 - cut) + b"\n")
    assert store.load("b") == want[:-1]


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

"""The journal files of a FileStore: where each run's journal is, reading it whole, its lock,
and the seq of its last line read from its tail alone. What the store, its leases and its
summaries share of the journals, and nothing else of the store."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager

from ...errors import CorruptJournalError, StoreError
from ...ids import check_run_id
from ...record import LineError, Record, encode_line, line_seq
from ..lines import parse_lines, split_journal
from .fs import O_READ, StoreDir, count_lines, pread_all


class JournalFiles:
    """The journals in a store's root directory (``<root>/<run>.jsonl``)."""

    def __init__(self, sdir: StoreDir) -> None:
        self.dir = sdir
        self.prefix = sdir.prefix  # str paths: pathlib costs µs per append

    def path(self, run_id: str) -> str:
        """The journal of ``run_id`` (the id is checked first)."""
        return f"{self.prefix}{check_run_id(run_id)}.jsonl"

    def read(self, run_id: str) -> bytes | None:
        """The journal's bytes; None for a run without one."""
        path = self.path(run_id)
        try:
            fd = self.dir.open_regular(path, O_READ)
        except FileNotFoundError:
            return None
        try:
            return pread_all(fd, os.fstat(fd).st_size, 0)
        except OSError as e:
            raise StoreError(f"cannot read {path}: {e.strerror}") from None
        finally:
            os.close(fd)

    def load(self, run_id: str) -> list[Record]:
        """Every record, [] for an unknown run; a torn tail is ignored."""
        data = self.read(run_id)
        if data is None:
            return []
        lines, _ = split_journal(data)
        return parse_lines(run_id, lines)

    @contextmanager
    def locked(self, run_id: str) -> Iterator[bool]:
        """The journal's exclusive lock (the one every append takes), held for the block;
        yields False, locking nothing, for a run without a journal."""
        try:
            fd = self.dir.open_regular(self.path(run_id), O_READ)
        except (FileNotFoundError, StoreError):
            yield False
            return
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield True
        finally:
            os.close(fd)

    def next_seq(self, run_id: str) -> int:
        """The seq the next record will get (from the journal's tail)."""
        try:
            fd = self.dir.open_regular(self.path(run_id), O_READ)
        except FileNotFoundError:
            return 1
        try:
            return last_seq(run_id, fd, os.fstat(fd).st_size)[1] + 1
        finally:
            os.close(fd)


def last_seq(run_id: str, fd: int, size: int) -> tuple[int, int, bool]:
    """(length to keep, seq of the last complete line, whether that line lacks its newline)
    of the journal open at ``fd``, reading only the file's tail. The line it takes the seq
    from must be whole: CorruptJournalError names it otherwise."""
    chunk = 4096
    while True:
        start = max(0, size - chunk)
        buf = pread_all(fd, size - start, start)
        # Three newlines from the end give two whole lines: enough even when the last
        # complete one is a NUL-filled torn tail. Before that, the first piece may be cut.
        cut = len(buf)
        for _ in range(3):
            cut = buf.rfind(b"\n", 0, cut)
            if cut < 0:
                break
        if cut < 0 and start > 0:
            chunk *= 4
            continue
        begin = cut + 1  # 0 when the chunk holds the whole file
        lines, good = split_journal(buf[begin:], start + begin)
        keep = start + begin + good
        if not lines:
            return keep, 0, False
        newline = buf[begin + good - 1 : begin + good] != b"\n"
        try:
            seq = line_seq(lines[-1])
        except LineError as e:
            lineno = count_lines(fd, keep)
            raise CorruptJournalError(run_id, lineno, str(e)) from None
        return keep, seq, newline


def _encode(record: Record, seq: int) -> bytes:
    try:
        return encode_line(record, seq)
    except ValueError as e:
        raise StoreError(f"cannot record {record.type} {record.step!r}: {e}") from None


def encode_all(records: tuple[Record, ...], first: int) -> bytes:
    """The journal lines of ``records`` numbered from ``first`` (StoreError for a record
    that cannot be written: nothing of the batch is)."""
    if len(records) == 1:
        return _encode(records[0], first)
    return b"".join(_encode(r, seq) for seq, r in enumerate(records, first))


def stored_all(records: tuple[Record, ...], first: int) -> list[Record]:
    """``records`` as appended: numbered from ``first``."""
    return [
        Record(seq, r.type, r.step, r.kind, r.data, r.at) for seq, r in enumerate(records, first)
    ]

"""Journal lines in bulk: where a file's complete records end, and parsing them in order.

Shared by every store (a PostgresStore exports the same lines) and by ``agentrun copy``.
"""

from __future__ import annotations

from ..errors import CorruptJournalError
from ..record import LineError, Record, decode_line, is_whole_record


def split_journal(data: bytes) -> tuple[list[bytes], int]:
    """The complete lines of ``data`` and the byte length they span.

    A torn tail is left out: it was never acknowledged. That is the final line when it is
    a piece without its newline, unless the piece is a whole record whose crc matches (an
    fsynced record whose newline was lost or flipped: it is kept, and the next append writes
    the newline); or a final line that holds NUL bytes anywhere (a power loss can leave a
    zero-filled block in the middle of the last write, with later bytes of it on disk, its
    newline included). Only the final line can be torn: a NUL in any earlier line is not a
    tear, and that line is reported as corrupt when it is parsed.
    """
    lines = data.split(b"\n")
    piece = lines.pop()
    good = len(data) - len(piece)
    if piece:
        for whole in (piece, piece[:-1]):
            if is_whole_record(whole):
                lines.append(whole)
                return lines, good + len(whole)
        return lines, good  # the torn piece was the final line
    if lines and b"\0" in lines[-1]:
        good -= len(lines.pop()) + 1
    return lines, good


def parse_lines(
    run_id: str, lines: list[bytes], first_seq: int = 1, first_line: int = 1
) -> list[Record]:
    """Decode lines, checking crcs and that seqs count up from ``first_seq``."""
    records: list[Record] = []
    append = records.append
    expected = first_seq
    for lineno, line in enumerate(lines, first_line):
        try:
            rec = decode_line(line)
        except LineError as e:
            raise CorruptJournalError(run_id, lineno, str(e)) from None
        if rec.seq != expected:
            raise CorruptJournalError(run_id, lineno, f"seq {rec.seq} where {expected} was due")
        expected += 1
        append(rec)
    return records

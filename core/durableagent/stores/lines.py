"""Journal lines in bulk: where a file's complete records end, and parsing them in order.

Shared by every store (a PostgresStore exports the same lines) and by ``agentrun copy``.
"""

from __future__ import annotations

import re

from ..errors import CorruptJournalError
from ..record import LineError, Record, decode_line, is_whole_record

SECTOR = 512
"""The unit a power loss zeroes: a disk writes whole sectors (and a filesystem whole blocks,
made of sectors), so lost data reads back as NULs from a sector boundary to a sector
boundary, cut only by where the write began or ended."""

_NULS = re.compile(rb"\0+")


def split_journal(data: bytes, base: int = 0) -> tuple[list[bytes], int]:
    """The complete lines of ``data`` and the byte length they span. ``base`` is where
    ``data`` starts in the journal file (the sectors are counted from the file's start).

    A torn tail is left out: it was never acknowledged. That is the final line when it is
    a piece without its newline, unless the piece is a whole record whose crc matches (an
    fsynced record whose newline was lost or flipped: it is kept, and the next append writes
    the newline); or a final line whose NUL bytes are zero-filled blocks (see
    ``zeroed_blocks``: a power loss can zero a block in the middle of the last write, with
    later bytes of it on disk, its newline included). NULs of any other shape in the final
    line (a lone NUL between intact text: one flipped bit) are damage to a record that may
    have been acknowledged: the line is kept, and parsing reports it as corrupt. Only the
    final line can be torn: a NUL in any earlier line is reported as corrupt too.
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
        last = lines[-1]
        if zeroed_blocks(last, base + good - len(last) - 1):
            lines.pop()
            good -= len(last) + 1
    return lines, good


def zeroed_blocks(line: bytes, offset: int) -> bool:
    """True when every run of NULs in ``line`` (which starts at ``offset`` in the file) has
    the shape a power loss leaves: it reaches the end of the line, or it ends on a sector
    boundary having begun on one (or at the line's start). A lone NUL or a short run
    between intact text is not a lost block: it is a flipped bit or other damage."""
    end = len(line)
    for m in _NULS.finditer(line):
        a, b = m.span()
        if b == end:
            continue
        if (offset + b) % SECTOR == 0 and (a == 0 or (offset + a) % SECTOR == 0):
            continue
        return False
    return True


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

"""Moving runs between stores (``agentrun copy``, ``copy --move``) on the PostgreSQL side: a
run's journal lines exported exactly as stored, and a whole run imported (its lines, its
attempts, its summary) in one transaction, refused over a run that holds other records."""

from __future__ import annotations

import psycopg
from psycopg.types.json import Jsonb

from ...errors import RunConflictError
from ..lines import parse_lines
from ..protocol import Attempt
from .append import dumps, fold_of, lines_of, row_of, summary_args
from .attempts import attempt_args
from .connector import LOST, Connector
from .sql import QUERIES
from .sql import bound as _q


def export_run(db: Connector, run_id: str) -> list[bytes]:
    """The run's journal lines exactly as stored (without newlines), every crc and seq
    checked (CorruptJournalError names the first bad line); [] for an unknown run."""
    args = {"run_id": run_id}
    lines = db.read("exporting a run", lambda c: lines_of(c, "load", args))
    parse_lines(run_id, lines)
    return lines


def import_run(
    db: Connector, channel: str, run_id: str, lines: list[bytes], attempts: list[Attempt]
) -> bool:
    """Add a whole run in one transaction, and NOTIFY it on ``channel``. False when the store
    already holds exactly these lines (nothing changes); RunConflictError when it holds the
    run with other records."""
    records = parse_lines(run_id, lines)
    if not records:
        return False
    outcome = next((a.outcome for a in reversed(attempts) if a.outcome), None)
    f = fold_of(records)
    try:
        with db.connection() as conn, conn.transaction():
            last_seq = row_of(conn.execute(*_q("lock_state", {"run_id": run_id})))[0]
            if last_seq:
                there = lines_of(conn, "load", {"run_id": run_id})
                if there == lines:
                    return False
                raise RunConflictError(run_id, db.description, len(there), len(lines))
            with conn.cursor() as cur:
                record = QUERIES["import_record"]
                cur.executemany(
                    record.sql,
                    [
                        record.values({"run_id": run_id, "seq": r.seq, "line": line})
                        for r, line in zip(records, lines, strict=True)
                    ],
                )
                cur.execute(*_q("clear_attempts", {"run_id": run_id}))
                attempt = QUERIES["import_attempt"]
                cur.executemany(
                    attempt.sql, [attempt.values(attempt_args(run_id, a)) for a in attempts]
                )
                cur.execute(
                    *_q(
                        "import_run",
                        {
                            "run_id": run_id,
                            "last_seq": records[-1].seq,
                            "fold": dumps(f.to_json()),
                            "outcome": None if outcome is None else Jsonb(outcome.to_dict()),
                            "epoch": max((a.epoch for a in attempts), default=0),
                            **summary_args(run_id, f, outcome),
                        },
                    )
                )
                cur.execute(*_q("notify", {"channel": channel, "run_id": run_id}))
    except LOST as e:
        raise db.unavailable(f"importing run {run_id!r}", e) from None
    except psycopg.Error as e:
        raise db.failed(f"importing run {run_id!r}", e) from None
    return True

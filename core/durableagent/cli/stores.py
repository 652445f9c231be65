"""The store commands: ``export`` (a run's journal as JSONL) and ``copy`` (every run from one
store to another: a directory and a PostgreSQL URL alike)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..errors import CorruptJournalError, RunConflictError
from ..ids import check_run_id
from ..stores import Attempt, Store, open_store
from .common import Parents, Refused, clean, describe, no_run, store_of


def cmd_export(args: argparse.Namespace) -> int:
    """Write one run's journal to stdout, byte for byte the lines a FileStore holds (from
    either store), every crc checked."""
    store = store_of(args)
    check_run_id(args.run)
    lines = store.export_run(args.run)
    if not lines:
        raise no_run(args.run, store)
    out = sys.stdout.buffer
    out.write(b"".join(line + b"\n" for line in lines))
    out.flush()
    return 0


def cmd_copy(args: argparse.Namespace) -> int:
    """Copy every run of SRC (its journal and attempts) into DST. A run already in DST with
    the same records is left as it is; one with other records, or whose journal does not
    load in SRC, is refused by name and the others are copied."""
    src = open_store(args.src, create=False)
    dst = open_store(args.dst, create=True)
    copied = same = 0
    refused: list[str] = []
    for run_id in src.run_ids():
        try:
            if copy_run(src, dst, run_id):
                copied += 1
            else:
                same += 1
        except (CorruptJournalError, RunConflictError, Refused) as e:
            print(f"agentrun copy: {clean(e)}", file=sys.stderr)
            refused.append(run_id)
    print(
        f"copied {copied} run(s) from {describe(src)} to {describe(dst)}; {same} already there"
        + (f"; {len(refused)} refused: {', '.join(refused)}" if refused else "")
    )
    return 1 if refused else 0


def copy_run(src: Store, dst: Store, run_id: str) -> bool:
    """Copy one run; False when DST already held exactly it."""
    if src.is_leased(run_id):
        raise Refused(f"run {run_id!r} is being executed in {describe(src)}; copy it once it stops")
    lines = src.export_run(run_id)  # every crc and seq checked
    attempts = with_legacy_outcome(src, run_id, src.attempts(run_id))
    added = dst.import_run(run_id, lines, attempts)
    if added and dst.export_run(run_id) != lines:
        raise Refused(f"run {run_id!r} did not read back from {describe(dst)} as copied")
    return added


def with_legacy_outcome(store: Store, run_id: str, attempts: list[Attempt]) -> list[Attempt]:
    """The attempts, plus the run's last outcome as an attempt of its own when no attempt
    carries it (a FileStore written before attempts were logged kept it beside them)."""
    outcome = store.last_outcome(run_id)
    if outcome is None or any(a.outcome is not None for a in attempts):
        return attempts
    epoch = max((a.epoch for a in attempts), default=0)
    legacy = Attempt(
        number=len(attempts) + 1,
        owner="",
        epoch=epoch,
        started_at=None,
        first_seq=0,
        last_seq=outcome.seq,
        ended=str(outcome.status),
        outcome=outcome,
    )
    return [*attempts, legacy]


def register(sub: Any, parents: Parents) -> None:
    """Add export and copy to the subcommands."""
    s = sub.add_parser(
        "export",
        parents=[parents.store],
        help="a run's journal as JSONL on stdout",
        description=(
            "Write RUN's journal to stdout: the JSONL lines a FileStore holds, byte for byte, "
            "whichever store it is in. Every line's crc is checked."
        ),
    )
    s.add_argument("run", metavar="RUN")
    s.set_defaults(fn=cmd_export)

    s = sub.add_parser(
        "copy",
        help="copy every run from one store to another",
        description=(
            "Copy every run of SRC (journal and attempts) into DST; each is a directory or a "
            "postgresql:// URL. Every crc is checked; copying again changes nothing. A run "
            "already in DST with other records is refused by name (exit 1), the rest copied."
        ),
    )
    s.add_argument("src", metavar="SRC", help="the store to copy from")
    s.add_argument("dst", metavar="DST", help="the store to copy into (created if needed)")
    s.set_defaults(fn=cmd_copy)

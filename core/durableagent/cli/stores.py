"""The store commands: ``export`` (a run's journal as JSONL) and ``copy`` (every run from one
store to another: a directory and a PostgreSQL URL alike)."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from ..copying import CopyError, copy_run
from ..errors import CorruptJournalError, RunConflictError, SignalError
from ..ids import check_run_id
from ..stores import open_store
from .common import Parents, clean, describe, no_run, store_of


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
    """Copy every finished run of SRC (its journal and attempts) into DST, or with --move every
    run. A run already in DST with the same records is left as it is; one with other records,
    one that cannot move, or whose journal does not load in SRC, is refused by name and the
    others are copied."""
    src = open_store(args.src, create=False)
    dst = open_store(args.dst, create=True)
    copied = same = 0
    refused: list[str] = []
    for run_id in src.run_ids():
        try:
            if copy_run(
                src, dst, run_id, move=args.move, by=args.by, reason=args.reason, wait=args.wait
            ):
                copied += 1
            else:
                same += 1
        except (CorruptJournalError, RunConflictError, CopyError, SignalError) as e:
            print(f"agentrun copy: {clean(e)}", file=sys.stderr)
            refused.append(run_id)
    what = "moved" if args.move else "copied"
    print(
        f"{what} {copied} run(s) from {describe(src)} to {describe(dst)}; {same} already there"
        + (f"; {len(refused)} refused: {', '.join(refused)}" if refused else "")
    )
    return 1 if refused else 0


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
        parents=[parents.by],
        help="copy the finished runs (or, with --move, every run) from one store to another",
        description=(
            "Copy every finished run (completed, cancelled) of SRC (journal and attempts) "
            "into DST; each is a "
            "directory or a postgresql:// URL. Every crc is checked; copying again changes "
            "nothing. A run that can still move is refused (copied, it would be live in both "
            "stores and run twice) unless --move: then a move signal stops it in SRC (no "
            "worker there starts an attempt or a step of it), it is copied once its lease is "
            "free, and it shows as moved in SRC. A move cut short is finished by running it "
            "again. A run already in DST with other records is refused by name (exit 1)."
        ),
    )
    s.add_argument("src", metavar="SRC", help="the store to copy from")
    s.add_argument("dst", metavar="DST", help="the store to copy into (created if needed)")
    s.add_argument("--move", action="store_true", help="move every run, finished or not, into DST")
    s.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a move waits for an attempt in flight to stop (default 30)",
    )
    s.set_defaults(fn=cmd_copy)

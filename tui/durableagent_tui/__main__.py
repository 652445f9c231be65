"""``python -m durableagent_tui --store DIR [--read-only] [--poll]``."""

from __future__ import annotations

import argparse
import os
import sys

from . import run_tui


def main(argv: list[str] | None = None) -> int:
    """Parse the arguments and run the supervisor."""
    parser = argparse.ArgumentParser(prog="python -m durableagent_tui", description=__doc__)
    parser.add_argument(
        "--store",
        default=os.environ.get("AGENTRUN_STORE", "runs"),
        help="the store: a directory or a postgresql:// URL (default $AGENTRUN_STORE, else ./runs)",
    )
    parser.add_argument("--read-only", action="store_true", help="hide every action")
    parser.add_argument("--poll", action="store_true", help="poll instead of file events")
    args = parser.parse_args(argv)
    from durableagent import open_store

    return run_tui(open_store(args.store, create=False), read_only=args.read_only, poll=args.poll)


if __name__ == "__main__":
    sys.exit(main())

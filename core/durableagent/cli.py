"""agentrun: the command line (filled in by the worker/CLI issue)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    print("agentrun: not built yet", file=sys.stderr)
    return 2

"""``python -m durableagent.demo --crash-run STORE RUN TOOL``: the child process the demo
store's builder kills inside TOOL (see build.py)."""

from __future__ import annotations

import sys
from pathlib import Path

from .build import crash_child

if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--crash-run":
        crash_child(Path(sys.argv[2]), sys.argv[3], sys.argv[4])
    else:
        print("usage: python -m durableagent.demo --crash-run STORE RUN TOOL", file=sys.stderr)
        sys.exit(2)

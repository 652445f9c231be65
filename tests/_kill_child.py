"""A worker process for the kill test: one attempt of run a1, maybe SIGKILLed inside a tool.

usage: python _kill_child.py STORE SIDE KILL_IN [OWNER]   (KILL_IN: read, write or none)
STORE is what ``open_store`` takes (a directory or a postgresql:// URL); OWNER names this
worker in the lease, as a worker on another host would be named.
Prints the outcome as JSON on a clean finish.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from durableagent import open_store, run
from helpdesk import INPUT, Side, helpdesk


def main() -> None:
    # A short lease: on PostgreSQL a killed holder's lease is free only once its ttl passes.
    store = open_store(sys.argv[1], lease_ttl=1.0)
    side, kill_in = Side(Path(sys.argv[2])), sys.argv[3]
    owner = sys.argv[4] if len(sys.argv) > 4 else None
    config, _ = helpdesk(store, side, kill_in=kill_in)
    outcome = asyncio.run(run(config, "a1", INPUT, owner=owner))
    print(json.dumps(outcome.to_dict()))


if __name__ == "__main__":
    main()

"""A worker SIGKILLed while three MCP calls are inside a real MCP server (stdio, the worker's
child): the read is run again, the idempotent write is run again with the same key and the
server performs it once, and the other write leaves its run indeterminate.

Real processes: ``agentrun worker --agent _child_agents:mcp_helpdesk``, whose agent starts
``_mcp_server.py`` over stdio; the server counts every call and every effect on disk, and
holds each first call open (its effect done) until the worker is dead.
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest
from mcp_support import keys, kill_servers, lines
from procs import WorkerProcess, wait_for

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent.journal import idempotency_key

pytestmark = pytest.mark.slow

RUNS = {"r-read": "read", "r-idem": "idempotent", "r-write": "write"}
STEPS = {
    "r-read": "tool/1/0/lookup",
    "r-idem": "tool/1/0/file_ticket",
    "r-write": "tool/1/0/send_note",
}


def test_a_worker_killed_inside_mcp_calls(
    store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    server = store.root / ".mcp"
    server.mkdir(parents=True)
    for tool in ("lookup", "file_ticket", "send_note"):
        (server / f"hold-{tool}").touch()
    for run_id, request in RUNS.items():
        submit(store, run_id, [Message("user", request)])
    try:
        first = workers(store.root, "mcp_helpdesk")
        wait_for(
            lambda: all(
                (server / f"inside-{t}").exists() for t in ("lookup", "file_ticket", "send_note")
            ),
            60,
            "the three calls to be inside the server",
        )
        first.kill()
        assert first.proc.returncode == -signal.SIGKILL
        # Each call started, and the two writes did what they do, before the kill.
        assert sorted(lines(server, "effects")) == sorted(
            [f"file_ticket {key(store, 'r-idem')}", f"send_note {key(store, 'r-write')}"]
        )
        status = {r: view_store(store, r).status for r in RUNS}
        assert status == {
            "r-read": RunStatus.READY,  # a read: run it again
            "r-idem": RunStatus.READY,  # idempotent: run it again, with its key
            "r-write": RunStatus.INDETERMINATE,  # it may have happened (it did): a human says
        }

        second = workers(store.root, "mcp_helpdesk")
        wait_for(
            lambda: all(
                view_store(store, r).status == RunStatus.COMPLETED for r in ("r-read", "r-idem")
            ),
            60,
            "the read and the idempotent write to complete",
        )
        assert second.stop(signal.SIGTERM) == 0, second.log.read_text()
    finally:
        kill_servers(server)

    # The server saw each re-run step's key twice, the same key, and filed one ticket.
    assert keys(server, "lookup") == [key(store, "r-read")] * 2
    assert keys(server, "file_ticket") == [key(store, "r-idem")] * 2
    assert len(lines(server, "tickets")) == 1
    assert view_store(store, "r-idem").answer.content == "TICKET-1"  # type: ignore[union-attr]
    # The write was not run again: it waits for a human.
    assert keys(server, "send_note") == [key(store, "r-write")]
    assert view_store(store, "r-write").status == RunStatus.INDETERMINATE
    assert [e.split()[0] for e in lines(server, "effects")].count("file_ticket") == 1


def key(store: FileStore, run_id: str) -> str:
    return idempotency_key(run_id, STEPS[run_id], store.load(run_id)[0])

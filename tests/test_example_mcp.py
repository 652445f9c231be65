"""examples/helpdesk_mcp.py, unchanged: the demo's MCP ticket server over stdio and the local
OpenAI-compatible server, run by ``agentrun worker --agent examples.helpdesk_mcp:agent``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM
from procs import wait_for

from durableagent import FileStore, Message, RunStatus, signal, submit, view_store

REPO = Path(__file__).resolve().parent.parent
AGENTRUN = (sys.executable, "-m", "durableagent.cli")
WORKER_ARGS = ("--agent", "examples.helpdesk_mcp:agent", "--rescan", "0.5")


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


def test_the_mcp_example_runs_in_a_worker(fake: FakeLLM, store: FileStore, tmp_path: Path) -> None:
    env = dict(os.environ)
    env.pop("AGENTRUN_STORE", None)
    env.update(OPENAI_BASE_URL=fake.openai_url, OPENAI_API_KEY="sk-local", AGENTRUN_MODEL="t")
    submit(store, "h1", [Message("user", "I need access to the billing dashboard.")])
    with open(tmp_path / "worker.log", "w") as log:
        worker = subprocess.Popen(
            [*AGENTRUN, "worker", *WORKER_ARGS, "--store", str(store.root)],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        wait_for(lambda: bool(view_store(store, "h1").pending), 60, "the ticket's approval")
        (pending,) = view_store(store, "h1").pending
        assert pending.tool == "create_ticket"
        assert pending.policy.startswith("idempotent write, needs approval · class from override")
        signal(store, "h1", "approve", {"marker": pending.marker}, by="alice")
        wait_for(lambda: view_store(store, "h1").status == RunStatus.COMPLETED, 60, "the answer")
    finally:
        worker.terminate()
        assert worker.wait(20) == 0, (tmp_path / "worker.log").read_text()
    answer = view_store(store, "h1").answer
    assert answer is not None and answer.content == "Ticket filed: TICKET-1"
    (ticket,) = json.loads((store.root / ".demo" / "tickets.json").read_text())
    assert ticket["key"].startswith("h1:") and ticket["key"].endswith(":tool/2/0/create_ticket")
    # The model was offered the server's tools with their schemas, next to lookup_policy.
    offered = {t["function"]["name"] for t in fake.requests[0].body["tools"]}
    assert offered == {"lookup_policy", "create_ticket", "get_ticket"}

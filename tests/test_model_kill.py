"""A worker SIGKILLed while OpenAIModel waits for the model: the next worker makes that call
again, repeats no completed call, and the ticket is filed once.

Real processes and a real socket: ``agentrun worker --agent examples.helpdesk_openai:agent``
run from the repository's root, talking to the local OpenAI-compatible server, which holds
back its answer to the third model call until the worker is dead.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fake_llm import FakeLLM
from procs import wait_for

from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent import signal as send_signal
from durableagent.record import STEP_COMPLETED, STEP_STARTED

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


class Worker:
    """``agentrun worker --agent examples.helpdesk_openai:agent`` in the repository's root."""

    def __init__(self, root: Path, fake: FakeLLM, log: Path) -> None:
        env = dict(os.environ)
        env.pop("AGENTRUN_STORE", None)
        env.update(
            OPENAI_BASE_URL=fake.openai_url, OPENAI_API_KEY="sk-local", AGENTRUN_MODEL="fake"
        )
        self.log = log
        with open(log, "w") as err:
            self.proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "durableagent.cli",
                    "worker",
                    "--agent",
                    "examples.helpdesk_openai:agent",
                    "--store",
                    str(root),
                    "--rescan",
                    "0.5",
                ],
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def end(self, sig: int) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(15)


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


def tickets(store: FileStore) -> list[dict[str, object]]:
    path = store.root / ".helpdesk" / "tickets.json"
    return json.loads(path.read_text()) if path.exists() else []


def test_a_worker_killed_during_a_model_call_resumes_and_repeats_only_that_call(
    fake: FakeLLM, store: FileStore, tmp_path: Path
) -> None:
    submit(store, "h1", [Message("user", "I need access to the billing dashboard.")])
    fake.hold(3)  # the answer after the ticket: held until the worker is dead
    first = Worker(store.root, fake, tmp_path / "first.log")
    try:
        wait_for(
            lambda: view_store(store, "h1").status == RunStatus.AWAITING_APPROVAL,
            20,
            "the ticket to wait for approval",
        )
        (pending,) = view_store(store, "h1").pending
        send_signal(store, "h1", "approve", {"marker": pending.marker}, by="alice")
        assert fake.held.wait(20), (first.log.read_text(), fake.turns())
        # The third model call is on the wire and the ticket is filed and recorded; the call
        # is slow, so its start shows while it runs.
        assert len(tickets(store)) == 1
        wait_for(
            lambda: (
                (store.load("h1")[-1].type, store.load("h1")[-1].step) == (STEP_STARTED, "llm/3")
            ),
            20,
            "the held call's start to show",
        )
        assert first.end(signal.SIGKILL) == -signal.SIGKILL
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
            first.proc.wait()
    fake.release()

    records = store.load("h1")
    assert (records[-1].type, records[-1].step) == (STEP_STARTED, "llm/3")
    assert view_store(store, "h1").status == RunStatus.READY  # a read: nothing for a human

    second = Worker(store.root, fake, tmp_path / "second.log")
    try:
        wait_for(
            lambda: view_store(store, "h1").status == RunStatus.COMPLETED,
            20,
            "the resumed run to complete",
        )
    finally:
        assert second.end(signal.SIGTERM) == 0, second.log.read_text()

    # Turn 3 was asked twice (the killed call, then again); no completed call was repeated.
    assert fake.turns() == {1: 1, 2: 1, 3: 2}
    assert len(tickets(store)) == 1
    view = view_store(store, "h1")
    assert view.answer is not None and view.answer.content == "Ticket filed: TICKET-1"
    llm3 = [r.type for r in store.load("h1") if r.step == "llm/3"]
    assert llm3 == [STEP_STARTED, STEP_STARTED, STEP_COMPLETED]
    assert view.tokens is not None and view.tokens.input == 100 + 200 + 300

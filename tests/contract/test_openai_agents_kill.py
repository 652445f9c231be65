"""An OpenAI Agents SDK agent (durableagent.integrations.openai_agents) under real ``agentrun
worker`` processes and SIGKILL, on every store, its model the SDK's OpenAIChatCompletionsModel
through the official openai client at the local OpenAI-compatible server over a real socket:
killed inside a read, the read runs again and the model is not asked again; killed inside a
write, the run is indeterminate until a human reconciles it; approve, deny and reconcile go
through the CLI. Every count comes from the effects the tools write to files
(tests/_openai_agents.py), or from the model server's own log, never from the journal."""

from __future__ import annotations

import signal as sig
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _openai_agents import lines
from fake_llm import FakeLLM
from procs import WorkerProcess, child_env, wait_for

from durableagent import Message, RunStatus, Store, submit, view_store

pytestmark = pytest.mark.slow

PROMPT = [Message("user", "I cannot reach the billing dashboard")]
WAIT = 90.0  # seconds: generous, for a loaded machine; every wait ends at its event


def agentrun(spec: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The CLI, as a human on call types it."""
    return subprocess.run(
        [sys.executable, "-m", "durableagent.cli", *args, "--store", spec, "--by", "oncall"],
        capture_output=True,
        text=True,
        timeout=120,
        env=child_env(),
    )


def status_is(store: Store, run_id: str, status: RunStatus) -> Callable[[], bool]:
    return lambda: view_store(store, run_id).status == status


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


@pytest.fixture
def start(
    store_spec: str, tmp_path: Path, fake: FakeLLM, workers: Callable[..., WorkerProcess]
) -> Iterator[Callable[..., WorkerProcess]]:
    """A worker of the store running ``_openai_agents:helpdesk``; its effects in tmp/side."""

    def go(hang: str = "") -> WorkerProcess:
        return workers(
            store_spec,
            "_openai_agents:helpdesk",
            "--lease-ttl",
            "2",
            OA_SIDE=str(tmp_path / "side"),
            OA_HANG=hang,
            OPENAI_BASE_URL=fake.openai_url,
        )

    yield go


def test_killed_inside_a_read_then_inside_a_write_then_reconciled_through_the_cli(
    any_store: Store,
    store_spec: str,
    tmp_path: Path,
    fake: FakeLLM,
    start: Callable[..., WorkerProcess],
) -> None:
    store, side = any_store, tmp_path / "side"
    submit(store, "o1", PROMPT)

    # Killed inside lookup_policy (a read), after llm/1 was recorded.
    first = start(hang="lookup_policy")
    wait_for(lambda: lines(side, "inside") == ["lookup_policy"], WAIT, "the read to hang")
    first.stop(sig.SIGKILL)
    wait_for(lambda: not store.is_leased("o1"), WAIT, "the killed worker's lease")
    assert view_store(store, "o1").status == RunStatus.READY  # a read: nothing for a human
    assert fake.turns() == {1: 1}

    # The read runs again, the model is not asked again for turn 1; the write waits.
    second = start()
    wait_for(status_is(store, "o1", RunStatus.AWAITING_APPROVAL), WAIT, "the ticket to wait")
    assert fake.turns() == {1: 1, 2: 1}
    assert lines(side, "lookup") == ["billing:tool/1/0/lookup_policy"] * 2
    (pending,) = view_store(store, "o1").pending
    assert pending.step == "tool/2/0/create_ticket"
    assert pending.arguments == {
        "summary": "billing dashboard access",
        "requester": "alex@example.com",
    }
    second.stop()

    # Approved through the CLI; killed inside create_ticket, after the ticket was filed.
    approved = agentrun(store_spec, "approve", "o1", pending.marker)
    assert approved.returncode == 0, approved.stderr
    third = start(hang="create_ticket")
    wait_for(lambda: lines(side, "inside")[-1:] == ["create_ticket"], WAIT, "the write to hang")
    third.stop(sig.SIGKILL)
    wait_for(lambda: not store.is_leased("o1"), WAIT, "the killed worker's lease")
    assert len(lines(side, "tickets")) == 1

    # The next worker refuses to guess.
    fourth = start()
    wait_for(status_is(store, "o1", RunStatus.INDETERMINATE), WAIT, "the run to stop in doubt")
    assert len(lines(side, "tickets")) == 1 and fake.turns() == {1: 1, 2: 1}

    # The human says what happened; the model reads exactly that as the tool's return.
    done = agentrun(store_spec, "reconcile", "o1", "tool/2/0/create_ticket", "--done", "T-77")
    assert done.returncode == 0, done.stderr
    wait_for(status_is(store, "o1", RunStatus.COMPLETED), WAIT, "the run to complete")
    fourth.stop()
    assert len(lines(side, "tickets")) == 1
    assert fake.turns() == {1: 1, 2: 1, 3: 1}
    assert fake.requests[-1].tool_results == ["policy for billing", "T-77"]
    answer = view_store(store, "o1").answer
    assert answer is not None and answer.content == "Ticket filed: T-77"
    # Instructions and tools reached the model on every request, the resumed ones too.
    for r in fake.requests:
        assert r.body["messages"][0] == {"role": "system", "content": "Be brief."}
        assert sorted(t["function"]["name"] for t in r.body["tools"]) == [
            "create_ticket",
            "lookup_policy",
        ]
    # The idempotency key the write was given is the step's, the same on every attempt.
    (ticket,) = lines(side, "tickets")
    assert ticket.startswith("billing dashboard access:o1:")
    assert ticket.endswith(":tool/2/0/create_ticket")
    model = next(s for s in view_store(store, "o1").steps if s.name == "llm/1")
    assert (model.result["model"], model.result["agent"]) == ("fake-model", "helpdesk")
    assert model.result["usage"] == {"input_tokens": 100, "output_tokens": 11}


def test_a_deny_through_the_cli_reaches_the_model_as_the_sdks_rejection(
    any_store: Store,
    store_spec: str,
    tmp_path: Path,
    fake: FakeLLM,
    start: Callable[..., WorkerProcess],
) -> None:
    store, side = any_store, tmp_path / "side"
    submit(store, "o2", PROMPT)
    worker = start()
    wait_for(status_is(store, "o2", RunStatus.AWAITING_APPROVAL), WAIT, "the ticket to wait")
    (pending,) = view_store(store, "o2").pending
    denied = agentrun(store_spec, "deny", "o2", pending.marker, "--reason", "not today")
    assert denied.returncode == 0, denied.stderr
    wait_for(status_is(store, "o2", RunStatus.COMPLETED), WAIT, "the run to complete")
    worker.stop()
    assert lines(side, "tickets") == []
    assert fake.requests[-1].tool_results == ["policy for billing", "denied by oncall: not today"]
    assert fake.turns() == {1: 1, 2: 1, 3: 1}


def test_killed_waiting_for_the_model_asks_only_that_turn_again(
    any_store: Store,
    store_spec: str,
    tmp_path: Path,
    fake: FakeLLM,
    start: Callable[..., WorkerProcess],
) -> None:
    store, side = any_store, tmp_path / "side"
    submit(store, "o3", PROMPT)
    fake.hold(2)  # the reply after lookup_policy: held until the worker is dead
    first = start()
    assert fake.held.wait(WAIT), first.log.read_text()
    first.stop(sig.SIGKILL)
    fake.release()
    wait_for(lambda: not store.is_leased("o3"), WAIT, "the killed worker's lease")
    assert fake.turns() == {1: 1, 2: 1}
    assert lines(side, "lookup") == ["billing:tool/1/0/lookup_policy"]

    second = start()
    wait_for(status_is(store, "o3", RunStatus.AWAITING_APPROVAL), WAIT, "the ticket to wait")
    assert fake.turns() == {1: 1, 2: 2}  # turn 1 replayed; only the lost turn asked again
    assert lines(side, "lookup") == ["billing:tool/1/0/lookup_policy"]  # recorded before
    second.stop()

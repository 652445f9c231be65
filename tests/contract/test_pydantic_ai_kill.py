"""A Pydantic AI agent (durableagent.integrations.pydantic_ai) under real ``agentrun worker``
processes and SIGKILL, on every store: killed inside a read, the read runs again and the model
is not asked again; killed inside a write, the run is indeterminate until a human reconciles
it; approve, deny and reconcile go through the CLI. Every count comes from the effects the
agent's model and tools write to files (tests/_pydantic_agents.py), or from the model
server's own log, never from the journal."""

from __future__ import annotations

import signal as sig
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from _pydantic_agents import lines
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
def start(
    store_spec: str, tmp_path: Path, workers: Callable[..., WorkerProcess]
) -> Iterator[Callable[..., WorkerProcess]]:
    """A worker of the store running ``_pydantic_agents:NAME``; its effects in tmp/side."""

    def go(agent: str, hang: str = "", **env: str) -> WorkerProcess:
        return workers(
            store_spec,
            f"_pydantic_agents:{agent}",
            "--lease-ttl",
            "2",
            PYD_SIDE=str(tmp_path / "side"),
            PYD_HANG=hang,
            **env,
        )

    yield go


def test_killed_inside_a_read_then_inside_a_write_then_reconciled_through_the_cli(
    any_store: Store, store_spec: str, tmp_path: Path, start: Callable[..., WorkerProcess]
) -> None:
    store, side = any_store, tmp_path / "side"
    submit(store, "p1", PROMPT)

    # Killed inside lookup (a read), after llm/1 was recorded.
    first = start("functional", hang="lookup")
    wait_for(lambda: lines(side, "inside") == ["lookup"], WAIT, "the read to hang")
    first.stop(sig.SIGKILL)
    wait_for(lambda: not store.is_leased("p1"), WAIT, "the killed worker's lease")
    assert view_store(store, "p1").status == RunStatus.READY  # a read: nothing for a human

    # The read runs again, the model is not asked again for turn 1; the write waits.
    second = start("functional")
    wait_for(status_is(store, "p1", RunStatus.AWAITING_APPROVAL), WAIT, "the ticket to wait")
    assert lines(side, "model") == ["1", "2"]
    assert lines(side, "lookup") == ["billing:tool/1/0/lookup"] * 2
    (pending,) = view_store(store, "p1").pending
    assert (pending.step, pending.arguments) == ("tool/2/0/create_ticket", {"summary": "billing"})
    second.stop()

    # Approved through the CLI; killed inside create_ticket, after the ticket was filed.
    approved = agentrun(store_spec, "approve", "p1", pending.marker)
    assert approved.returncode == 0, approved.stderr
    third = start("functional", hang="create_ticket")
    wait_for(lambda: lines(side, "inside")[-1:] == ["create_ticket"], WAIT, "the write to hang")
    third.stop(sig.SIGKILL)
    wait_for(lambda: not store.is_leased("p1"), WAIT, "the killed worker's lease")
    assert len(lines(side, "tickets")) == 1

    # The next worker refuses to guess.
    fourth = start("functional")
    wait_for(status_is(store, "p1", RunStatus.INDETERMINATE), WAIT, "the run to stop in doubt")
    assert len(lines(side, "tickets")) == 1 and lines(side, "model") == ["1", "2"]

    # The human says what happened; the model reads exactly that as the tool's return.
    done = agentrun(store_spec, "reconcile", "p1", "tool/2/0/create_ticket", "--done", "T-77")
    assert done.returncode == 0, done.stderr
    wait_for(status_is(store, "p1", RunStatus.COMPLETED), WAIT, "the run to complete")
    fourth.stop()
    assert len(lines(side, "tickets")) == 1
    assert lines(side, "model") == ["1", "2", "3"]
    assert lines(side, "saw") == ["create_ticket=T-77"]
    answer = view_store(store, "p1").answer
    assert answer is not None and answer.content == "done: create_ticket=T-77"
    # Instructions and tools reached the model on every request, the resumed ones too.
    assert lines(side, "sent") == [f"{t}:Be brief.:create_ticket,lookup" for t in (1, 2, 3)]
    # The idempotency key the write was given is the step's, the same on every attempt.
    (ticket,) = lines(side, "tickets")
    assert ticket.startswith("billing:p1:") and ticket.endswith(":tool/2/0/create_ticket")


def test_a_deny_through_the_cli_reaches_the_model_as_its_denial(
    any_store: Store, store_spec: str, tmp_path: Path, start: Callable[..., WorkerProcess]
) -> None:
    store, side = any_store, tmp_path / "side"
    submit(store, "p2", PROMPT)
    worker = start("functional")
    wait_for(status_is(store, "p2", RunStatus.AWAITING_APPROVAL), WAIT, "the ticket to wait")
    (pending,) = view_store(store, "p2").pending
    denied = agentrun(store_spec, "deny", "p2", pending.marker, "--reason", "not today")
    assert denied.returncode == 0, denied.stderr
    wait_for(status_is(store, "p2", RunStatus.COMPLETED), WAIT, "the run to complete")
    worker.stop()
    assert lines(side, "tickets") == []
    assert lines(side, "saw") == ["create_ticket=denied by oncall: not today (denied)"]


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM() as f:
        yield f


def test_the_openai_model_class_killed_waiting_for_the_model_asks_only_that_turn_again(
    any_store: Store,
    store_spec: str,
    tmp_path: Path,
    fake: FakeLLM,
    start: Callable[..., WorkerProcess],
) -> None:
    store, side = any_store, tmp_path / "side"
    submit(store, "p3", PROMPT)
    fake.hold(2)  # the reply after lookup_policy: held until the worker is dead
    first = start("openai", OPENAI_BASE_URL=fake.openai_url)
    assert fake.held.wait(WAIT), first.log.read_text()
    first.stop(sig.SIGKILL)
    fake.release()
    wait_for(lambda: not store.is_leased("p3"), WAIT, "the killed worker's lease")
    assert fake.turns() == {1: 1, 2: 1}
    assert lines(side, "lookup") == ["billing"]

    second = start("openai", OPENAI_BASE_URL=fake.openai_url)
    wait_for(status_is(store, "p3", RunStatus.AWAITING_APPROVAL), WAIT, "the ticket to wait")
    assert fake.turns() == {1: 1, 2: 2}  # turn 1 replayed; only the lost turn asked again
    assert lines(side, "lookup") == ["billing"]  # its result was recorded before the kill
    (pending,) = view_store(store, "p3").pending
    approved = agentrun(store_spec, "approve", "p3", pending.marker)
    assert approved.returncode == 0, approved.stderr
    wait_for(status_is(store, "p3", RunStatus.COMPLETED), WAIT, "the run to complete")
    second.stop()
    assert fake.turns() == {1: 1, 2: 2, 3: 1}
    assert lines(side, "tickets") == ["billing dashboard access"]
    answer = view_store(store, "p3").answer
    assert answer is not None and answer.content == "Ticket filed: T-1"
    model = next(s for s in view_store(store, "p3").steps if s.name == "llm/1")
    assert model.result["model"] == fake.model
    assert model.result["usage"] == {"input_tokens": 100, "output_tokens": 11}

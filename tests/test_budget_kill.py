"""A budget no crash can reset, proven with real SIGKILLs inside model calls: worker processes
on the OpenAI SDK, talking over a socket to the local provider, which keeps its own bill of
every token it served (answers to a caller killed while waiting included). However many
workers die mid-call, the provider never serves a run more than its budget plus one call's
reservation, the journal's fold never counts less than the provider billed, and a fork starts
with the original's spend (SPEC §10)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator

import pytest
from fake_llm import Call, FakeLLM, Request
from procs import WorkerProcess, wait_for

from durableagent import Budget, FileStore, Message, RunStatus, fork, submit, view_store
from durableagent.control import Controls
from durableagent.record import STEP_STARTED

pytestmark = pytest.mark.slow

BUDGET = 6000
OUTPUT = 30  # what each reply holds; the agent's bound is 64


def billed(request: Request) -> tuple[int, int]:
    """What a provider bills a call: the text it was sent, about four characters a token
    (no JSON around it: our reservation, which counts the JSON, is never less), and the reply."""
    text = ""
    for m in request.body["messages"]:
        text += str(m.get("content") or "")
        for c in m.get("tool_calls") or []:
            text += c["function"]["name"] + c["function"]["arguments"]
    return -(-len(text) // 4), OUTPUT


def looping(request: Request) -> Call:
    """A model that looks something up every turn and never answers."""
    return Call((("lookup", json.dumps({"n": request.turn})),))


@pytest.fixture
def fake() -> Iterator[FakeLLM]:
    with FakeLLM(looping, usage=billed) as f:
        yield f


def reserves(store: FileStore, run_id: str) -> list[int]:
    return [
        r.data["reserve"]["tokens"]
        for r in store.load(run_id)
        if r.type == STEP_STARTED and r.kind == "model"
    ]


def test_sigkills_inside_model_calls_never_reset_the_budget(
    fake: FakeLLM, store: FileStore, workers: Callable[..., WorkerProcess]
) -> None:
    submit(store, "b1", [Message("user", "find it")], budget=Budget(tokens=BUDGET))
    env = {"OPENAI_BASE_URL": fake.openai_url, "OPENAI_API_KEY": "sk-local"}
    kills = (2, 3, 3, 5, 7)  # turn 3 twice: the same call lost twice
    for turn in kills:
        fake.hold(turn)
        w = workers(store.root, "budgeted", **env)
        assert fake.held.wait(30), w.log.read_text()
        # The call is on the wire, so its start, with its reservation, is on disk.
        last = store.load("b1")[-1]
        assert (last.type, last.step) == (STEP_STARTED, f"llm/{turn}")
        w.kill()
        fake.release()  # the provider answers a dead socket: billed all the same
        wait_for(lambda: not store.is_leased("b1"), why="the killed worker's lease")
    last = workers(store.root, "budgeted", **env)
    wait_for(
        lambda: view_store(store, "b1").status == RunStatus.OVER_BUDGET,
        timeout=60,
        why="the run to stop at its budget",
    )
    last.stop()

    view = view_store(store, "b1")
    assert view.outcome is not None and "over budget: tokens: " in view.outcome.error
    assert all(fake.turns()[t] >= 2 for t in kills)  # each kill lost a call, made again
    one_call = max(reserves(store, "b1"))
    assert fake.served <= BUDGET + one_call, (fake.served, one_call)
    # The fold counts every lost call at its reservation: never less than was billed.
    assert view.controls.spend.tokens >= fake.served
    assert view.controls.spend.tokens <= BUDGET

    # A fork starts with what the original spent before the cut, and so stops as soon.
    records = store.load("b1")
    cut = next(r.seq for r in records if r.type == STEP_STARTED and r.step == "llm/6")
    before = Controls()
    for r in records:
        if r.seq < cut:
            before.add(r)
    fork(store, "b1", "b1-fork", at_step="llm/6", by="ana", reason="again from turn 6")
    forked = view_store(store, "b1-fork").controls
    assert forked.spend.tokens == before.spend.tokens > 0
    assert forked.budget == Budget(tokens=BUDGET)

"""A run id names one run: its input is fixed at the start."""

from __future__ import annotations

import pytest

from durableagent import (
    FileStore,
    InputMismatchError,
    Message,
    RunNotFoundError,
    Status,
    run,
    signal,
    submit,
)
from helpdesk import INPUT, Side, helpdesk


async def test_same_id_and_same_input_resumes(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    await run(config, "a1", INPUT)
    out = await run(config, "a1", [Message("user", INPUT[0].content)])
    assert out.status == Status.AWAITING_APPROVAL
    assert model.calls == 2
    assert len(store.load("a1")) == 7


async def test_other_input_is_refused_and_writes_nothing(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    await run(config, "a1", INPUT)
    before = store.path("a1").read_bytes()
    with pytest.raises(InputMismatchError) as e:
        await run(config, "a1", [Message("user", "Something else entirely")])
    assert e.value.run_id == "a1"
    assert store.path("a1").read_bytes() == before
    assert model.calls == 2


async def test_other_input_is_refused_on_a_completed_run(store: FileStore, side: Side):
    config, _ = helpdesk(store, side)
    first = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": first.pending[0].marker})
    assert (await run(config, "a1", None)).status == Status.COMPLETED
    with pytest.raises(InputMismatchError):
        await run(config, "a1", [Message("user", "a new question")])


async def test_an_unknown_run_cannot_be_resumed(store: FileStore, side: Side):
    config, model = helpdesk(store, side)
    with pytest.raises(RunNotFoundError):
        await run(config, "nope", None)
    assert store.run_ids() == []
    assert model.calls == 0
    assert store.last_outcome("nope") is None


async def test_submit_records_the_input_once_and_refuses_another(store: FileStore, side: Side):
    first = submit(store, "s1", INPUT)
    again = submit(store, "s1", INPUT)
    assert first.seq == again.seq == 1
    assert len(store.load("s1")) == 1
    with pytest.raises(InputMismatchError):
        submit(store, "s1", [Message("user", "other")])
    config, model = helpdesk(store, side)
    out = await run(config, "s1", None)
    assert out.status == Status.AWAITING_APPROVAL
    assert model.calls == 2

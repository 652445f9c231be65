"""Run ids come from users: they are checked before anything touches the disk."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durableagent import (
    FileStore,
    InvalidRunIdError,
    Message,
    Outcome,
    Record,
    RunNotFoundError,
    Status,
    run,
    signal,
    submit,
    valid_run_id,
    view_store,
)
from helpdesk import Side, helpdesk

SPEC = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
BAD = [
    "",
    "../escape",
    "..",
    ".",
    "a/b",
    "/abs",
    "a\\b",
    "-lead",
    "_lead",
    "a b",
    "é",
    "a\0b",
    "x" * 129,
    "a\n",
    "ａ",
]


def tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("bad", BAD)
def test_path_like_ids_are_refused_everywhere(tmp_path: Path, bad: str):
    store = FileStore(tmp_path / "runs")
    config, _ = helpdesk(store, Side(tmp_path / "side"))
    before = tree(tmp_path)
    calls = [
        lambda: store.load(bad),
        lambda: store.append(bad, Record.make("run.started", data={"input": []})),
        lambda: store.lease(bad).__enter__(),
        lambda: store.is_leased(bad),
        lambda: store.save_outcome(bad, Outcome(Status.FAILED)),
        lambda: store.last_outcome(bad),
        lambda: signal(store, bad, "approve", {"marker": "tool/1/0/x#abc"}),
        lambda: submit(store, bad, [Message("user", "hi")]),
        lambda: asyncio.run(run(config, bad, [Message("user", "hi")])),
        lambda: view_store(store, bad),
    ]
    for call in calls:
        with pytest.raises(InvalidRunIdError) as e:
            call()
        assert "letters, digits" in str(e.value)
    assert tree(tmp_path) == before


@given(st.text(max_size=140) | st.from_regex(SPEC, fullmatch=True))
@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_nothing_is_ever_written_outside_the_root(tmp_path: Path, run_id: str):
    root = tmp_path / "store" / "runs"
    store = FileStore(root)
    expected = SPEC.fullmatch(run_id) is not None and run_id.isascii()
    assert valid_run_id(run_id) is expected
    try:
        store.append(run_id, Record.make("run.started", data={"input": []}))
    except InvalidRunIdError:
        assert not expected
    else:
        assert expected
        path = store.path(run_id)
        assert path.parent == root and path.exists()
        path.unlink()
    assert set(os.listdir(tmp_path)) == {"store"}
    assert set(os.listdir(tmp_path / "store")) == {"runs"}


def test_valid_ids_at_the_edges():
    assert valid_run_id("a")
    assert valid_run_id("A" + "b" * 127)
    assert valid_run_id("run-1.2_3")
    assert not valid_run_id(None)
    assert not valid_run_id(123)


def test_signals_need_an_existing_run(store: FileStore):
    with pytest.raises(RunNotFoundError):
        signal(store, "ghost", "approve", {"marker": "tool/2/0/create_ticket#0123456789ab"})
    with pytest.raises(RunNotFoundError):
        signal(store, "ghost", "reconcile", {"step": "tool/1/0/x", "outcome": "retry"})
    assert store.run_ids() == []
    assert not store.path("ghost").exists()

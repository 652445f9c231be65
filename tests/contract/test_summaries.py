"""A summary never disagrees with its journal: on every store, for any journal built by any
mix of appends (with or without a check, from one store object or two, as two processes
would), the summary a listing reads is the summary of the fold of the journal."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from durableagent import Record, Store, open_store
from durableagent.fold import fold, summarize

_ids = itertools.count()

# One append: what it writes, which of two store objects writes it, and how (no check, or a
# check with ``since`` at a fraction of the seqs the journal holds by then).
KINDS = [
    "model_start",
    "model_done",
    "tool_start",
    "write_start",
    "tool_done",
    "approve",
    "pause",
    "resume",
    "budget",
    "reconcile",
    "completed",
]
OPS = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.integers(0, 1),
        st.one_of(st.none(), st.floats(0, 1)),
        st.integers(1, 3),
    ),
    min_size=1,
    max_size=14,
)


def record(kind: str, n: int) -> Record:
    """The record an op appends (``n``: which step it names)."""
    llm, tool = f"llm/{n}", f"tool/{n}/0/create_ticket"

    def sig(name: str, step: str = "", payload: Any = None) -> Record:
        data = {"name": name, "payload": payload or {}, "by": "ana", "reason": "test"}
        return Record.make("signal", step, "", data)

    return {
        "model_start": lambda: Record.make(
            "step.started", llm, "model", {"reserve": {"tokens": 100, "model": "m"}}
        ),
        "model_done": lambda: Record.make(
            "step.completed",
            llm,
            "model",
            {"model": "m", "usage": {"input_tokens": 7, "output_tokens": 3}},
        ),
        "tool_start": lambda: Record.make("step.started", tool, "tool", {"write": False}),
        "write_start": lambda: Record.make("step.started", tool, "tool", {"write": True}),
        "tool_done": lambda: Record.make("step.completed", tool, "tool", {"result": "ok"}),
        "approve": lambda: sig("approve", tool, {"marker": f"{tool}#x"}),
        "pause": lambda: sig("pause"),
        "resume": lambda: sig("resume"),
        "budget": lambda: sig("budget", "", {"add": {"model_calls": 2}}),
        "reconcile": lambda: sig("reconcile", tool, {"outcome": "happened", "result": "ok"}),
        "completed": lambda: Record.make(
            "run.completed", "", "", {"message": {"role": "assistant", "content": "done"}}
        ),
    }[kind]()


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=OPS)
def test_the_summary_of_any_journal_is_the_summary_of_its_fold(
    store_spec: str, ops: list[tuple[str, int, float | None, int]]
):
    run_id = f"r{next(_ids)}"
    stores: list[Store] = [open_store(store_spec), open_store(store_spec)]
    try:
        first = Record.make(
            "run.started",
            data={"input": [{"role": "user", "content": "hi"}], "budget": {"model_calls": 9}},
        )
        stores[0].append(run_id, first)
        last = 1
        for kind, writer, since_at, n in ops:
            r = record(kind, n)
            s = stores[writer]
            if since_at is None:
                last = s.append(run_id, r).seq
            else:
                since = int(since_at * last)
                last = s.append(run_id, r, check=lambda _records: None, since=since).seq
        for s in stores:
            expected = summarize(run_id, fold(s.load(run_id)), s.last_outcome(run_id))
            assert s.summary(run_id) == expected
            (listed,) = [x for x in s.summaries() if x.run_id == run_id]
            assert listed == expected
            # Each figure a listing shows, spelled out (what `ls` printed wrongly).
            assert (listed.steps, listed.model_calls, listed.signals, listed.last_seq) == (
                expected.steps,
                expected.model_calls,
                expected.signals,
                last,
            )
    finally:
        for s in stores:
            s.close()

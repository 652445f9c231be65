"""Token usage: recorded with each model step, summed per run, shown by agentrun show."""

from __future__ import annotations

import json
from typing import Any

import pytest

from durableagent import FileStore, Message, Record, Tokens, ToolCall, view_run
from durableagent.cli import main
from durableagent.record import RUN_STARTED, STEP_COMPLETED, STEP_STARTED


def rec(seq: int, type: str, step: str = "", kind: str = "", data: Any = None) -> Record:
    return Record(seq, type, step, kind, {} if data is None else data, 1000.0 + seq)


def reply(usage: Any, **extra: Any) -> dict[str, Any]:
    d = Message("assistant", "", tool_calls=(ToolCall("c1", "lookup", {"q": "x"}),)).to_dict()
    return {**d, "usage": usage, **extra}


JOURNAL = [
    rec(1, RUN_STARTED, data={"input": [{"role": "user", "content": "hi"}]}),
    rec(2, STEP_STARTED, "llm/1", "model"),
    rec(
        3,
        STEP_COMPLETED,
        "llm/1",
        "model",
        reply({"input_tokens": 120, "output_tokens": 13}, model="gpt-x", response_id="r-1"),
    ),
    rec(4, STEP_STARTED, "tool/1/0/lookup", "tool", {"write": False}),
    rec(5, STEP_COMPLETED, "tool/1/0/lookup", "tool", {"content": "found", "is_error": False}),
    rec(6, STEP_STARTED, "llm/2", "model"),
    rec(
        7,
        STEP_COMPLETED,
        "llm/2",
        "model",
        {
            "role": "assistant",
            "content": "Done.",
            "usage": {"input_tokens": 150, "output_tokens": 4},
        },
    ),
]


def test_the_view_sums_the_model_steps_usage_and_keeps_it_per_step() -> None:
    view = view_run(JOURNAL)
    steps = {s.name: s for s in view.steps}
    assert steps["llm/1"].usage == Tokens(120, 13) and steps["llm/1"].model == "gpt-x"
    assert steps["llm/2"].usage == Tokens(150, 4) and steps["llm/2"].model is None
    assert steps["tool/1/0/lookup"].usage is None
    assert view.tokens == Tokens(270, 17) and view.tokens.total == 287


def test_a_run_whose_provider_reports_no_usage_has_no_token_count() -> None:
    journal = [
        *JOURNAL[:2],
        rec(3, STEP_COMPLETED, "llm/1", "model", {"role": "assistant", "content": "hi"}),
    ]
    assert view_run(journal).tokens is None


@pytest.mark.parametrize(
    "odd",
    ["lots", {"input_tokens": "9"}, {"input_tokens": -1, "output_tokens": True}, [1, 2]],
)
def test_odd_usage_in_a_journal_counts_as_none_and_breaks_nothing(odd: Any) -> None:
    journal = [*JOURNAL[:2], rec(3, STEP_COMPLETED, "llm/1", "model", reply(odd))]
    view = view_run(journal)
    assert view.tokens is None
    assert view.steps[0].completed and view.steps[0].usage is None


def test_message_keeps_usage_model_and_response_id_only_when_set() -> None:
    plain = Message("assistant", "hi")
    assert plain.to_dict() == {"role": "assistant", "content": "hi"}
    full = Message(
        "assistant", "hi", usage={"input_tokens": 1, "output_tokens": 2}, model="m", response_id="r"
    )
    assert Message.from_dict(full.to_dict()) == full
    assert full.to_dict() == {
        "role": "assistant",
        "content": "hi",
        "usage": {"input_tokens": 1, "output_tokens": 2},
        "model": "m",
        "response_id": "r",
    }


def journal_store(store: FileStore) -> None:
    for r in JOURNAL:
        store.append("u1", r)


def test_agentrun_show_prints_tokens_per_run_and_per_model_step(
    store: FileStore, capsys: pytest.CaptureFixture[str]
) -> None:
    journal_store(store)
    assert main(["show", "u1", "--store", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert "tokens   270 in, 17 out (287 in all)" in out
    lines = out.splitlines()
    asks = next(line for line in lines if "llm/1" in line and "step.completed" in line)
    assert asks.endswith('asks lookup(q="x") [120 in, 13 out tokens]')
    answer = next(line for line in lines if "llm/2" in line and "step.completed" in line)
    assert answer.endswith("answer: Done. [150 in, 4 out tokens]")


def test_agentrun_show_json_has_the_tokens_of_the_run_and_of_each_step(
    store: FileStore, capsys: pytest.CaptureFixture[str]
) -> None:
    journal_store(store)
    assert main(["show", "u1", "--json", "--store", str(store.root)]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["tokens"] == {"input_tokens": 270, "output_tokens": 17}
    steps = {s["name"]: s for s in d["step_views"]}
    assert steps["llm/1"]["usage"] == {"input_tokens": 120, "output_tokens": 13}
    assert steps["llm/1"]["model"] == "gpt-x"
    assert steps["tool/1/0/lookup"]["usage"] is None

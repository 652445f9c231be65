"""The step grammar, made and read in one place: llm/T and tool/T/I/NAME, a tool's name may
hold a slash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from durableagent.steps import (
    Step,
    model_step,
    model_turn,
    parse_step,
    step_tool_name,
    step_turn,
    tool_step,
)


@given(
    turn=st.integers(1, 10**6),
    index=st.integers(0, 10**4),
    tool=st.text(min_size=1, max_size=40).filter(lambda t: t.strip() == t and t),
)
def test_every_name_the_grammar_makes_reads_back(turn: int, index: int, tool: str):
    name = tool_step(turn, index, tool)
    assert parse_step(name) == Step(turn, index, tool)
    assert step_tool_name(name) == tool and step_turn(name) == turn
    assert model_turn(name) is None
    assert parse_step(model_step(turn)) == Step(turn) and model_turn(model_step(turn)) == turn
    assert parse_step(name).name == name  # type: ignore[union-attr]


def test_a_tool_name_with_a_slash_is_the_whole_rest_of_the_name():
    assert step_tool_name("tool/2/0/github/create_issue") == "github/create_issue"


@pytest.mark.parametrize(
    "name", ["", "llm", "llm/x", "llm/1/2", "tool/1/0/", "tool/1/x/t", "tool/a/0/t", "step/1", "x"]
)
def test_a_name_the_grammar_does_not_make_reads_as_none(name: str):
    assert parse_step(name) is None
    assert step_tool_name(name) is None and step_turn(name) is None

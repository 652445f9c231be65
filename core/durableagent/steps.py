"""The step grammar: the model call of turn t is ``llm/t``; the i-th tool call of turn t is
``tool/t/i/NAME`` (turns count from 1, calls from 0; a tool's name may itself hold ``/``).
Every step name is made and read here, and nowhere else."""

from __future__ import annotations

from dataclasses import dataclass

MODEL = "llm"
TOOL = "tool"


@dataclass(frozen=True, slots=True)
class Step:
    """A step name read: its turn, and for a tool call its index in the turn and its tool."""

    turn: int
    index: int | None = None  # None for the model call
    tool: str | None = None

    @property
    def is_model(self) -> bool:
        return self.index is None

    @property
    def name(self) -> str:
        if self.index is None:
            return model_step(self.turn)
        assert self.tool is not None
        return tool_step(self.turn, self.index, self.tool)


def model_step(turn: int) -> str:
    """The step name of turn ``turn``'s model call (turns count from 1)."""
    return f"{MODEL}/{turn}"


def tool_step(turn: int, index: int, tool: str) -> str:
    """The step name of the ``index``-th tool call (from 0) of turn ``turn``."""
    return f"{TOOL}/{turn}/{index}/{tool}"


def parse_step(name: str) -> Step | None:
    """``name`` read by the grammar; None for a name it does not make (a hand-made journal
    may hold anything)."""
    head, _, rest = name.partition("/")
    if head == MODEL:
        return Step(int(rest)) if rest.isdigit() else None
    if head != TOOL:
        return None
    turn, _, rest = rest.partition("/")
    index, _, tool = rest.partition("/")
    if not (turn.isdigit() and index.isdigit() and tool):
        return None
    return Step(int(turn), int(index), tool)


def step_tool_name(step: str) -> str | None:
    """The tool name of a tool step (``tool/2/0/create_ticket`` → ``create_ticket``), else
    None."""
    parsed = parse_step(step)
    return None if parsed is None else parsed.tool


def step_turn(step: str) -> int | None:
    """The turn of ``llm/t`` or ``tool/t/i/NAME``; None for anything else."""
    parsed = parse_step(step)
    return None if parsed is None else parsed.turn


def model_turn(step: str) -> int | None:
    """The turn of a model step ``llm/t``; None for any other name."""
    parsed = parse_step(step)
    return parsed.turn if parsed is not None and parsed.is_model else None

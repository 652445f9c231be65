"""The story behind a decision: what a human needs on screen to judge a pending call or an
indeterminate write, read from a RunView alone (no I/O).

Everything here comes from a journal: it is returned as ``rich.text.Text`` built from plain
strings (never markup) and read defensively, since a hand-edited journal may hold any JSON.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from durableagent import Message, Record, RunView, StepView, model_step, tool_step
from durableagent import idempotency_key as core_idempotency_key
from durableagent.labels import ago
from durableagent.steps import step_tool_name, step_turn

from .styles import clock
from .summaries import call_text, one_line

# Earlier turns are context, shown one line per call; the timeline has them whole.
EARLIER_LIMIT = 160
EARLIER_CALLS = 8


turn_of = step_turn


def step_view(view: RunView, name: str) -> StepView | None:
    """The step called ``name``, if it started or finished."""
    return next((s for s in view.steps if s.name == name), None)


def model_message(view: RunView, turn: int) -> Message | None:
    """What the model said in ``turn`` (its recorded assistant message), if it is readable."""
    s = step_view(view, model_step(turn))
    if s is None or not s.completed:
        return None
    try:
        return Message.from_dict(s.result)
    except (ValueError, TypeError, KeyError):
        return None


@dataclass(frozen=True)
class TurnCall:
    """One tool call the model asked for in a turn, and where it stands."""

    step: str
    name: str
    arguments: Any
    state: str  # "result", "error", "pending", "open" (started, no result) or "not run"
    result: str = ""


def calls_of_turn(view: RunView, turn: int) -> list[TurnCall]:
    """Every call of ``turn``'s model message, in order, with its result or state."""
    msg = model_message(view, turn)
    if msg is None:
        return []
    pending = {p.step for p in view.pending}
    out = []
    for i, c in enumerate(msg.tool_calls):
        step = tool_step(turn, i, c.name)
        s = step_view(view, step)
        if s is not None and s.completed:
            data = s.result if isinstance(s.result, dict) else {}
            state = "error" if data.get("is_error") else "result"
            out.append(TurnCall(step, c.name, c.arguments, state, str(data.get("content", ""))))
        elif step in pending:
            out.append(TurnCall(step, c.name, c.arguments, "pending"))
        elif s is not None and s.started:
            out.append(TurnCall(step, c.name, c.arguments, "open"))
        else:
            out.append(TurnCall(step, c.name, c.arguments, "not run"))
    return out


def request_text(view: RunView) -> Text:
    """The run's input: the user's request (every input message, whole)."""
    msgs = [m for m in view.input if m.content]
    if not msgs:
        return Text("(the run has no input text)", style="dim")
    if len(msgs) == 1:
        return Text(msgs[0].content)
    return Text("\n").join(Text.assemble((f"{m.role}: ", "dim"), m.content) for m in msgs)


def facts_grid() -> Table:
    """Label and value, two columns: the labels dim, the values folded, never cut."""
    grid = Table.grid(padding=(0, 1), expand=True)
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(ratio=1, overflow="fold")
    return grid


def _state_text(call: TurnCall, *, whole: bool) -> Text:
    def cut(s: str) -> str:
        return s if whole else one_line(s, EARLIER_LIMIT)

    if call.state == "pending":  # its arguments are in the list of pending calls, whole
        return Text.assemble((call.name, "bold"), ("  waiting for a human (below)", "bold yellow"))
    text = Text(cut(call_text(call.name, call.arguments)))
    if call.state == "result":
        text.append(" → ", style="dim")
        text.append(cut(call.result))
    elif call.state == "error":
        text.append(" → error: ", style="red")
        text.append(cut(call.result))
    elif call.state == "open":
        text.append("  started, no result", style="bold red")
    else:
        text.append("  not run yet (the turn waits for every decision)", style="dim")
    return text


def approval_story(view: RunView, now: float) -> RenderableType:
    """What led to the run's pending calls: the request, earlier turns in brief, the model's
    words with the calls, this turn's calls so far, and when they were asked for."""
    grid = facts_grid()
    turn = turn_of(view.pending[0].step) if view.pending else None
    model = step_view(view, model_step(turn)) if turn is not None else None
    if model is not None and model.completed_at is not None:
        asked = model.completed_at
        grid.add_row(
            "asked",
            Text.assemble(
                f"{clock(asked)} by {model.name} · waiting {ago(asked, now).removesuffix(' ago')}"
            ),
        )
    grid.add_row("request", request_text(view))
    if turn is None:
        return grid
    earlier = [(t, c) for t in range(1, turn) for c in calls_of_turn(view, t)]
    if len(earlier) > EARLIER_CALLS:
        skipped = len(earlier) - EARLIER_CALLS
        grid.add_row("", Text(f"… {skipped} earlier call(s): see the timeline", style="dim"))
        earlier = earlier[-EARLIER_CALLS:]
    for t, call in earlier:
        grid.add_row(f"turn {t}", _state_text(call, whole=False))
    msg = model_message(view, turn)
    said = (
        Text(msg.content)
        if msg is not None and msg.content
        else Text("(no text came with the calls)", style="dim")
    )
    grid.add_row(f"model {turn}", said)
    for call in calls_of_turn(view, turn):
        grid.add_row(f"turn {turn}", _state_text(call, whole=True))
    return grid


def decisions_about(view: RunView, step: str) -> list[Record]:
    """The signals that concern ``step`` (approvals, denials, reconciliations), oldest first."""
    return [r for r in view.signals if r.step == step]


def _signal_line(r: Record, now: float) -> Text:
    data = r.data if isinstance(r.data, dict) else {}
    name = str(data.get("name") or "signal")
    raw = data.get("payload")
    payload: dict[str, Any] = raw if isinstance(raw, dict) else {}
    words = {"approve": "approved", "deny": "denied"}
    what = words.get(name, name)
    if name == "reconcile":
        what = f"reconciled {payload.get('outcome')}"
    by = data.get("by")
    text = Text(what, style="bold")
    text.append(f" by {by}" if isinstance(by, str) and by else " (no name given)")
    text.append(f" at {clock(r.at)} ({ago(r.at, now)})")
    reason = data.get("reason")
    if isinstance(reason, str) and reason:
        text.append(": ")
        text.append(reason)
    return text


def last_start(view: RunView, step: str) -> Record | None:
    """The step's latest step.started record: the attempt that left it open."""
    return next(
        (r for r in reversed(view.records) if r.type == "step.started" and r.step == step), None
    )


def idempotency_key(view: RunView, step: StepView) -> str | None:
    """The key the step's tool was given to deduplicate on (``ToolContext.idempotency_key``,
    the same every time that step runs in this run), so the human can search the external
    system for it. None for a model step or a journal with no ``run.started``."""
    if step.kind != "tool" or not view.records or view.records[0].type != "run.started":
        return None
    return core_idempotency_key(view.run_id, step.name, view.records[0])


def reconcile_facts(
    view: RunView, step: StepView, now: float, hints: Mapping[str, str]
) -> RenderableType:
    """An indeterminate write's facts: when it started, who approved it, the request, where to
    check (the tool's hint) and the key to search for."""
    grid = facts_grid()
    start = last_start(view, step.name)
    started_at = start.at if start is not None else step.started_at
    when = Text(f"{clock(started_at)} ({ago(started_at, now)})")
    if step.attempts > 1:
        when.append(f" · started {step.attempts} times; this is the latest", style="dim")
    grid.add_row("started", when)
    before = start.seq if start is not None else view.last_seq + 1
    decided = [r for r in decisions_about(view, step.name) if r.seq < before]
    if not decided:
        grid.add_row("approved", Text("no approval recorded (the gate did not ask)", style="dim"))
    for r in decided:
        grid.add_row("decided", _signal_line(r, now))
    grid.add_row("request", request_text(view))
    tool = step.call.name if step.call is not None else (step_tool_name(step.name) or step.name)
    # The app's hints first (the operator's word), else the one the tool recorded at start.
    hint = hints.get(tool) or getattr(step, "hint", "")
    if hint:
        grid.add_row("check", Text(hint, style="bold"))
    else:
        grid.add_row("check", Text(f"no hint for {tool}: look in the system it writes to"))
    key = idempotency_key(view, step)
    if key is not None:
        said = Text(key, style="bold")
        said.append("  (given to the tool: search for it where it writes)", style="dim")
        grid.add_row("key", said)
    if step.classified_by:
        grid.add_row("class", Text(f"write, class from {step.classified_by}"))
    return grid

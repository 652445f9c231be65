"""The recovery plan of the selected run (``p``): what its next attempt will do with every
step, and where it will stop, as the core's ``plan()`` fold says. It only shows; ``esc``
goes back."""

from __future__ import annotations

from typing import ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from durableagent import Plan, PlanAction, PlanEnding, RunView

from ..styles import status_text

# How each action reads: a glyph and a colour, so it is never colour alone.
ACTION_LOOKS: dict[PlanAction, tuple[str, str]] = {
    PlanAction.REPLAY: ("✓", "green"),
    PlanAction.RERUN: ("↻", "cyan"),
    PlanAction.BLOCKED: ("✖", "bold red"),
    PlanAction.HUMAN_DONE: ("☑", "green"),
    PlanAction.RUN_AGAIN: ("↻", "yellow"),
    PlanAction.WAITING: ("▲", "bold yellow"),
    PlanAction.RUN: ("▸", "bold"),
    PlanAction.REFUSED: ("⊘", "magenta"),
    PlanAction.NOT_REACHED: ("·", "dim"),
    PlanAction.OVER_BUDGET: ("◆", "bold red"),
    PlanAction.INCOMPATIBLE: ("≠", "bold red"),
}
ENDING_STYLES = {
    PlanEnding.INDETERMINATE: "bold red",
    PlanEnding.AWAITING_APPROVAL: "bold yellow",
    PlanEnding.COMPLETED: "green",
    PlanEnding.OVER_BUDGET: "bold red",
    PlanEnding.INCOMPATIBLE: "bold red",
    PlanEnding.CANCELLED: "dim",
    PlanEnding.PAUSED: "yellow",
    PlanEnding.COMPLETES: "green",
}


def plan_table(p: Plan) -> Table:
    """One row per step: where the attempt stops (→), the action, the step, and why. Journal
    text (step names, a human's result) goes in as plain Text."""
    table = Table.grid(padding=(0, 1), expand=True)
    table.add_column(width=1, no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column(ratio=1, overflow="fold")
    for s in p.steps:
        glyph, style = ACTION_LOOKS[s.action]
        stop = Text("→", style="bold") if s.step == p.stops_at else Text(" ")
        table.add_row(
            stop,
            Text(f"{glyph} {s.action}", style=style),
            Text(s.step, style="bold" if s.step == p.stops_at else ""),
            Text(s.why, style="dim" if s.action == PlanAction.REPLAY else ""),
        )
    return table


class PlanScreen(ModalScreen[None]):
    """The recovery plan of one run."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,p,q", "close", "Back", id="plan.close")
    ]

    def __init__(self, view: RunView, plan: Plan) -> None:
        super().__init__()
        self.view = view
        self.plan = plan

    def compose(self) -> ComposeResult:
        p = self.plan
        with Vertical(id="dialog", classes="plan"):
            yield Label(
                Text.assemble(
                    ("Recovery plan  ", "bold"),
                    self.view.run_id,
                    "  ",
                    status_text(self.view.status),
                )
            )
            yield Static(
                Text.assemble(
                    ("next attempt: ", "dim"), (p.why, ENDING_STYLES.get(p.ending, "bold"))
                ),
                classes="section",
            )
            with VerticalScroll(id="plan-steps"):
                yield Static(plan_table(p), id="plan-body")
            yield Static(
                Text(
                    "replay: from the journal, not called again · re-run: a read or an "
                    f"idempotent write cut off · agentrun plan {self.view.run_id} prints the same",
                    style="dim",
                ),
                classes="hint",
            )
            yield Static(Text("esc back", style="dim"), classes="keys")

    def on_mount(self) -> None:
        rows = self.app.size.height
        self.query_one("#plan-steps").styles.max_height = max(3, rows - 10)

    def action_close(self) -> None:
        self.dismiss(None)

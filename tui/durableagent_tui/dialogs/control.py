"""Cancel, pause or resume a run (``c``, ``P``: the same as ``agentrun cancel``, ``pause`` and
``resume``). The dialog says what the control does to the run as it is now, asks why (a cancel
or a pause needs a reason: the journal keeps it for whoever looks next), and writes only on
``y`` or the labelled button, never on ``enter``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static

from durableagent import RunStatus, RunView
from durableagent.control import budget_text

from ..story import facts_grid
from ..styles import LOOKS
from .base import action_button, login_name
from .typed import TypedDialog

# Runs in a thread: (run id, control, by, reason) -> the toast text.
Control = Callable[[str, str, str, str | None], str]

VERB = {"cancel": "Cancel", "pause": "Pause", "resume": "Resume"}


def effect(name: str, view: RunView) -> str:
    """What the control will do to the run, as it is now."""
    running = view.status == RunStatus.RUNNING
    if name == "cancel":
        now = (
            " Its attempt stops now: a read in flight is cancelled; a write in flight is "
            "never interrupted, it records its result first."
            if running
            else ""
        )
        return "No step of it starts again, ever: a cancelled run is finished." + now
    if name == "pause":
        now = (
            " Its attempt stops before its next step (a read in flight is cancelled)."
            if running
            else ""
        )
        return "No worker starts it, and no step of it starts, until it is resumed." + now
    return "Lifts the pause: the next worker that looks picks it up again."


class ControlDialog(TypedDialog):
    """Asks once (``y``) before a cancel, a pause or a resume; the reason box has the focus."""

    def __init__(
        self, view: RunView, name: str, control: Control, *, now: float | None = None
    ) -> None:
        super().__init__(view, now=now)
        self.control_name = name
        self.control = control

    @property
    def needs_reason(self) -> bool:
        return self.control_name != "resume"

    def compose(self) -> ComposeResult:
        view = self.view
        verb = VERB[self.control_name]
        grid = facts_grid()
        look = LOOKS[view.status]
        grid.add_row("status", Text(f"{look.glyph} {look.word}", style=look.style))
        if view.waiting_on:
            grid.add_row("waiting", Text(view.waiting_on))
        if view.controls.budget.limited or view.controls.spend.tokens:
            grid.add_row("budget", Text(budget_text(view.controls, self.now)))
        if self.control_name == "resume" and view.halt is not None:
            grid.add_row("paused", Text(view.halt.says()))
        grid.add_row("effect", Text(effect(self.control_name, view)))
        optional = "" if self.needs_reason else " (optional)"
        with Vertical(id="dialog", classes="control"):
            yield Label(Text.assemble((f"{verb} run  ", "bold"), view.run_id))
            yield Static(grid)
            yield Input(
                placeholder=f"why{optional}: the journal keeps it", id="reason", compact=True
            )
            with Horizontal(id="buttons"):
                label = f"{verb} {view.run_id}"
                if self.control_name == "cancel":
                    yield action_button(label, id="yes", variant="error")
                else:
                    yield action_button(label, id="yes", variant="warning")
                yield action_button("Close", id="no")
            yield Static(id="error", classes="error")
            yield Static(id="keys", classes="keys")

    @property
    def confirms(self) -> str:
        return f"{self.control_name} {self.view.run_id}"

    def _reason(self) -> str | None:
        return self.query_one("#reason", Input).value.strip() or None

    def action_confirm(self) -> None:
        reason = self._reason()
        if self.needs_reason and reason is None:
            self.show_error(f"A {self.control_name} needs a reason: type why in the box (tab).")
            return
        self.submit(
            partial(self.control, self.view.run_id, self.control_name, login_name(), reason)
        )

"""Cancel, pause or resume a run (``c``, ``P``: the same as ``agentrun cancel``, ``pause`` and
``resume``). The dialog says what the control does to the run as it is now, asks why (a cancel
or a pause needs a reason: the journal keeps it for whoever looks next), and writes only on
``y`` or the labelled button, never on ``enter``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from durableagent import RunStatus, RunView
from durableagent.control import budget_text

from ..focus import focus_now
from ..story import facts_grid
from ..styles import LOOKS
from .base import ActingDialog, action_button, keys_text, login_name, steady

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


class ControlDialog(ActingDialog):
    """Asks once (``y``) before a cancel, a pause or a resume; the reason box has the focus."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Yes", id="control.yes"),
        # enter leaves the box as the key arrives (a priority binding runs before the next
        # key is passed on): a y typed right after it confirms, and is no letter of the reason.
        Binding("enter", "leave_box", show=False, priority=True, id="control.done"),
        Binding("escape", "close", "Close", id="control.close"),
    ]

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

    def on_mount(self) -> None:
        steady(self)
        focus_now(self.query_one("#reason", Input))
        self._relabel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the reason box has the focus, ``y`` is a letter of the reason."""
        return not (action == "confirm" and isinstance(self.focused, Input))

    def _relabel(self) -> None:
        verb = VERB[self.control_name].lower()
        if isinstance(self.focused, Input):
            keys = keys_text(("enter", "done typing"), ("esc", "close"))
        else:
            keys = keys_text(
                ("y", f"{verb} {self.view.run_id}"), ("tab", "reason"), ("esc", "close")
            )
        self.query_one("#keys", Static).update(keys)

    def _reason(self) -> str | None:
        return self.query_one("#reason", Input).value.strip() or None

    def action_leave_box(self) -> None:
        """enter leaves the box: it never writes (only ``y`` or the button does)."""
        self.set_focus(None)
        self._relabel()

    @on(Input.Changed, "#reason")
    @on(Input.Blurred, "#reason")
    def _moved(self) -> None:
        self._relabel()

    def on_descendant_focus(self) -> None:
        self._relabel()

    def action_confirm(self) -> None:
        reason = self._reason()
        if self.needs_reason and reason is None:
            self.show_error(f"A {self.control_name} needs a reason: type why in the box (tab).")
            return
        self.submit(
            partial(self.control, self.view.run_id, self.control_name, login_name(), reason)
        )

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.action_confirm()

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

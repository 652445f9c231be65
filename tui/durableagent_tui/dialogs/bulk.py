"""One question for an action on every marked run: it names the action and how many runs
(and the first few of them). Only ``y`` or the labelled button says yes, as in ConfirmDialog;
an action that needs a reason (cancel, pause) takes it in a box first, and yes stays refused
until it holds one. Returns the reason ("" when none was asked) or None for no."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from durableagent import Summary
from durableagent.bulk import Action

from ..focus import focus_now
from .base import action_button, keys_line

NAMED = 5  # run ids named in the question; more are counted


def question(action: Action, runs: list[Summary]) -> Text:
    """``Cancel 3 marked runs?`` and which (plain text: run ids come from the store)."""
    n = len(runs)
    head = f"{action.verb.capitalize()} {n} marked run{'s' if n != 1 else ''}?"
    ids = ", ".join(s.run_id for s in runs[:NAMED])
    more = f" and {n - NAMED} more" if n > NAMED else ""
    text = Text(head, style="bold")
    text.append(f"\n{ids}{more}")
    if action.per_call:
        text.append(f"\nEvery pending call of each of them is {action.past}.")
    text.append("\nEach run is checked on its own; one refused stops none of the others.")
    return text


class BulkDialog(ModalScreen[str | None]):
    """Ask once before ``action`` on the marked ``runs``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="bulk.yes"),
        Binding("n", "answer(False)", "No", id="bulk.no"),
        Binding("escape", "close", "Close", id="bulk.close"),
    ]

    def __init__(self, action: Action, runs: list[Summary]) -> None:
        super().__init__()
        self.action = action
        self.runs = runs

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="confirm bulk"):
            yield Static(question(self.action, self.runs), id="question")
            if self.action.needs_reason:
                yield Input(placeholder=f"why {self.action.verb} them (required)", id="reason")
            yield Static("", id="error", classes="error")
            with Horizontal(id="buttons"):
                label = f"{self.action.verb.capitalize()} {len(self.runs)}"
                yield action_button(label, id="yes", variant="warning")
                yield action_button("Cancel", id="no")
            yield keys_line(("y", self.action.verb), ("n / esc", "cancel"))

    def on_mount(self) -> None:
        if self.action.needs_reason:
            focus_now(self.query_one("#reason", Input))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # y or n typed in the reason box is a letter of the reason (esc still closes).
        return not (action == "answer" and isinstance(self.focused, Input))

    @on(Input.Submitted, "#reason")
    def _reason_done(self) -> None:
        focus_now(self.query_one("#yes", Button))

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.action_answer(True)

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

    def action_answer(self, yes: bool) -> None:
        if not yes:
            self.dismiss(None)
            return
        reason = ""
        if self.action.needs_reason:
            reason = self.query_one("#reason", Input).value.strip()
            if not reason:
                error = self.query_one("#error", Static)
                error.update(Text(f"{self.action.verb} needs a reason: the journal keeps why"))
                error.display = True
                focus_now(self.query_one("#reason", Input))
                return
        self.dismiss(reason)

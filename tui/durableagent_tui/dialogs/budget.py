"""Raise a run's budget (``B``: the same as ``agentrun budget RUN --add LIMITS --reason``): what
it spent against its limits, and why it stopped when it is over budget; the limits to add and
a reason, both typed; written only on ``y`` or the labelled button, never on ``enter``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Static

from durableagent import RunStatus, RunView
from durableagent.budget import BudgetError, parse_budget
from durableagent.control import budget_text

from ..focus import focus_now
from ..story import facts_grid
from .base import ActingDialog, action_button, keys_text, login_name, steady

# Runs in a thread: (run id, limits to add, by, reason) -> the toast text.
Raise = Callable[[str, dict[str, Any], str, str], str]


class BudgetDialog(ActingDialog):
    """Asks for the limits to add (``tokens=50k,model_calls=5``) and why; ``y`` writes."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Raise", id="budget.yes"),
        # enter moves on as the key arrives (a priority binding runs before the next key is
        # passed on), so what is typed right after it lands in the next box, not this one.
        Binding("enter", "next_box", show=False, priority=True, id="budget.next"),
        Binding("escape", "close", "Close", id="budget.close"),
    ]

    def __init__(self, view: RunView, raise_it: Raise, *, now: float | None = None) -> None:
        super().__init__(view, now=now)
        self.raise_it = raise_it

    def compose(self) -> ComposeResult:
        view = self.view
        grid = facts_grid()
        grid.add_row("spent", Text(budget_text(view.controls, self.now)))
        if view.status == RunStatus.OVER_BUDGET and view.outcome is not None:
            grid.add_row("stopped", Text(view.outcome.error, style="red"))
        with Vertical(id="dialog", classes="control"):
            yield Label(Text.assemble(("Raise the budget of  ", "bold"), view.run_id))
            yield Static(grid)
            yield Input(
                placeholder="add: tokens=50k,model_calls=5,deadline=1h", id="limits", compact=True
            )
            yield Input(placeholder="why: the journal keeps it", id="reason", compact=True)
            with Horizontal(id="buttons"):
                yield action_button(f"Raise {view.run_id}", id="yes", variant="warning")
                yield action_button("Close", id="no")
            yield Static(id="error", classes="error")
            yield Static(id="keys", classes="keys")

    def on_mount(self) -> None:
        steady(self)
        focus_now(self.query_one("#limits", Input))
        self._relabel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While a box has the focus, ``y`` is a letter typed in it."""
        return not (action == "confirm" and isinstance(self.focused, Input))

    def _relabel(self) -> None:
        if isinstance(self.focused, Input):
            keys = keys_text(("enter", "next / done typing"), ("esc", "close"))
        else:
            keys = keys_text(
                ("y", f"raise {self.view.run_id}"), ("tab", "the boxes"), ("esc", "close")
            )
        self.query_one("#keys", Static).update(keys)

    def action_next_box(self) -> None:
        """enter: from the limits to the reason, then out of the boxes; it never writes
        (only ``y`` or the button does)."""
        if self.focused is self.query_one("#limits", Input):
            focus_now(self.query_one("#reason", Input))
        else:
            self.set_focus(None)
        self._relabel()

    def on_descendant_focus(self) -> None:
        self._relabel()

    def on_descendant_blur(self) -> None:
        self._relabel()

    def action_confirm(self) -> None:
        text = self.query_one("#limits", Input).value.strip()
        reason = self.query_one("#reason", Input).value.strip()
        try:
            limits = parse_budget(text)
        except BudgetError as e:
            self.show_error(f"{e}. Nothing was written.")
            return
        if not reason:
            self.show_error("Raising a budget needs a reason: type why in its box (tab).")
            return
        self.submit(partial(self.raise_it, self.view.run_id, limits, login_name(), reason))

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.action_confirm()

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

"""Raise a run's budget (``B``: the same as ``agentrun budget RUN --add LIMITS --reason``): what
it spent against its limits, and why it stopped when it is over budget; the limits to add and
a reason, both typed; written only on ``y`` or the labelled button, never on ``enter``."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Input, Label, Static

from durableagent import RunStatus, RunView
from durableagent.budget import BudgetError, check_change, parse_budget
from durableagent.control import budget_text

from ..story import facts_grid
from .base import action_button, login_name
from .typed import TypedDialog

# Runs in a thread: (run id, limits to add, by, reason) -> the toast text.
Raise = Callable[[str, dict[str, Any], str, str], str]


class BudgetDialog(TypedDialog):
    """Asks for the limits to add (``tokens=50k,model_calls=5``) and why; ``y`` writes."""

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
            with Horizontal(classes="field"):
                yield Label("add ", classes="field-label")
                yield Input(
                    placeholder="tokens=50k,model_calls=5,deadline=1h", id="limits", compact=True
                )
            with Horizontal(classes="field"):
                yield Label("why ", classes="field-label")
                yield Input(placeholder="the journal keeps it", id="reason", compact=True)
            yield Static(self._after(""), id="after")
            with Horizontal(id="buttons"):
                yield action_button(f"Raise {view.run_id}", id="yes", variant="warning")
                yield action_button("Close", id="no")
            yield Static(id="error", classes="error")
            yield Static(id="keys", classes="keys")

    def _after(self, text: str) -> Text:
        """The limits the run would have with ``text`` added, before ``y``: what
        ``agentrun budget --add`` would make of them, or why it would refuse them."""
        if not text.strip():
            return Text.assemble(("new limits  ", "bold"), ("type the limits to add", "dim"))
        budget = self.view.controls.budget
        try:
            limits = parse_budget(text)
        except BudgetError as e:
            return Text.assemble(("new limits  ", "bold"), (str(e), "red"))
        refused = check_change(budget, "add", limits)
        if refused is not None:
            return Text.assemble(("new limits  ", "bold"), (refused, "red"))
        after = self.view.controls.copy()
        after.budget = budget.changed("add", limits)
        return Text.assemble(("new limits  ", "bold"), budget_text(after, self.now))

    @on(Input.Changed, "#limits")
    def _limits_changed(self, event: Input.Changed) -> None:
        self.query_one("#after", Static).update(self._after(event.value))

    @property
    def confirms(self) -> str:
        return f"raise {self.view.run_id}"

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

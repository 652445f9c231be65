"""Reconcile an indeterminate write: what it was, who approved it, when it started, where to
check, and then done (with the result the human found) or retry (after a confirmation).

``enter`` in the result box records what the human typed there; nothing else commits. The
choices below the box are a menu: "done" goes to the box, "retry" asks first.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from durableagent import RunView, StepView

from ..actions import Decision
from ..focus import focus_now
from ..story import reconcile_facts
from .approve import call_option
from .base import Act, ActingDialog, fit_heights, keys_line, login_name, steady
from .confirm import ConfirmDialog


class ReconcileDialog(ActingDialog):
    """An indeterminate write and the human's finding: done with a result, or retry."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", id="dialog.close")
    ]

    def __init__(
        self,
        view: RunView,
        act: Act,
        *,
        now: float | None = None,
        hints: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(view, now=now)
        self.act = act
        self.hints: Mapping[str, str] = hints or {}

    @property
    def step(self) -> StepView:
        """The write that started and has no result."""
        step = self.view.indeterminate
        assert step is not None
        return step

    def compose(self) -> ComposeResult:
        step = self.step
        call = step.call
        with Vertical(id="dialog", classes="reconcile"):
            yield Label(
                Text.assemble(("Reconcile  ", "bold"), self.view.run_id, "  ", (step.name, "bold"))
            )
            with VerticalScroll(id="story"):
                yield Static(reconcile_facts(self.view, step, self.now, self.hints))
                if call is not None:
                    yield Static(call_option(call.name, "", call.arguments), id="call")
            yield Static(
                Text(
                    "It started and never recorded a result: it may or may not have happened. "
                    "Check before you choose.",
                    style="yellow",
                ),
                classes="hint",
            )
            if self.view.late_write:
                yield Static(
                    Text(f"Careful: {self.view.late_write}.", style="bold red"),
                    id="late-write",
                    classes="hint",
                )
            yield OptionList(
                Option(Text("done: it happened; type the result in the box below"), id="done"),
                Option(Text(f"retry {step.name}: it did not happen; run it again…"), id="retry"),
                id="choice",
                compact=True,
            )
            yield Input(
                placeholder="the result you found, e.g. the ticket id",
                id="result",
                compact=True,
            )
            yield Static(id="error", classes="error")
            yield keys_line(
                ("enter", "done with this result"), ("shift+tab", "retry…"), ("esc", "cancel")
            )

    def on_resize(self) -> None:
        fit_heights(self, {"#story": 0.45})

    def on_mount(self) -> None:
        fit_heights(self, {"#story": 0.45})
        steady(self)
        self.query_one("#choice", OptionList).highlighted = 0
        focus_now(self.query_one("#result", Input))

    @on(Input.Submitted, "#result")
    def _entered(self) -> None:
        self.record_done()

    @on(OptionList.OptionSelected, "#choice")
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        if event.option.id == "retry":
            self.ask_retry()
        else:
            focus_now(self.query_one("#result", Input))

    def record_done(self) -> None:
        """Reconcile as done with the typed result; an empty box writes nothing."""
        step = self.step
        result = self.query_one("#result", Input).value.strip()
        if not result:
            self.show_error("Type the result you found (e.g. the ticket id), or choose retry.")
            focus_now(self.query_one("#result", Input))
            return
        payload = {"step": step.name, "outcome": "done", "result": result}
        decision = Decision(
            (("reconcile", payload),),
            login_name(),
            None,
            f"{step.name} reconciled as done: {result}",
        )
        self.submit(partial(self.act, self.pin, decision))

    def ask_retry(self) -> None:
        """Retry only after a yes: running the write again may repeat it."""
        step = self.step

        def answered(yes: bool | None) -> None:
            if yes:
                payload = {"step": step.name, "outcome": "retry"}
                decision = Decision(
                    (("reconcile", payload),), login_name(), None, f"{step.name} will be retried"
                )
                self.submit(partial(self.act, self.pin, decision))

        self.app.push_screen(
            ConfirmDialog(
                Text.assemble(
                    "Retry ",
                    (step.name, "bold"),
                    f" of {self.view.run_id}? If it did happen, running it again may repeat "
                    "the write (e.g. file a second ticket).",
                    (f" And {self.view.late_write}." if self.view.late_write else "", "red"),
                ),
                yes=f"Retry {step.name}",
            ),
            answered,
        )

    def action_close(self) -> None:
        self.dismiss(None)

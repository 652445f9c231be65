"""Decide on an incompatible run (``a`` on it; issue 25, docs/deploys.md): each call the new
version could not take over, with its recorded arguments and the tool's input schema before
and now side by side, and the three ways out, each asking why first: ``y`` accept the change
(``agentrun accept-change``), ``f`` fork from the model step that asked for the call (the last
step the new code can stand on), ``c`` cancel the run."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any, ClassVar

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Input, Label, Static

from durableagent import RunView
from durableagent.deploys import fork_step as core_fork_step

from .base import action_button, keys_text, login_name
from .typed import TypedDialog

# Runs in a thread: (way out: "accept" | "fork" | "cancel", run id, by, why, fork step, the
# journal's last seq the human saw) -> the toast text.
Decide = Callable[[str, str, str, str, str, int], str]


def fork_step(view: RunView) -> str:
    """The step to fork from: the model step that asked for the first blocked call (the copy
    keeps everything before it, and the new code asks the model again)."""
    return core_fork_step(view.outcome.blocked if view.outcome is not None else ())


def _schema(value: Any) -> Text:
    if value is None:
        return Text("(gone)", style="red")
    return Text(json.dumps(value, indent=1, sort_keys=True))


class ChangeDialog(TypedDialog):
    """An incompatible run's blocked calls, old and new schema side by side; why, then
    ``y`` / ``f`` / ``c``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f", "fork", "Fork", id="change.fork"),
        Binding("c", "cancel_run", "Cancel run", id="change.cancel"),
    ]

    def __init__(self, view: RunView, decide: Decide, *, now: float | None = None) -> None:
        super().__init__(view, now=now)
        self.decide = decide

    def compose(self) -> ComposeResult:
        view = self.view
        outcome = view.outcome
        blocked = outcome.blocked if outcome is not None else ()
        version = outcome.version if outcome is not None else ""
        with Vertical(id="dialog", classes="control change"):
            yield Label(
                Text.assemble(
                    ("Incompatible with version ", "bold"),
                    (version or "?", "bold"),
                    ("  ", ""),
                    view.run_id,
                )
            )
            with VerticalScroll(id="calls"):
                for b in blocked:
                    table = Table(expand=True, show_edge=False, pad_edge=False)
                    table.add_column("before (the run's code)")
                    table.add_column(f"now ({version or 'new'})")
                    table.add_row(_schema(b.get("old")), _schema(b.get("new")))
                    head = Text.assemble(
                        (str(b.get("step") or ""), "bold"),
                        "  ",
                        (str(b.get("reason") or ""), "red"),
                        "\narguments: ",
                        json.dumps(b.get("arguments"), sort_keys=True),
                    )
                    yield Static(head)
                    yield Static(table)
            yield Input(placeholder="why: the journal keeps it", id="reason", compact=True)
            with Horizontal(id="buttons"):
                yield action_button("Accept change", id="yes", variant="warning")
                yield action_button("Close", id="no")
            yield Static(id="error", classes="error")
            yield Static(id="keys", classes="keys")

    @property
    def confirms(self) -> str:
        return "accept the change"

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action in ("fork", "cancel_run") and isinstance(self.focused, Input):
            return False  # a letter typed in the box
        return super().check_action(action, parameters)

    def _relabel(self) -> None:
        if isinstance(self.focused, Input):
            super()._relabel()
            return
        keys = keys_text(
            ("y", "accept the change"),
            ("f", f"fork from {fork_step(self.view) or '?'}"),
            ("c", "cancel the run"),
            ("tab", "why"),
            ("esc", "close"),
        )
        self.query_one("#keys", Static).update(keys)

    def _why(self) -> str | None:
        reason = self.query_one("#reason", Input).value.strip()
        if not reason:
            self.show_error("Say why first: type it in the box (tab), then the key.")
            return None
        return reason

    def _go(self, how: str) -> None:
        reason = self._why()
        if reason is None:
            return
        step = fork_step(self.view)
        seq = self.view.last_seq
        self.submit(partial(self.decide, how, self.view.run_id, login_name(), reason, step, seq))

    def action_confirm(self) -> None:
        self._go("accept")

    def action_fork(self) -> None:
        self._go("fork")

    def action_cancel_run(self) -> None:
        self._go("cancel")

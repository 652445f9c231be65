"""A yes/no question about an action that may repeat a write. Only ``y`` or the labelled
button says yes: ``enter`` does nothing here, so a double-tapped enter never commits."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from .base import action_button, keys_line


class ConfirmDialog(ModalScreen[bool]):
    """Returns True for ``y`` (or the yes button), False for ``n``, ``esc`` or cancel."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: Text | str, *, yes: str = "Yes") -> None:
        super().__init__()
        self.question = question if isinstance(question, Text) else Text(question)
        self.yes = yes

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="confirm"):
            yield Static(self.question)
            with Horizontal(id="buttons"):
                yield action_button(self.yes, id="yes", variant="warning")
                yield action_button("Cancel", id="no")
            yield keys_line(("y", f"{self.yes[:1].lower()}{self.yes[1:]}"), ("n / esc", "cancel"))

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(False)

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)

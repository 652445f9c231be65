"""A dialog whose facts are typed into boxes before ``y`` writes (cancel, pause, resume, a
budget): what keys do there, in one place.

While a box has the focus, ``y`` is a letter typed in it. ``enter`` moves to the next box, or
out of the last one, as the key arrives (a priority binding runs before the next key is
passed on, so keys typed fast land where they are meant); it never writes. Only ``y`` or the
labelled button does.
"""

from __future__ import annotations

from typing import ClassVar

from textual import on
from textual.binding import Binding, BindingType
from textual.widgets import Button, Input, Static

from ..focus import focus_now
from .base import ActingDialog, keys_text, steady


class TypedDialog(ActingDialog):
    """Subclasses compose their boxes (``Input``), a ``#yes`` and a ``#no`` button, an
    ``#error`` and a ``#keys`` line, and give :meth:`action_confirm` and :attr:`confirms`."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "confirm", "Yes", id="typed.yes"),
        Binding("enter", "next_box", show=False, priority=True, id="typed.next"),
        Binding("escape", "close", "Close", id="typed.close"),
    ]

    @property
    def confirms(self) -> str:
        """What ``y`` does, for the key line (``cancel r1``)."""
        raise NotImplementedError

    def action_confirm(self) -> None:
        raise NotImplementedError

    def on_mount(self) -> None:
        steady(self)
        focus_now(self.query(Input).first())
        self._relabel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return not (action == "confirm" and isinstance(self.focused, Input))

    def _boxes(self) -> list[Input]:
        return list(self.query(Input))

    def _relabel(self) -> None:
        focused = self.focused
        if isinstance(focused, Input):
            last = focused is self._boxes()[-1]
            keys = keys_text(("enter", "done typing" if last else "next box"), ("esc", "close"))
        else:
            keys = keys_text(("y", self.confirms), ("tab", "the boxes"), ("esc", "close"))
        self.query_one("#keys", Static).update(keys)

    def action_next_box(self) -> None:
        boxes = self._boxes()
        focused = self.focused
        if isinstance(focused, Input) and focused in boxes and focused is not boxes[-1]:
            focus_now(boxes[boxes.index(focused) + 1])
        else:
            self.set_focus(None)
        self._relabel()

    def on_descendant_focus(self) -> None:
        self._relabel()

    def on_descendant_blur(self) -> None:
        self._relabel()

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.action_confirm()

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

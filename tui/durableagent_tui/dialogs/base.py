"""What every acting dialog shares: who signs, a steady cursor, and writing off the UI thread
with a reason shown when nothing was written."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from rich.text import Text
from textual import work
from textual.screen import ModalScreen, Screen
from textual.widgets import Button, Input, Static
from textual.widgets.button import ButtonVariant

from durableagent import DurableAgentError, RunView
from durableagent.people import login_name as core_login_name

from ..actions import ChangedUnderneath, Decision, Pin

# Runs in a thread: re-checks the pin and writes; returns the toast text.
Act = Callable[[Pin, Decision], str]


def login_name() -> str:
    """Who signs a decision: the login name, as the CLI does."""
    return core_login_name() or "unknown"


def steady(screen: Screen[Any]) -> None:
    """Follow the app's cursor_blink setting (off for snapshot pictures)."""
    blink = getattr(screen.app, "cursor_blink", True)
    for box in screen.query(Input):
        box.cursor_blink = blink


def action_button(label: str, *, id: str, variant: ButtonVariant = "default") -> Button:
    """A compact button whose label says what it does. It takes no focus: a stray enter or
    space can never press it; the keyboard acts through the dialog's named keys."""
    button = Button(Text(label), variant=variant, id=id, compact=True)
    button.can_focus = False
    return button


def keys_text(*keys: tuple[str, str]) -> Text:
    """A dialog's key line: each key in bold with what it does, ``·`` between them."""
    text = Text(style="dim")
    for i, (key, what) in enumerate(keys):
        if i:
            text.append(" · ")
        text.append(key, style="bold")
        text.append(f" {what}")
    return text


def keys_line(*keys: tuple[str, str]) -> Static:
    """The dialog's foot: :func:`keys_text` in a ``.keys`` line."""
    return Static(keys_text(*keys), classes="keys")


def fit_heights(screen: Screen[Any], shares: dict[str, float]) -> None:
    """Cap each scrolling part (selector: share of the terminal's height) in whole rows.

    In ``vh`` the cap would do, but Textual then sizes the auto-height dialog around the
    part's uncapped height, leaving blank rows at the dialog's foot."""
    rows = screen.app.size.height
    for selector, share in shares.items():
        for widget in screen.query(selector):
            widget.styles.max_height = max(3, int(rows * share))


class ActingDialog(ModalScreen[str | None]):
    """A dialog that writes off the UI thread, closes with the toast text on success and
    explains on failure (staying open)."""

    def __init__(self, view: RunView, *, now: float | None = None) -> None:
        super().__init__()
        self.view = view
        self.pin = Pin.of(view)
        self.now = time.time() if now is None else now
        self.busy = False

    def show_error(self, message: str) -> None:
        """Say why nothing was written; the dialog stays open."""
        banner = self.query_one("#error", Static)
        banner.update(Text(message))
        banner.display = True

    def submit(self, write: Callable[[], str]) -> None:
        """Run ``write`` in a thread; close on success, explain on failure. A second submit
        while one is under way is ignored."""
        if not self.busy:
            self.busy = True
            self._write(write)

    @work(thread=True, exit_on_error=False, group="write")
    def _write(self, write: Callable[[], str]) -> None:
        try:
            done = write()
        except ChangedUnderneath as e:
            self.app.call_from_thread(self._failed, str(e))
        except DurableAgentError as e:
            self.app.call_from_thread(self._failed, f"Nothing was written: {e}")
        else:
            self.app.call_from_thread(self._done, done)

    def _done(self, done: str) -> None:
        if self.is_current:
            self.dismiss(done)
        else:  # closed while the write was under way: still say that it was written
            self.app.notify(done, title="written", markup=False)

    def _failed(self, message: str) -> None:
        self.busy = False
        if self.is_current:
            self.show_error(message)
        else:
            self.app.notify(message, severity="error", markup=False)

"""Retry a failed run (``R``, the same as ``agentrun retry``): the confirmation names the run
and shows its whole error and what the workers have recorded about its failures."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Label, Static

from durableagent import RunView
from durableagent.labels import ago
from durableagent.worker import (
    DEFAULT_BACKOFF,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_BACKOFF,
    backoff_delay,
)

from ..actions import Failures, Pin
from ..story import facts_grid
from ..styles import clock
from .base import ActingDialog, action_button, fit_heights, keys_line

Retry = Callable[[Pin], str]


def failures_text(failures: Failures | None, now: float) -> Text:
    """The workers' failure count as a sentence; what is unknown is said to be unknown."""
    if failures is None:
        return Text("no failure count recorded (workers retry it with backoff on their own)")
    text = Text(f"failed {failures.failures} time{'s' if failures.failures != 1 else ''}")
    text.append(f", the last at {clock(failures.at)} ({ago(failures.at, now)})")
    if failures.stale:
        text.append("; a human has signalled since, so workers count afresh", style="dim")
    return text


def next_try_text(failures: Failures | None, now: float) -> Text:
    """When a worker tries the run again on its own, under a worker's default backoff and
    budget (the TUI cannot know how the workers were started: it says so)."""
    defaults = Text(
        f" (a worker's defaults: {DEFAULT_MAX_ATTEMPTS} attempts, backoff from "
        f"{DEFAULT_BACKOFF:g} s doubling to {DEFAULT_MAX_BACKOFF:g} s)",
        style="dim",
    )
    if failures is None or failures.stale:
        return Text("when the next worker looks (within seconds)")
    if failures.failures >= DEFAULT_MAX_ATTEMPTS:
        return Text.assemble("never: workers have given up on it", defaults)
    due = failures.at + backoff_delay(
        failures.failures, DEFAULT_BACKOFF, DEFAULT_MAX_BACKOFF, failures.retry_after
    )
    if due <= now:
        return Text.assemble("due now, when the next worker looks", defaults)
    return Text.assemble(f"at {clock(due)} (in {due - now:.0f} s)", defaults)


class RetryDialog(ActingDialog):
    """Asks before clearing a failed run's failure count so the next worker retries it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "retry", "Retry", id="retry.yes"),
        Binding("n,escape", "close", "Cancel", id="retry.no"),
    ]

    def __init__(
        self,
        view: RunView,
        retry: Retry,
        failures: Failures | None,
        *,
        now: float | None = None,
    ) -> None:
        super().__init__(view, now=now)
        self.retry = retry
        self.failures = failures

    def compose(self) -> ComposeResult:
        rid = self.view.run_id
        grid = facts_grid()
        grid.add_row("error", Text(self.view.error or "(no error text recorded)", style="red"))
        grid.add_row("workers", failures_text(self.failures, self.now))
        grid.add_row("next try", next_try_text(self.failures, self.now))
        last = self.failures.error if self.failures is not None else ""
        if last and last.strip() != self.view.error.strip():  # said once when they agree
            grid.add_row("last", Text(last))
        with Vertical(id="dialog", classes="retry"):
            yield Label(Text.assemble(("Retry failed run  ", "bold"), rid))
            with VerticalScroll(id="story"):
                yield Static(grid)
            yield Static(
                Text(
                    "Workers retry a failed run with backoff until it has failed too often. "
                    "Retrying clears its count: the next worker that looks runs it again.",
                    style="dim",
                )
            )
            with Horizontal(id="buttons"):
                yield action_button(f"Retry {rid}", id="yes", variant="warning")
                yield action_button("Cancel", id="no")
            yield Static(id="error", classes="error")
            yield keys_line(("y", f"retry {rid}"), ("n / esc", "cancel"))

    def on_mount(self) -> None:
        fit_heights(self, {"#story": 0.45})

    def on_resize(self) -> None:
        fit_heights(self, {"#story": 0.45})

    def action_retry(self) -> None:
        self.submit(partial(self.retry, self.pin))

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.action_retry()

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)

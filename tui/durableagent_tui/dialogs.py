"""Modal dialogs: approve/deny pending calls, reconcile an indeterminate write, confirm,
ask for a reason, and help. Each returns its value through ``dismiss``."""

from __future__ import annotations

import getpass
import time
from collections.abc import Callable
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from durableagent import DurableAgentError, RunView
from durableagent.labels import ago

from .actions import ChangedUnderneath, Decision, Pin
from .styles import clock
from .summaries import pretty

# Runs in a thread: re-checks the pin and writes; returns the toast text.
Act = Callable[[Pin, Decision], str]


def login_name() -> str:
    """Who signs a decision: the login name, as the CLI does."""
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def _steady(screen: ModalScreen[object]) -> None:
    """Follow the app's cursor_blink setting (off for snapshot pictures)."""
    blink = getattr(screen.app, "cursor_blink", True)
    for box in screen.query(Input):
        box.cursor_blink = blink


def _call_option(tool: str, step: str, arguments: object) -> Group:
    head = Text.assemble((tool, "bold"), "  ", (step, "dim"))
    return Group(head, Text(pretty(arguments)))


class _ActingDialog(ModalScreen[str | None]):
    """A dialog that writes through ``act`` off the UI thread and shows why it did not."""

    def __init__(self, view: RunView, act: Act, *, now: float | None = None) -> None:
        super().__init__()
        self.view = view
        self.pin = Pin.of(view)
        self.act = act
        self.now = time.time() if now is None else now
        self.busy = False

    def show_error(self, message: str) -> None:
        """Say why nothing was written; the dialog stays open."""
        banner = self.query_one("#error", Static)
        banner.update(Text(message))
        banner.display = True

    def submit(self, decision: Decision) -> None:
        """Write ``decision`` in a thread; close on success, explain on failure."""
        if not self.busy:
            self.busy = True
            self._write(decision)

    @work(thread=True, exit_on_error=False, group="write")
    def _write(self, decision: Decision) -> None:
        try:
            done = self.act(self.pin, decision)
        except ChangedUnderneath as e:
            self.app.call_from_thread(self._failed, str(e))
        except DurableAgentError as e:
            self.app.call_from_thread(self._failed, f"Nothing was written: {e}")
        else:
            self.app.call_from_thread(self.dismiss, done)

    def _failed(self, message: str) -> None:
        self.busy = False
        self.show_error(message)


class ApproveDialog(_ActingDialog):
    """The run's pending tool calls, each with its arguments in full."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "Approve", id="dialog.approve"),
        Binding("d", "deny", "Deny…", id="dialog.deny"),
        Binding("A", "approve_all", "Approve all", id="dialog.approve_all"),
        Binding("escape", "close", "Close", id="dialog.close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="approve"):
            yield Label(Text.assemble(("Approve or deny  ", "bold"), self.view.run_id))
            yield Static(
                Text(
                    f"{len(self.view.pending)} pending call(s) · last seq {self.pin.last_seq}"
                    f" · signed as {login_name()}",
                    style="dim",
                )
            )
            yield OptionList(
                *(
                    Option(_call_option(p.tool, p.step, p.arguments), id=p.marker)
                    for p in self.view.pending
                ),
                id="calls",
            )
            yield Input(placeholder="reason (optional)", id="reason")
            yield Static(id="error", classes="error")
            yield Static(
                Text("y approve · d deny · A approve all · tab reason · esc close", style="dim"),
                classes="keys",
            )

    def on_mount(self) -> None:
        _steady(self)
        self.query_one("#error").display = False
        self.query_one("#calls", OptionList).focus()

    def _reason(self) -> str | None:
        return self.query_one("#reason", Input).value.strip() or None

    def _highlighted(self) -> str | None:
        calls = self.query_one("#calls", OptionList)
        if calls.highlighted is None:
            return None
        return calls.get_option_at_index(calls.highlighted).id

    def action_approve(self) -> None:
        marker = self._highlighted()
        if marker is not None:
            self.submit(
                Decision(
                    (("approve", {"marker": marker}),),
                    login_name(),
                    self._reason(),
                    f"approved {marker.partition('#')[0]}",
                )
            )

    def action_approve_all(self) -> None:
        markers = [p.marker for p in self.view.pending]
        if markers:
            self.submit(
                Decision(
                    tuple(("approve", {"marker": m}) for m in markers),
                    login_name(),
                    self._reason(),
                    f"approved {len(markers)} call(s) of {self.view.run_id}",
                )
            )

    def action_deny(self) -> None:
        marker = self._highlighted()
        if marker is None:
            return

        def denied(reason: str | None) -> None:
            if reason is not None:
                self.submit(
                    Decision(
                        (("deny", {"marker": marker}),),
                        login_name(),
                        reason or None,
                        f"denied {marker.partition('#')[0]}",
                    )
                )

        self.app.push_screen(ReasonDialog(marker.partition("#")[0], self._reason() or ""), denied)

    def action_close(self) -> None:
        self.dismiss(None)

    @on(OptionList.OptionSelected, "#calls")
    def _selected(self) -> None:
        self.action_approve()


class ReconcileDialog(_ActingDialog):
    """An indeterminate write: what it was, when it started, and done (with the result the
    human found) or retry."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", id="dialog.close")
    ]

    def compose(self) -> ComposeResult:
        step = self.view.indeterminate
        assert step is not None
        call = step.call
        with VerticalScroll(id="dialog", classes="reconcile"):
            yield Label(Text.assemble(("Reconcile  ", "bold"), self.view.run_id))
            yield Static(
                Text.assemble(
                    ("step ", "dim"),
                    (step.name, "bold"),
                    ("  started ", "dim"),
                    f"{clock(step.started_at)} ({ago(step.started_at, self.now)})",
                )
            )
            if call is not None:
                yield Static(_call_option(call.name, "", call.arguments), id="call")
            yield Static(
                Text(
                    "It started and never recorded a result: check the external system "
                    "(was the ticket filed?) before you choose.",
                    style="yellow",
                ),
                classes="hint",
            )
            yield OptionList(
                Option(Text("done — it happened; record the result below"), id="done"),
                Option(Text("retry — it did not happen; run the write again"), id="retry"),
                id="choice",
            )
            yield Input(placeholder="the result you found, e.g. the ticket id", id="result")
            yield Static(id="error", classes="error")
            yield Static(
                Text("enter confirm · tab switch · esc cancel", style="dim"), classes="keys"
            )

    def on_mount(self) -> None:
        _steady(self)
        self.query_one("#error").display = False
        self.query_one("#choice", OptionList).highlighted = 0
        self.query_one("#result", Input).focus()

    @on(Input.Submitted, "#result")
    def _entered(self) -> None:
        self.confirm()

    @on(OptionList.OptionSelected, "#choice")
    def _chosen(self) -> None:
        self.confirm()

    def confirm(self) -> None:
        """Reconcile as the highlighted choice says; retry asks first."""
        step = self.view.indeterminate
        assert step is not None
        choice = self.query_one("#choice", OptionList)
        if choice.highlighted == 1:

            def retry(ok: bool | None) -> None:
                if ok:
                    self.submit(
                        Decision(
                            (("reconcile", {"step": step.name, "outcome": "retry"}),),
                            login_name(),
                            None,
                            f"{step.name} will be retried",
                        )
                    )

            self.app.push_screen(
                ConfirmDialog(
                    f"Retry {step.name}? It may repeat the write "
                    "(e.g. file a second ticket) if it did happen."
                ),
                retry,
            )
            return
        result = self.query_one("#result", Input).value.strip()
        if not result:
            self.show_error("Type the result you found (e.g. the ticket id), or choose retry.")
            self.query_one("#result", Input).focus()
            return
        self.submit(
            Decision(
                (("reconcile", {"step": step.name, "outcome": "done", "result": result}),),
                login_name(),
                None,
                f"{step.name} reconciled as done: {result}",
            )
        )

    def action_close(self) -> None:
        self.dismiss(None)


class ConfirmDialog(ModalScreen[bool]):
    """A yes/no question; enter or y says yes, esc or n says no."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y,enter", "answer(True)", "Yes", id="confirm.yes"),
        Binding("n,escape", "answer(False)", "No", id="confirm.no"),
    ]

    def __init__(self, question: str) -> None:
        super().__init__()
        self.question = question

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="confirm"):
            yield Static(Text(self.question))
            yield Static(Text("y / enter yes · n / esc no", style="dim"), classes="keys")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)


class ReasonDialog(ModalScreen[str | None]):
    """Asks why a call is denied; enter sends (empty is allowed), esc cancels."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "cancel", "Cancel", id="reason.cancel")
    ]

    def __init__(self, what: str, reason: str = "") -> None:
        super().__init__()
        self.what = what
        self.reason = reason

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog", classes="reason"):
            yield Label(Text.assemble(("Deny  ", "bold"), self.what))
            yield Input(value=self.reason, placeholder="why (shown to the agent)", id="why")
            yield Static(Text("enter deny · esc cancel", style="dim"), classes="keys")

    def on_mount(self) -> None:
        _steady(self)
        self.query_one("#why", Input).focus()

    @on(Input.Submitted, "#why")
    def _send(self, event: Input.Submitted) -> None:
        self.dismiss(event.value.strip())

    def action_cancel(self) -> None:
        self.dismiss(None)


HELP = """\
Runs needing a human come first: corrupt, indeterminate, awaiting approval, failed;
then running, ready, completed. Newest activity first within a group.

  n        jump to the next run that needs a human (oldest first)
  a        approve or deny the run's pending tool calls
  r        reconcile the run's indeterminate write (done + result, or retry)
  enter    open the run's timeline
  tab      move between panes: runs, timeline, record
  /        filter by run id or status (esc clears)
  ctrl+p   command palette (the same actions)
  ?        this help
  q        quit

In the approve dialog: y approve · d deny (asks why) · A approve all · esc close.
In the reconcile dialog: type the result and press enter, or choose retry.
Status: ⊘ corrupt  ✖ indeterminate  ▲ awaiting  ✗ failed  ● running  ○ ready  ✓ completed
"""


class HelpScreen(ModalScreen[None]):
    """The keys and what the statuses mean."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "close", "Close", id="help.close")
    ]

    def __init__(self, read_only: bool = False) -> None:
        super().__init__()
        self.read_only = read_only

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="help"):
            yield Label(Text("agentrun tui — keys", style="bold"))
            text = HELP
            if self.read_only:
                text += "\nRead-only: approve, deny and reconcile are hidden.\n"
            yield Static(Text(text))
            yield Static(Text("esc close", style="dim"), classes="keys")

    def action_close(self) -> None:
        self.dismiss(None)

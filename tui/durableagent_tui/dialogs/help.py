"""The keys and what the statuses mean: every key that acts is named here."""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

HELP = """\
Runs needing a human come first: corrupt, indeterminate, awaiting approval, failed;
then running, ready, completed. Newest activity first within a group.

  n            the next run that needs a human, in the table's order
  a            approve or deny the run's pending tool calls
  r            reconcile the run's indeterminate write (done + result, or retry)
  R            retry a failed run now (as agentrun retry; asks first)
  enter        open the run's timeline        esc   back to the runs
  j k ↓ ↑      move in a table                g G home end   first / last row
  tab          move between panes: runs, timeline, record
  /            filter by run id or status (esc clears)
  ctrl+p       command palette (the same actions)
  ?            this help
  q  ctrl+c    quit

Approve dialog: enter or a click only selects a call.
  y approve it · d deny it (type why, enter sends) · A approve all
  tab the reason box (sent with y, d or A) · esc close
Reconcile dialog: type the result you found and press enter (done),
  or shift+tab to the choices: retry asks again (y retries, enter does not).
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
                text += "\nRead-only: approve, deny, reconcile and retry are hidden.\n"
            yield Static(Text(text))
            yield Static(Text("esc close", style="dim"), classes="keys")

    def action_close(self) -> None:
        self.dismiss(None)

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
Runs needing a human come first (corrupt, indeterminate,
over budget, incompatible, awaiting approval, failed),
then running, paused, ready, completed, cancelled, moved;
newest activity first within a group.

  n          the next run needing a human, in table order
  a          approve or deny the run's pending calls
  r          reconcile its indeterminate write
  R          retry a failed run now (agentrun retry; asks)
  c          cancel the run: no step starts again (asks why)
  P          pause the run, or resume a paused one (asks)
  B          raise a budgeted run's limits (asks why)
  p          the recovery plan: what its next attempt will do
  f          fork it from the step under the timeline's cursor
  w          the workers: who is working, live or gone
  enter      open the run's timeline
  esc        back: record → timeline → runs; clears a filter
  j k ↓ ↑    move in a table
  g G        first / last row (home / end too)
  tab        next pane: runs, timeline, record
  /          filter: words of a run id or status, or terms
             as ls --where takes them (status:failed age>1h)
  space      mark a run; a, d (deny), R, c, P then act on every
             marked run at once (asks once, naming how many)
  ctrl+p     command palette (the same actions)
  ?          this help
  q  ctrl+c  quit

Approve dialog: enter or a click only selects a call.
  y approve it · A approve all · d deny it: type why,
  enter sends · tab the reason box (goes with y, d, A)
  esc close
Reconcile dialog: type the result you found, enter
  records it as done; shift+tab to the choices: retry
  asks again (y retries, enter does not) · esc cancel
Cancel / pause dialog: type why, enter leaves the box,
  y cancels or pauses (a reason is required) · esc close
Budget dialog: the limits to add (the new limits show as
  you type), enter, why, enter; y raises · esc close
Fork dialog: the new id, a reason, keep or drop the
  approvals; enter asks, naming both runs (y forks)

⊘ corrupt  ✖ indeterminate  ◆ over budget  ≠ incompatible
▲ awaiting  ✗ failed  ● running  ‖ paused  ○ ready
✓ completed  ■ cancelled  ⇢ moved
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
                text += "\nRead-only: approve, deny, reconcile, retry and fork are hidden.\n"
            yield Static(Text(text))
            yield Static(Text("esc close", style="dim"), classes="keys")

    def action_close(self) -> None:
        self.dismiss(None)

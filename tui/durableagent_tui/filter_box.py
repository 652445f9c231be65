"""The ``/`` filter box over the runs table: the query language of ``agentrun ls --where``
and bare words (run_filter.py), a term that does not parse said under the box.

A base of SupervisorApp, typed to the app's ``Host`` (host.py)."""

from __future__ import annotations

from rich.text import Text
from textual import on
from textual.widgets import Input, Static

from durableagent.query import QueryError

from .focus import focus_now
from .host import AppBase


class FilterBox(AppBase):
    """The filter box's keys and what it shows."""

    def action_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if not box.display and box.value.strip() != self.filter_text:
            box.value = self.filter_text  # keys that reached it while hidden are dropped
        box.display = True
        focus_now(box)

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        if not event.input.display:
            return  # a key typed right after esc, on its way before the box closed
        self.set_filter(event.value)

    def action_filter_done(self) -> None:
        """enter in the filter: back to the runs, as the key arrives (keys typed right after
        it are the table's, not more filter text). The run under the cursor is the chosen
        one from now on (esc then keeps it; esc in the box goes back to the one before)."""
        self.table.choose_selected()
        focus_now(self.table)

    def set_filter(self, text: str) -> None:
        """Show only the runs the filter selects: query terms as ``agentrun ls --where`` takes
        them (status:failed age>1h -tool:send_email) and bare words a run's id or status
        contains (case-insensitive). A term that does not parse is said under the box, and the
        last good filter stays. The model narrows its matches while the filter only adds to
        them, and the table draws only what is on screen."""
        error = self.query_one("#filter-error", Static)
        try:
            self.rows.set_filter(text)
        except QueryError as e:
            error.update(Text(str(e), style="bold red"))
            error.display = True
            return
        error.display = False
        self.filter_text = self.rows.filter
        self.show_filtered()
        self.refresh_bindings()

    def show_filtered(self) -> None:
        """Draw the runs the filter shows now (after the filter or what it reads changed):
        the selected run stays selected if it matches; else the first match is."""
        with self.batch_update():
            self.table.rows_changed(top_if_gone=True)
            self._update_empty()

    def action_clear_filter(self) -> None:
        box = self.query_one("#filter", Input)
        if box.display or self.filter_text:
            box.value = ""
            box.display = False
            self.set_filter("")
            self.query_one("#filter-error").display = False
            focus_now(self.table)

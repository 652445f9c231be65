"""Actions on every marked run at once (``space`` marks a row): one question naming the action
and how many runs, then each run's action applied on its own through durableagent.bulk (the
library ``agentrun cancel --where`` uses: each signal validated under its journal's lock) in a
thread worker, and one toast with the applied and refused counts.

Generic over the actions of durableagent.bulk.ACTIONS: an action key calls
``act_on_marked(name)`` first and does its single-run thing only when that returns False (no
run is marked). approve (``a``), retry (``R``), cancel (``c``) and pause or resume (``P``)
are wired here; ``d`` denies the marked runs' calls.
"""

from __future__ import annotations

from textual import on, work

from durableagent import Summary
from durableagent.bulk import ACTIONS, Action, Done, apply_action, plan_action

from .acting import DialogActions
from .dialogs.base import login_name
from .dialogs.bulk import BulkDialog
from .runs_table import RunsTable

REFUSALS_SHOWN = 3  # refused runs named in the toast; the rest are counted


class MarkedActions(DialogActions):
    """The marked rows' actions, over the single-run ones of DialogActions."""

    def act_on_marked(self, name: str) -> bool:
        """Ask about ``name`` on every marked run (and apply it on a yes); False, and nothing
        done, when no run is marked or the TUI is read-only."""
        if self.read_only or not self.rows.marked:
            return False
        runs = self.rows.marked_runs()
        if not runs:
            return False
        action = ACTIONS[name]

        def answered(reason: str | None) -> None:
            if reason is not None:
                # Once the question is off the screen: the toast is the main screen's.
                self.call_after_refresh(self._apply_marked, action, runs, reason or None)

        self.push_screen(BulkDialog(action, runs), answered)
        return True

    @work(thread=True, exclusive=True, group="bulk", exit_on_error=False)
    def _apply_marked(self, action: Action, runs: list[Summary], reason: str | None) -> None:
        store = self.tracker.store
        assert store is not None
        targets = plan_action(action, runs)
        done = apply_action(store, action, targets, by=login_name(), reason=reason)
        self.call_from_thread(self._applied, action, done)

    def _applied(self, action: Action, done: list[Done]) -> None:
        applied = [d for d in done if d.applied]
        refused = [d for d in done if not d.applied]
        for d in applied:
            self.rows.marked.discard(d.run_id)  # what is left marked is what was refused
        text = f"{action.verb}: {len(applied)} applied, {len(refused)} refused"
        for d in refused[:REFUSALS_SHOWN]:
            text += f"\n{d.message}"
        if len(refused) > REFUSALS_SHOWN:
            text += f"\n… and {len(refused) - REFUSALS_SHOWN} more refused"
        self.notify(
            text,
            title="written" if not refused else "some refused",
            severity="warning" if refused else "information",
            markup=False,
        )
        self._show_marks()

    @on(RunsTable.Marked)
    def _marks_changed(self) -> None:
        self._show_marks()

    def _show_marks(self) -> None:
        count = len(self.rows.marked)
        title = "runs" if not count else f"runs · {count} marked (a, d, R, c, P act on them)"
        self.query_one("#runs-pane").border_title = title
        self.table.refresh()
        self.refresh_bindings()

    def action_approve(self) -> None:
        if not self.act_on_marked("approve"):
            super().action_approve()

    def action_retry(self) -> None:
        if not self.act_on_marked("retry"):
            super().action_retry()

    def action_cancel(self) -> None:
        if not self.act_on_marked("cancel"):
            super().action_cancel()

    def action_pause(self) -> None:
        """``P`` on marked runs: resume them when every one is paused, else pause them."""
        runs = self.rows.marked_runs() if self.rows.marked else []
        held = bool(runs) and all(r.paused for r in runs)
        if not self.act_on_marked("resume" if held else "pause"):
            super().action_pause()

    def action_resume(self) -> None:
        if not self.act_on_marked("resume"):
            super().action_resume()

    def action_deny_marked(self) -> None:
        """``d``: deny every pending call of the marked runs (one run's calls are denied in
        its approve dialog, with a reason the model reads)."""
        if not self.act_on_marked("deny"):
            self.notify(
                "d denies the marked runs' pending calls: mark runs with space first "
                "(a opens one run's calls).",
                markup=False,
            )

"""The main screen's actions that open a dialog on the selected run and write through it:
approve, reconcile, retry, cancel, pause, resume, fork, the recovery plan, and the word on a key
that does not apply.

A base of SupervisorApp (kept apart from the app's layout and live updates), typed to the
app's ``Host`` (host.py), never to the app itself. Every write runs
in a dialog's thread worker, through ``_act``, ``_retry`` or ``_fork``: the only places the TUI
writes to a store.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from textual import work

from durableagent import RunStatus, RunView, Summary, actions, plan
from durableagent.fork import fork_points

from .actions import (
    Decision,
    Failures,
    Pin,
    failure_state,
    retry_failed,
    write_budget,
    write_control,
    write_decision,
)
from .dialogs import ApproveDialog, ForkDialog, PlanScreen, ReconcileDialog, RetryDialog
from .dialogs.base import login_name
from .dialogs.budget import BudgetDialog
from .dialogs.change import ChangeDialog
from .dialogs.control import ControlDialog
from .host import AppBase
from .styles import LOOKS

# A run in one of these is done with: nothing cancels, pauses or resumes it.
_DONE = frozenset({RunStatus.COMPLETED, RunStatus.CANCELLED, RunStatus.MOVED, RunStatus.CORRUPT})


def control_offered(action: str, run: Summary | None) -> bool | None:
    """Whether ``cancel``, ``pause``, ``resume`` or ``budget`` applies to ``run``: True, None
    (greyed out) or False (hidden: ``P`` shows Pause or Resume, whichever the run takes; ``B``
    shows only on a run with a budget)."""
    paused = run is not None and run.paused  # the one rule: Summary.paused
    if action == "resume":
        return run is not None and run.status not in _DONE and paused
    if action == "budget":  # raises a limit the run has; agentrun budget --set gives one
        return run is not None and run.status not in _DONE and run.budget is not None
    if run is None or run.status in _DONE:
        return None
    if action == "cancel":
        return None if run.stopping == "cancel" else True
    return not paused  # pause


class DialogActions(AppBase):
    """Open the dialog an action needs, on the selected run as it is now."""

    _jump_to: str | None

    def _with_view(self, want: RunStatus | None, open_it: Callable[[RunView], object]) -> None:
        """Call ``open_it`` with the selected run whole: the timeline's view when it is as
        new as the run's summary, else one read off the loop first. Nothing when the run is
        no longer ``want`` (or not selected) by then."""
        summary = self.selected
        if summary is None or (want is not None and summary.status != want):
            return
        view = self.selected_view
        if view is not None and view.last_seq == summary.last_seq and view.status == summary.status:
            open_it(view)
        else:
            self._read_then_open(summary.run_id, want, open_it)

    @work(thread=True, exclusive=True, group="dialog", exit_on_error=False)
    def _read_then_open(
        self, rid: str, want: RunStatus | None, open_it: Callable[[RunView], object]
    ) -> None:
        view = self.tracker.view(rid)
        self.call_from_thread(self._open_if_still, rid, want, view, open_it)

    def _open_if_still(
        self, rid: str, want: RunStatus | None, view: RunView, open_it: Callable[[RunView], object]
    ) -> None:
        if len(self.screen_stack) > 1 or self.table.selected_run != rid:
            return  # a dialog came up, or the cursor moved on, meanwhile
        if want is None or view.status == want:
            open_it(view)

    def action_approve(self) -> None:
        if self.read_only:
            return

        def open_it(view: RunView) -> None:
            if view.pending:
                dialog = ApproveDialog(view, self._act, now=self.clock())
                self.push_screen(dialog, self._written)

        self._with_view(RunStatus.AWAITING_APPROVAL, open_it)

    def action_change(self) -> None:
        """An incompatible run: its blocked calls, old and new schema, and the ways out."""
        if self.read_only:
            return

        def open_it(view: RunView) -> None:
            if view.outcome is not None and view.outcome.blocked:
                dialog = ChangeDialog(view, self._decide_change, now=self.clock())
                self.push_screen(dialog, self._written)

        self._with_view(RunStatus.INCOMPATIBLE, open_it)

    def _decide_change(
        self, how: str, run_id: str, by: str, reason: str, step: str, seq: int
    ) -> str:
        """Called in the change dialog's thread worker."""
        store = self.tracker.store
        assert store is not None
        if how == "accept":
            actions.accept_change(store, run_id, by=by, reason=reason, expect_seq=seq)
            return f"accepted the change for {run_id}: a worker runs it with the new code"
        if how == "cancel":
            return write_control(store, run_id, "cancel", by, reason)
        new = f"{run_id}-{int(self.clock())}"
        actions.fork(store, run_id, new, at_step=step, signals="keep", by=by, reason=reason)
        self._jump_to = new
        return f"forked {run_id} at {step} as {new}; a worker runs it with the new code"

    def action_reconcile(self) -> None:
        if self.read_only:
            return

        def open_it(view: RunView) -> None:
            if view.indeterminate is not None:
                dialog = ReconcileDialog(view, self._act, now=self.clock(), hints=self.hints)
                self.push_screen(dialog, self._written)

        self._with_view(RunStatus.INDETERMINATE, open_it)

    def action_retry(self) -> None:
        if self.read_only:
            return
        self._with_view(RunStatus.FAILED, self._open_retry)

    def action_cancel(self) -> None:
        self._open_control("cancel")

    def action_pause(self) -> None:
        self._open_control("pause")

    def action_resume(self) -> None:
        self._open_control("resume")

    def _open_control(self, name: str) -> None:
        if self.read_only or not control_offered(name, self.selected):
            return

        def open_it(view: RunView) -> None:
            dialog = ControlDialog(view, name, self._control, now=self.clock())
            self.push_screen(dialog, self._written)

        self._with_view(None, open_it)

    def action_budget(self) -> None:
        if self.read_only or not control_offered("budget", self.selected):
            return

        def open_it(view: RunView) -> None:
            self.push_screen(BudgetDialog(view, self._raise, now=self.clock()), self._written)

        self._with_view(None, open_it)

    def _raise(self, run_id: str, limits: dict[str, Any], by: str, reason: str) -> str:
        """Called in the budget dialog's thread worker."""
        store = self.tracker.store
        assert store is not None
        return write_budget(store, run_id, limits, by, reason)

    def _control(self, run_id: str, name: str, by: str, reason: str | None) -> str:
        """Called in the control dialog's thread worker."""
        store = self.tracker.store
        assert store is not None
        return write_control(store, run_id, name, by, reason)

    def action_plan(self) -> None:
        """The selected run's recovery plan: what its next attempt will do with each step."""

        def open_it(view: RunView) -> None:
            if view.status == RunStatus.CORRUPT:
                self.notify(f"{view.run_id}: its journal does not load; no plan.", markup=False)
                return
            self.push_screen(PlanScreen(view, plan(view.records, outcome=view.outcome)))

        self._with_view(None, open_it)

    @work(thread=True, exclusive=True, group="retry", exit_on_error=False)
    def _open_retry(self, view: RunView) -> None:
        # The failure count is a file read: off the event loop, then the dialog.
        store = self.tracker.store
        failures = failure_state(store, view) if store is not None else None
        self.call_from_thread(self._show_retry, view, failures)

    def _show_retry(self, view: RunView, failures: Failures | None) -> None:
        if len(self.screen_stack) > 1:
            return  # another dialog came up meanwhile
        dialog = RetryDialog(view, self._retry, failures, now=self.clock())
        self.push_screen(dialog, self._written)

    def _retry(self, pin: Pin) -> str:
        """Called in the retry dialog's thread worker."""
        store = self.tracker.store
        assert store is not None
        return retry_failed(store, pin)

    def action_fork(self) -> None:
        """Fork the selected run from the step under the timeline's cursor (asks first)."""
        if self.read_only:
            return
        view = self.selected_view
        record = self.timeline.record_at_cursor()
        if view is None or self.timeline.run_id != view.run_id:
            self.notify("Select a run first and wait for its timeline: f forks from its steps.")
            return
        if view.status == RunStatus.CORRUPT:
            self.notify(f"{view.run_id}: its journal does not load; no fork.", markup=False)
            return
        step = record.step if record is not None else ""
        if not step or step not in fork_points(view.records):
            self.notify(
                "f forks from the step under the timeline's cursor: move it to a step's row "
                "(tab to the timeline, then up or down).",
                markup=False,
            )
            return
        dialog = ForkDialog(view, step, self._fork, lambda rid: rid in self.rows.summaries)
        self.push_screen(dialog, self._written)

    def _fork(
        self, run_id: str, new_run_id: str, step: str, signals: str, reason: str | None
    ) -> str:
        """Called in the fork dialog's thread worker: planned again on the store's records."""
        store = self.tracker.store
        assert store is not None
        actions.fork(
            store, run_id, new_run_id, at_step=step, signals=signals, by=login_name(), reason=reason
        )
        self._jump_to = new_run_id  # selected once the table has it
        return f"forked {run_id} at {step} as {new_run_id}; a worker runs it from {step}"

    def action_unavailable(self, action: str) -> None:
        """Say why a key did nothing: the selected run does not offer that action."""
        view = self.selected
        if view is None:
            self.notify("No run is selected.", markup=False)
            return
        if action == "budget" and view.status not in _DONE:
            self.notify(
                f"{view.run_id} has no budget to raise: agentrun budget {view.run_id} --set "
                "LIMITS --reason WHY gives it one.",
                markup=False,
            )
            return
        offer = {
            RunStatus.AWAITING_APPROVAL: " (a approves or denies its calls)",
            RunStatus.INDETERMINATE: " (r reconciles its open write)",
            RunStatus.FAILED: " (R retries it)",
            RunStatus.PAUSED: " (P resumes it)",
            RunStatus.OVER_BUDGET: " (B raises its budget)",
            RunStatus.INCOMPATIBLE: " (a decides on the change: accept, fork or cancel)",
        }.get(view.status, "")
        word = LOOKS[view.status].word
        self.notify(f"{view.run_id} has nothing to {action}: it is {word}{offer}.", markup=False)

    def _act(self, pin: Pin, decision: Decision) -> str:
        """Called in a dialog's thread worker: every human decision the TUI writes."""
        store = self.tracker.store
        assert store is not None
        return write_decision(store, pin, decision)

    def _written(self, done: str | None) -> None:
        # The table changes when the watcher sees the record, not here.
        self._jump()  # a fork the table already shows is selected now
        if done:
            self.notify(done, title="written", markup=False)

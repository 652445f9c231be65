"""Fork a run from a step (``f`` on a timeline row, the same as ``agentrun fork``): the new id
prefilled and editable, a reason, whether the original's approvals come along, what the fork
will replay and run afresh, and a confirmation naming both runs before anything is written.

``enter`` in a box (or the button) only asks; ``y`` in the question forks. The plan is made
again from the store when the fork is written, so a run that moved on meanwhile is forked as
it is then, and a fork that became impossible is refused with the reason (nothing written).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ClassVar

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, RadioButton, RadioSet, Static

from durableagent import DurableAgentError, RunView
from durableagent.fork import DROP, KEEP, ForkPlan, plan_fork

from ..focus import focus_now
from ..story import facts_grid
from .base import ActingDialog, action_button, keys_line, login_name, steady
from .confirm import ConfirmDialog

# Runs in a thread: forks ``run`` at ``step`` as ``new``; returns the toast text.
ForkRun = Callable[[str, str, str, str, str | None], str]


def fork_id(run_id: str, taken: Callable[[str], bool]) -> str:
    """The id a fork of ``run_id`` is offered: ``RUN-fork``, else ``RUN-fork-2``, ``-3``…"""
    base = f"{run_id[:120]}-fork"
    if not taken(base):
        return base
    n = 2
    while taken(f"{base}-{n}"):
        n += 1
    return f"{base}-{n}"


def replayed(plan: ForkPlan) -> tuple[int, int]:
    """How many model calls and tool calls the fork replays from the copy (no call again)."""
    done = {(r.kind, r.step) for r in plan.copies if r.type == "step.completed"}
    return sum(1 for k, _ in done if k == "model"), sum(1 for k, _ in done if k == "tool")


def plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def signals_words(plan: ForkPlan, signals: str) -> str:
    """What becomes of the original's human decisions, in words."""
    if signals == DROP:
        left = len(plan.dropped_signals)
        return f"drops every signal ({plural(left, 'decision')} left behind): it asks again"
    kept, left = len(plan.kept_signals), len(plan.dropped_signals)
    if not kept and not left:
        return f"no human decision before {plan.at_step} to carry over"
    text = f"keeps {plural(kept, 'decision')} on the same calls (same arguments)"
    return text + (f"; leaves {left} behind" if left else "")


class ForkDialog(ActingDialog):
    """The new run's id, a reason and the signals choice; ``enter`` asks, ``y`` forks."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Cancel", id="dialog.close")
    ]

    def __init__(
        self,
        view: RunView,
        step: str,
        fork_run: ForkRun,
        taken: Callable[[str], bool],
        *,
        now: float | None = None,
    ) -> None:
        super().__init__(view, now=now)
        self.step = step
        self.fork_run = fork_run
        self.taken = taken
        self.plan: ForkPlan | None = None

    def compose(self) -> ComposeResult:
        rid = self.view.run_id
        with Vertical(id="dialog", classes="fork"):
            yield Label(Text.assemble(("Fork  ", "bold"), rid, "  at ", (self.step, "bold")))
            yield Static(
                Text(
                    "A new run that replays this run's history before the step (no model or "
                    "tool call repeated) and runs the step onwards afresh, with the agent the "
                    f"worker runs now. {rid} is not changed.",
                    style="dim",
                )
            )
            yield Label(Text("new run id", style="bold"), classes="field")
            yield Input(fork_id(rid, self.taken), id="new-id", compact=True)
            yield Label(Text("reason (kept in the fork's first record)", style="bold"))
            yield Input(
                placeholder="e.g. prompt fixed for the refund policy", id="reason", compact=True
            )
            with RadioSet(id="signals", compact=True):
                yield RadioButton("keep approvals on the same calls", value=True, id="keep")
                yield RadioButton("drop every signal: the fork asks again", id="drop")
            yield Static(id="preview")
            with Horizontal(id="buttons"):
                yield action_button("Fork…", id="yes", variant="warning")
                yield action_button("Cancel", id="no")
            yield Static(id="error", classes="error")
            yield keys_line(
                ("enter", "fork… (asks first)"), ("tab", "next field"), ("esc", "cancel")
            )

    def on_mount(self) -> None:
        steady(self)
        focus_now(self.query_one("#new-id", Input))
        self.preview()

    @property
    def signals(self) -> str:
        return DROP if self.query_one("#drop", RadioButton).value else KEEP

    @property
    def new_id(self) -> str:
        return self.query_one("#new-id", Input).value.strip()

    @property
    def reason(self) -> str | None:
        return self.query_one("#reason", Input).value.strip() or None

    @on(Input.Changed)
    @on(RadioSet.Changed)
    def preview(self) -> None:
        """What the fork would write, or why it cannot be made; the plan is pure (no I/O)."""
        box = self.query_one("#preview", Static)
        self.query_one("#error", Static).display = False
        new = self.new_id
        self.plan = None
        try:
            if self.taken(new):
                raise ValueError(f"{new} already exists: choose another id")
            plan = plan_fork(
                self.view.records,
                self.view.run_id,
                new,
                at_step=self.step,
                signals=self.signals,
                by=login_name(),
                reason=self.reason,
            )
        except (DurableAgentError, ValueError) as e:
            why = str(e)
            box.update(Text(why if why.startswith("cannot") else f"cannot fork: {why}", "red"))
            return
        self.plan = plan
        models, tools = replayed(plan)
        grid = facts_grid()
        grid.add_row(
            "replays",
            Text(
                f"{plural(models, 'model call')} and {plural(tools, 'tool call')} "
                f"({plural(len(plan.copies), 'record')} copied)"
            ),
        )
        grid.add_row("runs", Text(f"{self.step} onwards afresh, when a worker picks it up"))
        grid.add_row("signals", Text(signals_words(plan, self.signals)))
        box.update(grid)

    @on(Input.Submitted)
    def _entered(self) -> None:
        self.ask()

    @on(Button.Pressed, "#yes")
    def _yes(self) -> None:
        self.ask()

    @on(Button.Pressed, "#no")
    def _no(self) -> None:
        self.dismiss(None)

    def ask(self) -> None:
        """A question naming both runs; only its yes forks."""
        plan = self.plan
        if plan is None:
            self.show_error("Nothing to fork yet: the line above says why.")
            return
        rid, new, step, signals = self.view.run_id, plan.new_run_id, self.step, self.signals
        question = Text.assemble(
            "Fork ",
            (rid, "bold"),
            " at ",
            (step, "bold"),
            " as ",
            (new, "bold"),
            "?\n\n",
            f"{new} replays {rid}'s history before {step} and runs {step} onwards afresh. ",
            f"{rid} is not changed.\n\n",
            ("signals ", "dim"),
            signals_words(plan, signals),
            "\n",
            ("reason  ", "dim"),
            self.reason or "(none given)",
        )
        reason = self.reason

        def answered(yes: bool | None) -> None:
            if yes:
                self.submit(partial(self.fork_run, rid, new, step, signals, reason))

        self.app.push_screen(ConfirmDialog(question, yes=f"Fork as {new}"), answered)

    def action_close(self) -> None:
        self.dismiss(None)

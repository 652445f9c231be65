"""Approve or deny a run's pending tool calls, with the story that led to them.

Safety: ``enter`` or a click on a pending call only selects it. A write is approved or denied
only by a named key (``y``, ``d``, ``A``) or by a button whose label says what it does; the
buttons take no focus, so no stray ``enter`` or ``space`` can press one.
"""

from __future__ import annotations

from functools import partial
from typing import ClassVar

from rich.console import Group
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

from durableagent import Pending, RunView, marker_step
from durableagent.deadlines import lapse_text

from ..actions import Decision
from ..focus import focus_now
from ..story import approval_story
from ..summaries import pretty
from .base import Act, ActingDialog, action_button, fit_heights, keys_text, login_name, steady


def call_option(
    tool: str, step: str, arguments: object, policy: str = "", lapses: str = ""
) -> Group:
    """A call as the human judges it: the tool, its step, its class and where that came from
    (an MCP tool's ``Pending.policy``; journal text, never markup), when its approval lapses
    (then the workers deny it), and its arguments whole."""
    head = Text.assemble((tool, "bold"), "  ", (step, "dim"))
    lines = [head]
    if policy:
        lines.append(Text(policy, style="italic"))
    if lapses:
        lines.append(Text(f"lapses {lapses}: then it is denied, never approved", style="yellow"))
    return Group(*lines, Text(pretty(arguments)))


def lapses(p: Pending, now: float) -> str:
    """When ``p``'s approval lapses, or "" for a call without a deadline."""
    return "" if p.deadline_at is None else lapse_text(p.deadline_at, now)


class ApproveDialog(ActingDialog):
    """The run's pending tool calls, each with its arguments in full, below the request, the
    model's words and the turn's earlier results."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "approve", "Approve", id="dialog.approve"),
        # d moves the focus to the reason box as the key arrives (a priority binding runs
        # before the next key is passed on), so a reason typed right after it lands there.
        Binding("d", "deny", "Deny…", priority=True, id="dialog.deny"),
        Binding("A", "approve_all", "Approve all", id="dialog.approve_all"),
        Binding("escape", "back", "Close", id="dialog.close"),
    ]

    def __init__(self, view: RunView, act: Act, *, now: float | None = None) -> None:
        super().__init__(view, now=now)
        self.act = act
        self.denying: Pending | None = None  # the call the reason box is denying, if any

    def compose(self) -> ComposeResult:
        view = self.view
        n = len(view.pending)
        with Vertical(id="dialog", classes="approve"):
            yield Label(Text.assemble(("Approve or deny  ", "bold"), view.run_id))
            yield Static(
                Text(
                    f"{n} pending call{'s' if n != 1 else ''} · last seq {self.pin.last_seq}"
                    f" · signed as {login_name()}",
                    style="dim",
                )
            )
            with VerticalScroll(id="story"):
                yield Static(approval_story(view, self.now), id="story-body")
            yield Static(
                Text("pending · enter or a click selects; only the keys below act", style="dim"),
                classes="section",
            )
            yield OptionList(
                *(
                    Option(
                        call_option(p.tool, p.step, p.arguments, p.policy, lapses(p, self.now)),
                        id=p.marker,
                    )
                    for p in view.pending
                ),
                id="calls",
            )
            yield Input(
                placeholder="reason (optional; sent with y, d or A)",
                id="reason",
                compact=True,
            )
            with Horizontal(id="buttons"):
                yield action_button("Approve", id="approve", variant="success")
                yield action_button("Deny…", id="deny", variant="error")
                if n > 1:
                    yield action_button(f"Approve all {n}", id="approve-all", variant="warning")
            yield Static(id="error", classes="error")
            yield Static(id="keys", classes="keys")

    def on_resize(self) -> None:
        fit_heights(self, {"#story": 0.25, "#calls": 0.35})

    def on_mount(self) -> None:
        fit_heights(self, {"#story": 0.25, "#calls": 0.35})
        steady(self)
        calls = self.query_one("#calls", OptionList)
        if calls.option_count:
            calls.highlighted = 0
        focus_now(calls)
        self._relabel()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """While the reason box has the focus, letters are the reason's. No key approves or
        denies then, not even one typed before the focus moved and passed on after."""
        typing = isinstance(self.focused, Input)
        return not (typing and action in ("approve", "deny", "approve_all"))

    # -- what is selected --------------------------------------------------------------------

    def selected(self) -> Pending | None:
        """The highlighted pending call."""
        calls = self.query_one("#calls", OptionList)
        if calls.highlighted is None:
            return None
        marker = calls.get_option_at_index(calls.highlighted).id
        return next((p for p in self.view.pending if p.marker == marker), None)

    def _relabel(self) -> None:
        """Buttons and the key line name the call they act on."""
        p = self.selected()
        tool = p.tool if p is not None else "…"
        self.query_one("#approve", Button).label = Text(f"Approve {tool}")
        self.query_one("#deny", Button).label = Text(f"Deny {tool}…")
        denying = self.denying
        if denying is not None:
            keys = Text.assemble(
                ("Deny ", "bold red"),
                (denying.tool, "bold"),
                f" ({marker_step(denying.marker)})? Type why (the model reads it) · ",
                ("enter", "bold"),
                " deny · ",
                ("esc", "bold"),
                " back",
            )
        else:
            keys = keys_text(
                ("y", "approve"),
                ("d", "deny…"),
                ("A", "approve all"),
                ("tab", "reason"),
                ("esc", "close"),
            )
        self.query_one("#keys", Static).update(keys)

    @on(OptionList.OptionHighlighted, "#calls")
    def _highlighted(self) -> None:
        if self.denying is not None and self.denying != self.selected():
            self._stop_denying()
        self._relabel()

    @on(OptionList.OptionSelected, "#calls")
    def _selected(self) -> None:
        """enter or a click only selects: approving takes ``y`` or the labelled button."""
        self._relabel()

    # -- acting ------------------------------------------------------------------------------

    def _reason(self) -> str | None:
        return self.query_one("#reason", Input).value.strip() or None

    def _send(self, decision: Decision) -> None:
        self.submit(partial(self.act, self.pin, decision))

    def action_approve(self) -> None:
        p = self.selected()
        if p is not None:
            signals = (("approve", {"marker": p.marker}),)
            self._send(Decision(signals, login_name(), self._reason(), f"approved {p.step}"))

    def action_approve_all(self) -> None:
        markers = [p.marker for p in self.view.pending]
        if markers:
            self._send(
                Decision(
                    tuple(("approve", {"marker": m}) for m in markers),
                    login_name(),
                    self._reason(),
                    f"approved {len(markers)} call(s) of {self.view.run_id}",
                )
            )

    def action_deny(self) -> None:
        """Ask why in the one reason box; ``enter`` there denies."""
        p = self.selected()
        if p is None:
            return
        self.denying = p
        box = self.query_one("#reason", Input)
        box.add_class("-denying")
        focus_now(box)
        self._relabel()

    def _stop_denying(self) -> None:
        self.denying = None
        self.query_one("#reason", Input).remove_class("-denying")
        self._relabel()

    @on(Input.Blurred, "#reason")
    def _reason_left(self) -> None:
        # Leaving the box ends the question: a later y must not find a deny half-asked.
        if self.denying is not None:
            self._stop_denying()

    @on(Input.Submitted, "#reason")
    def _reason_entered(self) -> None:
        p = self.denying
        if p is None:
            # Not denying: enter keeps the reason and goes back to the calls; it sends nothing.
            focus_now(self.query_one("#calls", OptionList))
            return
        self._send(
            Decision(
                (("deny", {"marker": p.marker}),), login_name(), self._reason(), f"denied {p.step}"
            )
        )

    @on(Button.Pressed, "#approve")
    def _approve_pressed(self) -> None:
        self.action_approve()

    @on(Button.Pressed, "#deny")
    def _deny_pressed(self) -> None:
        self.action_deny()

    @on(Button.Pressed, "#approve-all")
    def _approve_all_pressed(self) -> None:
        self.action_approve_all()

    def action_back(self) -> None:
        """esc: out of the deny question first, then close."""
        if self.denying is not None:
            self._stop_denying()
            focus_now(self.query_one("#calls", OptionList))
            return
        self.dismiss(None)

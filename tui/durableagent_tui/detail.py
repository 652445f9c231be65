"""The detail pane: the selected record's data as pretty JSON, or the run's summary."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from rich.console import Group, RenderableType
from rich.highlighter import JSONHighlighter
from rich.table import Table
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.widgets import Static

from durableagent import Record, RunStatus, RunView
from durableagent.attempts import LOST_WHY, Span
from durableagent.audit import decisions
from durableagent.control import budget_text

from .styles import LOOKS, clock, status_text
from .summaries import call_text, pretty

_json = JSONHighlighter()


def record_renderable(
    record: Record, view: RunView | None = None, forks: Sequence[str] = ()
) -> RenderableType:
    """A heading line, what the record means for a signal (who, why, what became of it) or a
    run.started (where the run came from, its forks), then its data as highlighted JSON
    (never markup)."""
    head = Text(no_wrap=False)
    head.append(f"seq {record.seq} ", style="bold")
    head.append(record.type, style="bold")
    if record.step:
        head.append(f"  {record.step}")
    head.append(f"  {clock(record.at)}", style="dim")
    parts: list[RenderableType] = [head]
    if record.type == "signal" and view is not None:
        parts += decision_lines(record, view)
    if record.type == "run.started" and view is not None:
        parts += lineage_lines(view, forks)
    return Group(*parts, Text(""), _json(Text(pretty(record.data))))


def decision_lines(record: Record, view: RunView) -> list[Text]:
    """A signal as the audit reads it: the decision, its author and reason, its effect."""
    found = next((d for d in decisions(view.records, view.run_id) if d.seq == record.seq), None)
    if found is None:
        return []
    what = Text(found.decision.replace("_", " "), style="bold")
    what.append(f" by {found.by}" if found.by else " (no name given)")
    if found.tool:
        what.append(f" · {found.tool}")
    lines = [what, Text.assemble(("reason  ", "dim"), found.reason or "(none given)")]
    effect = Text.assemble(("effect  ", "dim"), (found.effect, "bold"), f": {found.note}")
    lines.append(effect)
    if found.copied_from:
        lines.append(Text(f"copied from {found.copied_from} by the fork", style="dim"))
    return lines


def lineage_lines(view: RunView, forks: Sequence[str]) -> list[Text]:
    """Where the run came from and the runs forked from it (both directions)."""
    lines: list[Text] = []
    if view.forked_from is not None:
        lines.append(Text(view.forked_from.describe(), style="cyan"))
    if forks:
        lines.append(Text(f"forks: {', '.join(forks)}", style="cyan"))
    return lines


def run_renderable(view: RunView, forks: Sequence[str] = ()) -> RenderableType:
    """What the run waits on, for a run with no record selected (or a corrupt or failed one):
    the error whole, wrapped, never cut; and its lineage."""
    parts: list[RenderableType] = [Text.assemble(status_text(view.status), "  ", view.run_id)]
    parts += lineage_lines(view, forks)
    if view.halt is not None:
        parts.append(Text(view.halt.says(), style=LOOKS[view.status].style))
    if view.controls.budget.limited:
        parts.append(Text(f"budget {budget_text(view.controls)}", style="dim"))
    if view.error:
        parts.append(Text(view.error, style=LOOKS[view.status].style))
    if view.status == RunStatus.FAILED:
        parts.append(Text(""))
        parts.append(
            Text.assemble(
                ("R", "bold"),
                " retries it now (as agentrun retry); workers also retry it with backoff "
                "until it has failed too often.",
                style="dim",
            )
        )
    for p in view.pending:
        parts.append(Text(f"pending {call_text(p.tool, p.arguments)}"))
    if view.indeterminate is not None:
        parts.append(
            Text(
                f"{view.indeterminate.name} started {clock(view.indeterminate.started_at)}"
                " and has no result"
            )
        )
    return Group(*parts)


def attempt_renderable(span: Span, view: RunView) -> RenderableType:
    """One attempt whole: who ran it, how it ended, which records it wrote, and which steps it
    replayed, ran, re-ran and left cut off."""
    a = span.attempt
    grid = Table.grid(padding=(0, 1))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="fold")
    ended = span.ending + (f": {LOST_WHY}" if span.lost else "")
    if a.outcome is not None and a.outcome.error:
        ended += f": {a.outcome.error}"
    grid.add_row("owner", Text(a.owner or "unknown (an outcome saved without a lease)"))
    grid.add_row("lease", Text(f"epoch {a.epoch}" if a.epoch else "—"))
    grid.add_row("ended", Text(ended))
    if span.wrote():
        times = [r.at for r in view.records if span.first <= r.seq <= span.last]
        when = f" ({clock(times[0])} – {clock(times[-1])})" if times else ""
        grid.add_row("records", Text(f"seq {span.first}–{span.last}{when}"))
    else:
        grid.add_row("records", Text("none: it wrote nothing"))
    for label, steps, note in (
        ("replayed", span.replayed, "had a result before it began: not run again"),
        ("ran", span.ran, ""),
        ("re-ran", span.reran, "started before without a result"),
        ("cut off", span.cut, "no result when it ended"),
    ):
        if steps:
            text = Text(", ".join(steps))
            if note:
                text.append(f" ({note})", style="dim")
            grid.add_row(label, text)
    head = Text.assemble((f"attempt {span.number}", "bold"), "  ", view.run_id)
    return Group(head, Text(""), grid)


class RecordDetail(VerticalScroll):
    """Scrollable, focusable pane holding one record's data."""

    DEFAULT_CSS = """
    RecordDetail { padding: 0 1; }
    RecordDetail > Static { width: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back to the timeline", show=False, id="record.back")
    ]

    class Back(Message):
        """The human asked to go back to the timeline."""

    def action_back(self) -> None:
        self.post_message(self.Back())

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(Text("select a run", style="dim"), id="detail-body")

    def show(
        self,
        what: Record | RunView | None,
        attempt: Span | None = None,
        *,
        view: RunView | None = None,
        forks: Sequence[str] = (),
    ) -> None:
        """Show a record (of ``view``, the run it belongs to), an attempt of the run ``what``,
        a run summary, or nothing. ``forks``: the runs forked from it."""
        body = self.query_one("#detail-body", Static)
        if what is None:
            body.update(Text("no run selected", style="dim"))
        elif isinstance(what, Record):
            body.update(record_renderable(what, view, forks))
        elif attempt is not None:
            body.update(attempt_renderable(attempt, what))
        else:
            body.update(run_renderable(what, forks))

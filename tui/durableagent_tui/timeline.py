"""The timeline of one run: a row per record, new records appended as they arrive.

The columns follow the pane's width. The fixed columns keep still while records stream in,
and the summary takes the width that is left; when too little would be left, the columns a
narrow pane can spare go (the type word, then the clock time: the record pane shows both) and
the step joins its summary in one column. A cut summary ends in "…"; the record pane beside
it shows the record whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.widgets import DataTable

from durableagent import Attempt, Record, RunStatus, RunView
from durableagent.attempts import LOST_WHY, Span, divider_text, reruns, spans, start_states

from .attempt_looks import ENDING_LOOKS
from .row_keys import ROW_KEYS
from .styles import clock
from .summaries import one_line, summary, waiting_text

# Short words keep the summary on screen in a narrow terminal.
TYPE_WORDS = {
    "run.started": ("run start", "bold"),
    "step.started": ("start", ""),
    "step.completed": ("result", "green"),
    "signal": ("signal", "bold yellow"),
    "run.completed": ("run done", "bold green"),
}
CORRUPT = "corrupt"
FAILED = "failed"
# The last column takes what is left; below this many cells a layout gives way to the next.
MIN_SUMMARY = 40


@dataclass(frozen=True)
class Layout:
    """Columns as (key, label, width); the last one's width is whatever is left."""

    name: str
    columns: tuple[tuple[str, str, int], ...]

    @property
    def last(self) -> str:
        return self.columns[-1][0]

    def rest(self, width: int, padding: int) -> int:
        """The last column's width in a pane ``width`` cells wide."""
        fixed = sum(w for _, _, w in self.columns[:-1])
        return width - fixed - 2 * padding * len(self.columns)


LAYOUTS = (
    Layout(
        "wide",
        (
            ("mark", " ", 1),
            ("seq", "seq", 5),
            ("time", "time", 8),
            ("type", "type", 9),
            ("step", "step", 24),
            ("summary", "summary", 0),
        ),
    ),
    Layout(
        "compact",
        (("mark", " ", 1), ("seq", "seq", 5), ("time", "time", 8), ("what", "step · summary", 0)),
    ),
    Layout("narrow", (("mark", " ", 1), ("seq", "seq", 5), ("what", "step · summary", 0))),
)


def choose_layout(width: int, padding: int) -> tuple[Layout, int]:
    """The widest layout whose last column keeps at least MIN_SUMMARY cells."""
    for layout in LAYOUTS:
        rest = layout.rest(width, padding)
        if rest >= MIN_SUMMARY:
            return layout, rest
    layout = LAYOUTS[-1]
    return layout, max(1, layout.rest(width, padding))


def mark_for(record: Record, view: RunView, state: tuple[str, int | None] | None) -> Text:
    """✓ for a start that got its result, ↯ for one cut off (its step started again without
    a result), ✖ for a write started without one, … for a read waiting to be re-run."""
    if record.type != "step.started":
        return Text(" ")
    how = state[0] if state is not None else "open"
    if how == "done":
        return Text("✓", style="green")
    if how == "cut":
        return Text("↯", style="bold red")
    if view.status == RunStatus.RUNNING:
        return Text("…", style="cyan")
    if _reconcile_needed(record):
        return Text("✖", style="bold red")
    return Text("…", style="yellow")


def _reconcile_needed(start: Record) -> bool:
    data = start.data if isinstance(start.data, dict) else {}
    return (
        data.get("write") is True
        and data.get("idempotent") is not True
        and data.get("refused") is not True
    )


def summary_for(
    record: Record, view: RunView, state: tuple[str, int | None] | None, rerun: bool
) -> Text:
    """The record's one-line summary, with a start's missing result called out."""
    text = Text(summary(record))
    if record.type != "step.started":
        return text
    if rerun:
        text.append(" · re-run", style="cyan")
    how, then = state if state is not None else ("open", None)
    if how == "cut":
        text.append(f" — cut off: no result; started again at seq {then}", style="red")
    elif how == "open" and view.status != RunStatus.RUNNING:
        data = record.data if isinstance(record.data, dict) else {}
        if _reconcile_needed(record):
            text.append(" — no result: indeterminate", style="bold red")
        elif data.get("refused") is True:
            text.append(" — no result (refused again on resume)", style="yellow")
        elif data.get("write") is True:
            text.append(" — no result (re-run with its key on resume)", style="yellow")
        else:
            text.append(" — no result (re-run on resume)", style="yellow")
    return text


def _cut(text: Text) -> Text:
    text.no_wrap = True
    text.overflow = "ellipsis"
    return text


Cells = dict[str, Text]


class Timeline(DataTable[Text]):
    """Records of the selected run, with a divider where each attempt began (from the store's
    attempt log) and a row where one was lost. Re-showing the same run only appends new rows
    and updates the ones whose text moved; it rebuilds only when rows appear in between (a
    new attempt's divider)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        *ROW_KEYS,
        Binding("escape", "back", "Back to runs", show=False, id="timeline.back"),
    ]

    class Back(Message):
        """The human asked to go back to the runs table."""

    def __init__(self, **kwargs: object) -> None:
        super().__init__(cursor_type="row", **kwargs)  # type: ignore[arg-type]
        self.run_id: str | None = None
        self.view: RunView | None = None
        self.attempts: tuple[Attempt, ...] = ()
        self.spans: dict[str, Span] = {}  # divider and lost rows' keys -> their attempt
        self._rows: list[tuple[str, Cells]] = []
        self.columns_layout, self._rest = LAYOUTS[0], MIN_SUMMARY

    def on_mount(self) -> None:
        self._add_columns()

    def _add_columns(self) -> None:
        for key, label, width in self.columns_layout.columns:
            self.add_column(label, key=key, width=width or self._rest)

    def on_resize(self, _event: events.Resize) -> None:
        """Refit the columns to the new width (rebuilding one run's rows is cheap)."""
        width = self.scrollable_content_region.width
        if width <= 0:
            return
        layout, rest = choose_layout(width, self.cell_padding)
        if (layout, rest) == (self.columns_layout, self._rest):
            return
        self.columns_layout, self._rest = layout, rest
        row, at_end = self.cursor_row, self.cursor_row >= self.row_count - 1
        self.clear(columns=True)
        self._rows = []
        self._add_columns()
        if self.view is not None:
            self._draw(self._rows_for(self.view, self.attempts), at_end=at_end)
            if not at_end:
                self.move_cursor(row=min(row, max(0, self.row_count - 1)), animate=False)

    def action_back(self) -> None:
        self.post_message(self.Back())

    def watch_show_vertical_scrollbar(self, show: bool) -> None:
        # Textual moves the thumb only while the bar is shown: a scroll to the tail that
        # happened before the bar appeared would leave it drawn at the top.
        if show:
            self.vertical_scrollbar.position = self.scroll_y

    # -- what is under the cursor -------------------------------------------------------------

    def _key_at_cursor(self) -> str | None:
        if self.view is None or not self.row_count:
            return None
        try:
            key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        except Exception:
            return None
        return key

    def record_at_cursor(self) -> Record | None:
        """The record under the cursor (None on a banner row or an empty timeline)."""
        key = self._key_at_cursor()
        if key is None or not key.isdigit() or self.view is None:
            return None
        seq = int(key)
        records = self.view.records
        return records[seq - 1] if 0 < seq <= len(records) else None

    def attempt_at_cursor(self) -> Span | None:
        """The attempt whose divider (or lost row) is under the cursor."""
        key = self._key_at_cursor()
        return self.spans.get(key) if key is not None else None

    # -- rows --------------------------------------------------------------------------------

    def show(self, view: RunView | None, attempts: Sequence[Attempt] = ()) -> None:
        """Show ``view`` and its attempts; the same run again updates in place and follows
        the tail when the cursor was on the last row."""
        if view is None:
            self.run_id, self.view, self.attempts = None, None, ()
            self.spans = {}
            self.clear()
            self._rows = []
            return
        same = view.run_id == self.run_id
        at_end = not same or self.cursor_row >= self.row_count - 1
        if not same:
            self.clear()
            self._rows = []
        self.run_id, self.view, self.attempts = view.run_id, view, tuple(attempts)
        self._draw(self._rows_for(view, self.attempts), at_end=at_end)

    def _draw(self, rows: list[tuple[str, Cells]], *, at_end: bool) -> None:
        """Turn the rows on screen into ``rows``: update and append when the old ones are a
        prefix of the new, else rebuild keeping the cursor on its row's key."""
        old = self._rows
        keys = [k for k, _ in rows]
        if [k for k, _ in old] == keys[: len(old)]:
            last = self.columns_layout.last
            for (key, cells), (_, was) in zip(rows, old, strict=False):
                for col in ("mark", last):
                    if cells.get(col) != was.get(col):
                        self.update_cell(key, col, cells[col])
            for key, cells in rows[len(old) :]:
                self.add_row(*self._cells(cells), key=key)
        else:
            cursor = self._key_at_cursor()
            self.clear()
            for key, cells in rows:
                self.add_row(*self._cells(cells), key=key)
            if not at_end and cursor in keys:
                self.move_cursor(row=keys.index(cursor), animate=False)
        self._rows = rows
        # Textual re-checks a ScrollView's bars only when its size changes, not when its rows
        # do: a short run shown after a long one kept the long one's (empty) scrollbar.
        self.call_after_refresh(self._refresh_scrollbars)
        if at_end and self.row_count:
            self.move_cursor(row=self.row_count - 1, animate=False)

    def _cells(self, cells: Cells) -> list[Text]:
        empty = Text("")
        return [cells.get(k, empty) for k, _, _ in self.columns_layout.columns]

    def _rows_for(self, view: RunView, attempts: tuple[Attempt, ...]) -> list[tuple[str, Cells]]:
        """Every row of the run: its records in order, each attempt's divider before the
        first record it wrote, a row after the last record of an attempt that was lost, and
        the failure last."""
        if view.status == RunStatus.CORRUPT:
            self.spans = {}
            summary = Text(f"journal does not load: {waiting_text(view)}")
            return [(CORRUPT, self._banner("⊘", "corrupt", "bold magenta", summary))]
        records = view.records
        all_spans = spans(records, attempts)
        self.spans = {}
        states = start_states(records)
        again = reruns(records)
        rows: list[tuple[str, Cells]] = []
        pending = list(all_spans)
        lost_after: dict[int, Span] = {}

        def dividers_until(seq: int) -> None:
            while pending and pending[0].first <= seq:
                span = pending.pop(0)
                rows.append(self._divider(span))
                # The last attempt's loss gets a row of its own at the journal's end: nothing
                # follows it (an earlier one is marked by the next attempt's divider).
                if span.lost and span is all_spans[-1]:
                    lost_after[max(span.last, span.first - 1)] = span
                    if not span.wrote():
                        rows.append(self._lost_row(span))
                        del lost_after[span.first - 1]

        for record in records:
            dividers_until(record.seq)
            state = states.get(record.seq)
            rows.append((str(record.seq), self._record_cells(record, view, state, again)))
            span = lost_after.pop(record.seq, None)
            if span is not None:
                rows.append(self._lost_row(span))
        dividers_until(10**18)  # attempts that wrote nothing after the last record
        for span in lost_after.values():
            rows.append(self._lost_row(span))
        if view.status == RunStatus.FAILED:
            # The failure is the end of the story so far; the record pane shows it whole.
            error = one_line(view.error or "the last attempt failed")
            rows.append((FAILED, self._banner("✗", "failed", "red", Text(f"{error} · R retries"))))
        return rows

    def _record_cells(
        self,
        record: Record,
        view: RunView,
        state: tuple[str, int | None] | None,
        again: set[int],
    ) -> Cells:
        text = summary_for(record, view, state, record.seq in again)
        return self._layout(
            {
                "mark": mark_for(record, view, state),
                "seq": Text(str(record.seq), justify="right"),
                "time": Text(clock(record.at), style="dim"),
                "type": Text(*TYPE_WORDS.get(record.type, (record.type, ""))),
                "step": Text(record.step),
                "summary": text,
            }
        )

    def _divider(self, span: Span) -> tuple[str, Cells]:
        key = f"attempt-{span.number}"
        self.spans[key] = span
        glyph, style = ENDING_LOOKS.get(span.attempt.ended, ("?", "bold"))
        word = f"attempt {span.number}"
        text = Text(divider_text(span), style="cyan")
        return key, self._banner(glyph, word, style, text)

    def _lost_row(self, span: Span) -> tuple[str, Cells]:
        key = f"lost-{span.number}"
        self.spans[key] = span
        text = Text(f"attempt {span.number} ended: {LOST_WHY}", style="red")
        return key, self._banner("↯", "lost", "bold red", text)

    def _banner(self, glyph: str, word: str, style: str, summary: Text) -> Cells:
        """A row that is not a record (an attempt, the corrupt notice, the failure)."""
        if self.columns_layout.last == "what":
            summary = Text.assemble((word, style), "  ", summary)
        return self._layout(
            {"mark": Text(glyph, style=style), "type": Text(word, style=style), "summary": summary}
        )

    def _layout(self, cells: Cells) -> Cells:
        """The cells for the current columns (step and summary may share one), cut to fit."""
        last = self.columns_layout.last
        if last == "what" and "what" not in cells:
            step, text = cells.get("step"), cells["summary"]
            what = Text.assemble((step.plain, "bold"), "  ", text) if step and step.plain else text
            cells = {**cells, "what": what}
        cells[last] = _cut(cells[last].copy())
        return cells

"""What the app's parts need of the app they are part of (SupervisorApp): acting.py's and
marked.py's actions, live.py's updates and filter_box.py's filter are bases of the app, each
typed to this ``Host`` rather than to the app itself (which imports them all).

``AppBase`` is what they derive from: Textual's App at run time; for the type checker, the
App with the Host's members (which are SupervisorApp's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol

from textual.app import App
from textual.timer import Timer

from durableagent import RunView, Summary

from .header import StoreHeader
from .runs_model import RunRows
from .runs_table import RunsTable
from .timeline import Timeline
from .tracker import Changes, StoreTracker
from .workers import Crew


class Host(Protocol):
    """The store's tracker, the runs and the selection, the widgets, the settings, and what
    the parts call of each other."""

    tracker: StoreTracker
    rows: RunRows
    clock: Callable[[], float]
    label: str
    read_only: bool
    hints: Mapping[str, str]
    # the live updates' settings and state
    live: bool
    poll: bool
    loaded: bool
    load_seconds: float
    rescan_s: float
    crew: Crew | None
    _ticking: Timer
    # the filter's text, and a run to select once the table has it (a fork)
    filter_text: str
    _jump_to: str | None

    @property
    def table(self) -> RunsTable: ...

    @property
    def timeline(self) -> Timeline: ...

    @property
    def header(self) -> StoreHeader: ...

    @property
    def selected(self) -> Summary | None: ...

    @property
    def selected_view(self) -> RunView | None: ...

    def apply(self, changes: Changes, *, initial: bool = False) -> None: ...

    def show_filtered(self) -> None: ...

    def _update_empty(self) -> None: ...

    def _jump(self) -> None: ...


if TYPE_CHECKING:

    class AppBase(App[int], Host):
        """The app, as its parts see it."""

else:
    AppBase = App

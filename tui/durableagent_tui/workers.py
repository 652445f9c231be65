"""Who is working, for the screen (SPEC §11): the store's registered workers, the header's
``2 workers`` / ``no live worker``, a waiting ready run's ``no live worker for 14m``, and the
workers screen ``w`` opens. Registrations come from ``Store.workers()``; nothing here reads a
journal."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Label, Static

from durableagent import Summary
from durableagent.durations import format_duration
from durableagent.roster import WorkerInfo

WARNING = "bold yellow"


@dataclass(frozen=True)
class Crew:
    """The workers as last read: every registration, and since when none is live (the last
    beat of the last one gone; None while one is live, or when none ever beat)."""

    workers: tuple[WorkerInfo, ...]
    read_at: float

    @property
    def live(self) -> list[WorkerInfo]:
        return [w for w in self.workers if w.live(self.read_at)]

    @property
    def holders(self) -> dict[str, str]:
        """Run id → the owner of the live worker whose last beat said it holds the run."""
        return {rid: w.owner for w in self.live for rid in w.runs}

    @property
    def none_live_since(self) -> float | None:
        if self.live:
            return None
        beats = [w.beat_at for w in self.workers if w.problem is None]
        return max(beats) if beats else None


def crew_of(workers: list[WorkerInfo], now: float | None = None) -> Crew:
    return Crew(tuple(workers), time.time() if now is None else now)


def header_text(crew: Crew | None, ready: int) -> Text | None:
    """What the header says of the workers: ``2 workers``, or ``no live worker`` in the
    warning colour while ready runs wait; nothing when unknown or when there is nothing to
    say (no worker and no ready run)."""
    if crew is None:
        return None
    n = len(crew.live)
    if n:
        return Text(f"{n} worker{'s' if n != 1 else ''}", style="dim")
    if ready:
        return Text("no live worker", style=WARNING)
    return None


def waiting_note(crew: Crew | None, s: Summary, now: float) -> str | None:
    """``no live worker for 14m`` for a ready run while no worker is live: since the later of
    the run's last activity and the last beat heard."""
    if crew is None or crew.live:
        return None
    since = max(s.last_activity or 0.0, crew.none_live_since or 0.0)
    if not since:
        return "no live worker"
    return f"no live worker for {format_duration(now - since)}"


def worker_lines(crew: Crew) -> list[Text]:
    """The workers screen's rows: live ones first."""
    now = crew.read_at
    rows = sorted(crew.workers, key=lambda w: (not w.live(now), w.owner))
    if not rows:
        return [Text("No worker has registered in this store. Start one: agentrun worker")]
    out = []
    for w in rows:
        if w.problem is not None:
            out.append(Text(w.problem, style="red"))  # plain text: never read as markup
            continue
        state = w.state(now)
        line = Text(no_wrap=True, overflow="ellipsis")
        line.append("● " if state == "live" else "○ ", style="green" if state == "live" else "dim")
        line.append(w.owner, style="bold")
        line.append(f"  {w.host}:{w.pid}  {w.agent or '-'}  {w.version or '-'}")
        line.append(f"  up {format_duration(w.up(now))}", style="dim")
        line.append(f"  beat {format_duration(now - w.beat_at)} ago", style="dim")
        line.append(f"  {len(w.runs)} run{'s' if len(w.runs) != 1 else ''}")
        if w.runs:
            line.append(f" ({', '.join(w.runs)})", style="dim")
        line.append(f"  {state}", style="green" if state == "live" else WARNING)
        out.append(line)
    return out


class WorkersScreen(ModalScreen[None]):
    """The store's workers: owner, host:pid, agent, version, up, last beat, runs, live/gone."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,w,q", "close", "Close", id="workers.close")
    ]

    def __init__(self, crew: Crew) -> None:
        super().__init__()
        self.crew = crew

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="dialog", classes="help"):
            live = len(self.crew.live)
            yield Label(Text(f"workers — {live} live", style="bold"))
            for line in worker_lines(self.crew):
                yield Static(line)
            yield Static(Text("esc close", style="dim"), classes="keys")

    def action_close(self) -> None:
        self.dismiss(None)

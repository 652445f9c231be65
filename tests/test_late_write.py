"""The late-write warning (takeover.py): when a human reconciling an open write is told that
its holder may still be alive and its write may still land."""

from __future__ import annotations

import os
import socket
import subprocess
import sys

from durableagent.record import Record
from durableagent.roster import WorkerInfo
from durableagent.stores.protocol import LOST, Attempt
from durableagent.takeover import late_write_note

TTL = 1.0
STEP = "tool/2/0/create_ticket"
T0 = 1_000_000.0


def journal() -> list[Record]:
    """A run whose write started at T0 + 1 and has no result."""
    return [
        Record(1, "run.started", "", "", {"input": []}, T0),
        Record(2, "step.started", STEP, "tool", {"write": True}, T0 + 1),
    ]


def attempt(number: int, owner: str, started: float, ended: str | None) -> Attempt:
    return Attempt(number, owner, number, started, 1 if number == 1 else 3, ended=ended)


def registration(owner: str, pid: int) -> WorkerInfo:
    host = socket.gethostname()
    return WorkerInfo(owner, host, pid, "", "", "", T0, T0)


def note(attempts: list[Attempt], now: float, workers: list[WorkerInfo] | None = None) -> str:
    return late_write_note(journal(), attempts, STEP, TTL, now, workers or [])


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_a_silent_holder_is_warned_of_however_long_the_silence_lasts():
    """Its lease expired and nobody took over: between expiry and a takeover the holder is
    silent, and a paused worker looks just like that, long past two ttls too."""
    for ended in (None, LOST):
        for now in (T0 + 1.5, T0 + 3 * TTL, T0 + 3600):
            text = note([attempt(1, "A", T0, ended)], now)
            assert "owner A" in text and "epoch 1" in text and "silent" in text, (ended, now)
            assert "may still land" in text and "fencing token" in text


def test_after_a_takeover_the_warning_holds_only_when_it_came_soon():
    soon = [attempt(1, "A", T0, LOST), attempt(2, "B", T0 + 1 + 2 * TTL - 0.1, "completed")]
    late = [attempt(1, "A", T0, LOST), attempt(2, "B", T0 + 1 + 2 * TTL + 5, "completed")]
    assert "ended without saying" in note(soon, T0 + 3600)
    assert note(late, T0 + 3600) == ""


def test_a_holder_known_dead_is_not_warned_of():
    """Its process on this host no longer exists: its write cannot land."""
    pid = gone_pid()
    holders = [attempt(1, "A", T0, LOST)]
    assert note(holders, T0 + 3600, [registration("A", pid)]) == ""
    assert note([attempt(1, f"{socket.gethostname()}:{pid}", T0, LOST)], T0 + 3600) == ""
    # Alive (this very process, as a paused one would be): warned.
    assert "owner A" in note(holders, T0 + 3600, [registration("A", os.getpid())])
    # Elsewhere: nothing here can tell.
    elsewhere = WorkerInfo("A", "another-host", pid, "", "", "", T0, T0)
    assert "owner A" in note(holders, T0 + 3600, [elsewhere])


def test_a_holder_that_said_how_it_ended_is_not_warned_of():
    assert note([attempt(1, "A", T0, "failed")], T0 + 2) == ""
    assert note([attempt(1, "A", T0, "stopped")], T0 + 2) == ""

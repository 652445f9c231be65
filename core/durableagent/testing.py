"""Helpers for tests and pictures that build journals by hand, typed to the ``Store``
protocol so that the same journal can be built on every store (as procrastinate's
``testing.py`` does for its jobs): ``JournalWriter``.

Nothing here runs an agent: records are appended as a worker would append them, with fixed
times, so that screens drawn from them are the same at every run.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .calls import marker_for, marker_step
from .gate import Pending
from .messages import Message, ToolCall
from .outcome import Outcome, Status
from .record import Record
from .steps import model_step, tool_step
from .stores import Lease, Store
from .tools import Result


class JournalWriter:
    """Builds a run's journal on any store: records with fixed times, one second apart from
    ``start``; inside ``attempt()`` as a worker would, holding the run's lease (its appends
    fenced by it, its outcome ending the attempt)."""

    def __init__(self, store: Store, run_id: str, start: float) -> None:
        self.store, self.run_id, self.at = store, run_id, start
        self.lease: Lease | None = None

    @contextmanager
    def attempt(self, owner: str, *, killed: bool = False) -> Iterator[None]:
        """Hold the run's lease as ``owner`` (an attempt). ``killed``: end it as a SIGKILLed
        worker does, saying nothing (the attempt log then calls it lost)."""
        with self.store.lease(self.run_id, owner=owner) as lease:
            self.lease = lease
            try:
                yield
            finally:
                self.lease = None
                if killed:
                    lease.ended = True  # what a killed worker leaves: no end line

    def add(self, type: str, step: str = "", kind: str = "", data: Any = None) -> Record:
        self.at += 1.0
        rec = Record(0, type, step, kind, {} if data is None else data, self.at)
        return self.store.append(self.run_id, rec)

    def start(self, text: str) -> None:
        self.add("run.started", data={"input": [Message("user", text).to_dict()]})

    def model(self, turn: int, reply: Message) -> None:
        self.add("step.started", model_step(turn), "model")
        self.add("step.completed", model_step(turn), "model", reply.to_dict())

    def asks(self, turn: int, *calls: ToolCall, says: str = "") -> list[Pending]:
        self.model(turn, Message("assistant", says, tool_calls=calls))
        out = []
        for i, c in enumerate(calls):
            step = tool_step(turn, i, c.name)
            out.append(Pending(marker_for(step, c.arguments), step, c.name, c.arguments))
        return out

    def tool(self, step: str, result: str | None, *, write: bool = False) -> None:
        self.add("step.started", step, "tool", {"write": write})
        if result is not None:
            self.add("step.completed", step, "tool", Result(result).to_dict())

    def signal(self, name: str, payload: dict[str, Any], by: str, reason: str | None) -> None:
        self.add(
            "signal",
            payload.get("step") or marker_step(payload["marker"]),
            "",
            {"name": name, "payload": payload, "by": by, "reason": reason},
        )

    def outcome(self, status: Status, **kw: Any) -> None:
        last = self.store.load(self.run_id)[-1].seq
        self.store.save_outcome(self.run_id, Outcome(status, seq=last, **kw), lease=self.lease)

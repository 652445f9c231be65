"""The attempts of a run as ``show`` prints them (SPEC §11: number, owner, epoch, started,
ended, how it ended, its error), and the owner of each running run for ``ls``."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from ..attempts import ENDINGS, LOST_WHY
from ..durations import format_duration
from ..errors import DurableAgentError
from ..fold import RunStatus, Summary
from ..stores import Attempt, Store
from .common import iso, one_line, stamp


def attempt_dict(a: Attempt) -> dict[str, Any]:
    """An attempt as ``show --json`` prints it in ``attempts``."""
    return {
        "number": a.number,
        "owner": a.owner,
        "epoch": a.epoch,
        "started_at": a.started_at,
        "started_at_iso": iso(a.started_at),
        "ended_at": a.ended_at,
        "ended_at_iso": iso(a.ended_at),
        "ended": a.ended,
        "first_seq": a.first_seq,
        "last_seq": a.last_seq,
        "error": error_of(a),
        # The code that ran it (deploys.py), as its outcome recorded it; None: unknown (an
        # attempt lost before it said, or made before versions were recorded).
        "version": a.outcome.version or None if a.outcome is not None else None,
        "fingerprint": a.outcome.fingerprint if a.outcome is not None else None,
    }


def version_of(a: Attempt) -> str:
    """The version of the code that ran the attempt, "" when it did not say."""
    return a.outcome.version if a.outcome is not None else ""


def error_of(a: Attempt) -> str | None:
    """What went wrong in the attempt: its outcome's error, or why a lost one is lost."""
    if a.outcome is not None and a.outcome.error:
        return a.outcome.error
    if a.ended == "lost":
        return LOST_WHY
    return None


def attempt_lines(attempts: Sequence[Attempt]) -> list[str]:
    """``show``'s attempt log: a header line and one line per attempt (none: one line)."""
    if not attempts:
        return ["attempts", "  none yet (no worker has taken the run)"]
    lines = [
        "attempts",
        "     #  OWNER                     EPOCH  VERSION       STARTED              ENDED"
        "                HOW",
    ]
    for a in attempts:
        how = ENDINGS.get(a.ended, str(a.ended))
        error = error_of(a)
        ended = stamp(a.ended_at) if a.ended_at is not None else "-"
        line = (
            f"  {a.number:>4}  {one_line(a.owner or '-', 24):<24}  {a.epoch:>5}  "
            f"{one_line(version_of(a) or '-', 12):<12}  "
            f"{stamp(a.started_at):<19}  {ended:<19}  {how}"
        )
        if error:
            line += f": {one_line(error, 80)}"
        lines.append(line.rstrip())
    return lines


def owners(store: Store, summaries: Sequence[Summary]) -> dict[str, str]:
    """The lease holder's owner name of each leased (running) run among ``summaries``: one
    look-up per leased run, none for the rest."""
    out: dict[str, str] = {}
    for s in summaries:
        if s.leased:
            holder = store.lease_holder(s.run_id)
            if holder and holder.get("owner"):
                out[s.run_id] = str(holder["owner"])
    return out


def no_worker_line(store: Store, status: RunStatus) -> str | None:
    """For ``show --follow``: the line saying that no worker is live to take a ready run
    (None when one is, the run is not ready, or the registry cannot be read)."""
    if status != RunStatus.READY:
        return None
    try:
        found = store.workers()
    except DurableAgentError:
        return None
    if any(w.live() for w in found):
        return None
    beats = [w.beat_at for w in found if w.problem is None]
    gone = f" (the last beat {format_duration(time.time() - max(beats))} ago)" if beats else ""
    return (
        f"no live worker on this store{gone}: the run waits until one starts "
        "(agentrun worker; see agentrun workers); following on"
    )

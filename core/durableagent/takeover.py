"""Whether a write left open by a lost attempt may still land.

No store can stop a write already sent by a holder that was paused past its lease (a GC
pause, a frozen VM, SIGSTOP) and woke after another worker took the run over; only the system
written to can, with the fencing token (``ToolContext.fence``). So a human reconciling such a
write is told when its holder may be alive: its attempt ended ``lost`` and the next one took
over within about a ttl of its last sign of life (a pause looks like a death that soon), or
its worker still beats. On one host this never applies: a flock outlives its holder only in a
holder that is alive, and then the run shows as running (stuck), not indeterminate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from .record import Record
from .stores.protocol import LOST, Attempt


def late_write_note(
    records: Sequence[Record],
    attempts: Sequence[Attempt],
    step: str,
    ttl: float,
    now: float | None = None,
) -> str:
    """One line when the open write ``step``'s holder may still be alive (its write may yet
    land), else ""."""
    start = next(
        (r for r in reversed(records) if r.type == "step.started" and r.step == step), None
    )
    if start is None:
        return ""
    ran = [a for a in attempts if a.first_seq <= start.seq]
    if not ran or ran[-1].ended != LOST:
        return ""
    holder = ran[-1]
    later = [a for a in attempts if a.number > holder.number and a.started_at is not None]
    last_sign = max((r.at for r in records if r.seq >= holder.first_seq), default=start.at)
    took_over = later[0].started_at if later else (time.time() if now is None else now)
    assert took_over is not None
    if took_over - last_sign > 2 * ttl:
        return ""
    return (
        f"its attempt (owner {holder.owner}, epoch {holder.epoch}) ended without saying, "
        f"{took_over - last_sign:.0f}s after its last record: its worker may be paused rather "
        "than dead, and its write may still land; the system it writes to can refuse it by "
        f"its fencing token (epoch {holder.epoch})"
    )

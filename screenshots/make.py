"""Regenerate the README pictures: ``python screenshots/make.py``.

Builds the demo store (``durableagent.demo.build_demo_store``) in a temporary directory, opens
the supervisor on it headless, and saves SVGs next to this file: the main screen, the approve
dialog, the reconcile dialog (with the id of the mail the killed process really queued), the
slow run's timeline after its worker was killed, and that run's recovery plan.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

from durableagent import RunStatus
from durableagent.demo import build_demo_store, read_list
from durableagent_tui.app import SupervisorApp

HERE = Path(__file__).resolve().parent
SIZE = (160, 44)


async def shoot(root: Path) -> list[Path]:
    """Open the app on ``root`` and save the pictures."""
    app = SupervisorApp(root, label="demo store", cursor_blink=False)
    saved: list[Path] = []

    async def settle(run_id: str | None = None) -> None:
        """Wait until the timeline shows the run under the cursor, then for the screen."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            selected = app.table.selected_run
            followed = app.followed.run_id if app.followed is not None else None
            if app.loaded and selected == followed and (run_id is None or selected == run_id):
                break
            await pilot.pause(0.05)
        # Every worker but the change feed's, which runs as long as the app (an empty list
        # would mean every worker).
        busy = [w for w in app.workers if w.group != "watch"]
        if busy:
            await app.workers.wait_for_complete(busy)
        for _ in range(3):
            await pilot.pause()

    def save(name: str) -> None:
        saved.append(Path(app.save_screenshot(f"{name}.svg", str(HERE))))

    async with app.run_test(size=SIZE) as pilot:
        await settle()
        save("main")
        awaiting = max(
            (s for s in app.summaries.values() if s.status == RunStatus.AWAITING_APPROVAL),
            key=lambda s: len(s.pending),
        )
        app.table.move_cursor(row=app.table.get_row_index(awaiting.run_id))
        await settle(awaiting.run_id)
        await pilot.press("a")
        await settle()
        save("approve")
        # The mail the killed process queued before it could record it: what a human finds
        # in the demo's outbox and types in.
        mail = next(m["id"] for m in read_list(root, "outbox") if "CRM" in m.get("body", ""))
        await pilot.press("escape", "n")
        await settle()
        await pilot.press("r", *mail)
        await settle()
        save("reconcile")
        await pilot.press("escape")
        app.table.move_cursor(row=app.table.get_row_index("access-audit"))
        await settle("access-audit")
        save("attempts")
        await pilot.press("p")
        await settle()
        save("plan")
    return saved


def main() -> int:
    """Build the demo store in a temporary directory and save the pictures."""
    here = Path.cwd()
    with tempfile.TemporaryDirectory() as tmp:
        # Built as ./agentrun-demo, as `agentrun demo` does: the paths the pictures show
        # (the reconcile dialog's hint) are the ones a newcomer sees.
        os.chdir(tmp)
        try:
            root = Path("agentrun-demo")
            build_demo_store(root)
            for path in asyncio.run(shoot(root)):
                print(path)
        finally:
            os.chdir(here)
    return 0


if __name__ == "__main__":
    sys.exit(main())

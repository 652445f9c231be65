"""Regenerate the README pictures: ``python screenshots/make.py``.

Builds the demo store (``durableagent.demo.build_demo_store``) in a temporary directory, opens
the supervisor on it headless, and saves SVGs of the main screen, the approve dialog and the
reconcile dialog next to this file.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from durableagent import RunStatus
from durableagent.demo import build_demo_store
from durableagent_tui.app import SupervisorApp

HERE = Path(__file__).parent
SIZE = (120, 36)


async def shoot(root: Path) -> list[Path]:
    """Open the app on ``root`` and save the three pictures."""
    app = SupervisorApp(root, label="demo store", cursor_blink=False)
    saved: list[Path] = []
    async with app.run_test(size=SIZE) as pilot:
        while not app.loaded:
            await pilot.pause(0.05)
        await pilot.pause()

        def save(name: str) -> None:
            saved.append(Path(app.save_screenshot(f"{name}.svg", str(HERE))))

        save("main")
        awaiting = max(
            (v for v in app.views.values() if v.status == RunStatus.AWAITING_APPROVAL),
            key=lambda v: len(v.pending),
        )
        app.table.move_cursor(row=app.table.get_row_index(awaiting.run_id))
        await pilot.press("a")
        await pilot.pause()
        save("approve")
        await pilot.press("escape", "n", "r", *"TICKET-7")
        await pilot.pause()
        save("reconcile")
    return saved


def main() -> int:
    """Build the demo store in a temporary directory and save the pictures."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "demo"
        build_demo_store(root)
        for path in asyncio.run(shoot(root)):
            print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())

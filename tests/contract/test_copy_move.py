"""``copy --move`` (SPEC §7) from each store while an attempt is inside a write: the move waits
for the write to record its result, so the destination holds it (the write is never lost to
the copy, nor left open there to be reconciled by a human)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    Message,
    PolicyGate,
    RunStatus,
    ScriptedModel,
    Status,
    Store,
    Tool,
    ToolCall,
    run,
    view_store,
)
from durableagent.copying import copy_run
from durableagent.record import SIGNAL, STEP_COMPLETED, signal_fields


def moved(store: Store, run_id: str) -> bool:
    return any(r.type == SIGNAL and signal_fields(r)[0] == "move" for r in store.load(run_id))


async def test_a_move_waits_for_the_write_in_flight_and_the_destination_holds_its_result(
    any_store: Store, tmp_path: Path
) -> None:
    begun, go = threading.Event(), threading.Event()

    def reply(messages: Sequence[Message]) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message("assistant", "filed")
        return Message("assistant", tool_calls=(ToolCall("a", "file", {}),))

    def file(args: dict[str, Any]) -> str:
        begun.set()
        go.wait(120)
        return "T-1"

    tools = [Tool("file", "file a ticket", {"type": "object"}, file)]
    gate = PolicyGate(writes={"file"}, approve=())
    config = Config(AgentConfig(ScriptedModel(reply), tools), gate, any_store)
    attempt = asyncio.create_task(run(config, "m1", [Message("user", "file it")]))
    try:
        assert await asyncio.to_thread(begun.wait, 60), "the write never began"
        dst = FileStore(tmp_path / "dst")
        copying = asyncio.create_task(
            asyncio.to_thread(
                copy_run, any_store, dst, "m1", move=True, by="ops", reason="new home", wait=120
            )
        )
        for _ in range(600):  # up to a minute for the move to be signalled
            if moved(any_store, "m1") or copying.done():
                break
            await asyncio.sleep(0.1)
        # The copy waits for the attempt: give it time to (wrongly) finish without the write.
        await asyncio.wait([copying], timeout=3.0)
    finally:
        go.set()
    assert await asyncio.wait_for(copying, 120) is True
    out = await asyncio.wait_for(attempt, 60)
    assert out.status == Status.MOVED
    there = [r for r in dst.load("m1") if r.type == STEP_COMPLETED and r.step == "tool/1/0/file"]
    assert [r.data["content"] for r in there] == ["T-1"]
    assert not moved(dst, "m1")
    assert view_store(dst, "m1").status == RunStatus.READY
    assert view_store(any_store, "m1").status == RunStatus.MOVED

"""Crashes between a step's start and its result: reads re-run, writes wait for a human."""

from __future__ import annotations

import asyncio
import os

import pytest

from durableagent import (
    AgentConfig,
    Config,
    FileStore,
    IndeterminateError,
    Message,
    PolicyGate,
    Reconcile,
    RunStatus,
    ScriptedModel,
    SignalError,
    Status,
    Tool,
    ToolCall,
    run,
    signal,
    view_store,
)
from helpdesk import INPUT, Side, helpdesk


class Crash(Exception):
    """Stands in for the process dying inside a tool (the real SIGKILL is in test_kill)."""


def crash_after(config, tool_name: str):
    """Wrap one tool so it does its work and then 'dies' before returning its result."""
    tools = []
    for t in config.agent.tools:
        if t.name == tool_name:
            inner = t.fn

            def dying(args, inner=inner):
                inner(args)
                raise Crash(tool_name)

            t = type(t)(t.name, t.description, t.parameters, dying)
        tools.append(t)
    agent = type(config.agent)(config.agent.model, tools, config.agent.system)
    return type(config)(agent, config.gate, config.store)


async def approved_run(store: FileStore, side: Side):
    config, _ = helpdesk(store, side)
    first = await run(config, "a1", INPUT)
    signal(store, "a1", "approve", {"marker": first.pending[0].marker})
    return config


async def test_crash_inside_write_stops_the_run_as_indeterminate(store: FileStore, side: Side):
    config = await approved_run(store, side)
    with pytest.raises(Crash):
        await run(crash_after(config, "create_ticket"), "a1", None)
    assert len(side.tickets()) == 1

    for _ in range(2):  # however often it is resumed
        out = await run(helpdesk(store, side)[0], "a1", None)
        assert out.status == Status.INDETERMINATE
        assert out.step == "tool/2/0/create_ticket"
    assert len(side.tickets()) == 1
    assert view_store(store, "a1").status == RunStatus.INDETERMINATE


async def test_reconcile_done_records_the_humans_result_and_never_reruns_the_write(
    store: FileStore, side: Side
):
    config = await approved_run(store, side)
    with pytest.raises(Crash):
        await run(crash_after(config, "create_ticket"), "a1", None)
    signal(
        store,
        "a1",
        "reconcile",
        Reconcile("tool/2/0/create_ticket", "done", "TICKET-7"),
        by="oncall",
    )

    config2, model2 = helpdesk(store, side)
    out = await run(config2, "a1", None)

    assert out.status == Status.COMPLETED
    assert out.message is not None and out.message.content == "Ticket filed: TICKET-7"
    assert len(side.tickets()) == 1
    assert model2.calls == 1
    done = [r for r in store.load("a1") if r.type == "step.completed"][-2]
    assert done.step == "tool/2/0/create_ticket"
    assert done.data == {"content": "TICKET-7", "is_error": False}


async def test_reconcile_retry_runs_the_write_exactly_once(store: FileStore, side: Side):
    config = await approved_run(store, side)
    with pytest.raises(Crash):
        await run(crash_after(config, "create_ticket"), "a1", None)
    signal(store, "a1", "reconcile", {"step": "tool/2/0/create_ticket", "outcome": "retry"})

    out = await run(helpdesk(store, side)[0], "a1", None)

    assert out.status == Status.COMPLETED
    assert len(side.tickets()) == 2  # the human chose to run it again: once more, not twice
    assert out.message is not None and out.message.content == "Ticket filed: TICKET-2"


async def test_a_retry_that_crashes_again_is_indeterminate_again(store: FileStore, side: Side):
    config = await approved_run(store, side)
    with pytest.raises(Crash):
        await run(crash_after(config, "create_ticket"), "a1", None)
    signal(store, "a1", "reconcile", {"step": "tool/2/0/create_ticket", "outcome": "retry"})
    with pytest.raises(Crash):
        await run(crash_after(config, "create_ticket"), "a1", None)

    out = await run(helpdesk(store, side)[0], "a1", None)

    assert out.status == Status.INDETERMINATE
    assert len(side.tickets()) == 2
    # The old reconcile no longer counts, and the step may be reconciled anew.
    signal(
        store,
        "a1",
        "reconcile",
        {"step": "tool/2/0/create_ticket", "outcome": "done", "result": "TICKET-2"},
    )
    assert (await run(helpdesk(store, side)[0], "a1", None)).status == Status.COMPLETED
    assert len(side.tickets()) == 2


async def test_a_read_that_crashed_is_rerun_and_the_model_call_before_it_is_not(
    store: FileStore, side: Side
):
    config, _ = helpdesk(store, side)
    with pytest.raises(Crash):
        await run(crash_after(config, "lookup_policy"), "a1", INPUT)
    assert side.count("model") == 1 and side.count("lookup") == 1

    config2, model2 = helpdesk(store, side)
    out = await run(config2, "a1", None)

    assert out.status == Status.AWAITING_APPROVAL
    assert side.count("lookup") == 2  # the read ran again
    assert model2.calls == 1  # llm/2 only: llm/1 was replayed
    lookups = [r for r in store.load("a1") if r.step == "tool/1/0/lookup_policy"]
    # The re-run recorded its start and its result; the crashed read left at most a start
    # (a read's start travels with its result unless the read ran past SHOW_AFTER).
    assert [r.type for r in lookups][-2:] == ["step.started", "step.completed"]
    assert [r.type for r in lookups][:-2] in ([], ["step.started"])


async def test_journal_raises_indeterminate_for_an_unreconciled_write(store: FileStore):
    from durableagent import Journal, Record, StepKind

    store.append("j", Record.make("run.started", data={"input": []}))
    store.append("j", Record.make("step.started", "tool/1/0/x", "tool", {"write": True}))
    journal = Journal(store, "j", store.load("j"))
    called = []

    async def fn():
        called.append(1)
        return {"content": "again", "is_error": False}

    with pytest.raises(IndeterminateError) as e:
        await journal.run_step("tool/1/0/x", StepKind.TOOL, fn, write=True)
    assert e.value.step == "tool/1/0/x"
    assert called == []


async def test_the_recorded_write_flag_decides_not_todays_gate(store: FileStore):
    from durableagent import Journal, Record, StepKind

    store.append("j", Record.make("run.started", data={"input": []}))
    store.append("j", Record.make("step.started", "tool/1/0/x", "tool", {"write": False}))
    journal = Journal(store, "j", store.load("j"))

    async def fn():
        return {"content": "read again", "is_error": False}

    # It started as a read; today's gate says write: the recorded flag wins and it re-runs.
    assert (await journal.run_step("tool/1/0/x", StepKind.TOOL, fn, write=True))["content"] == (
        "read again"
    )


async def test_first_execution_returns_what_a_replay_returns(store: FileStore):
    from durableagent import Journal, Record, StepKind

    store.append("j", Record.make("run.started", data={"input": []}))
    journal = Journal(store, "j", store.load("j"))

    async def fn():
        return {"t": (1, 2), "n": 1.5}

    first = await journal.run_step("llm/1", StepKind.MODEL, fn)
    replay = await Journal(store, "j", store.load("j")).run_step("llm/1", StepKind.MODEL, fn)
    assert first == replay == {"t": [1, 2], "n": 1.5}


async def test_a_step_error_is_not_recorded(store: FileStore):
    from durableagent import Journal, Record, StepKind

    store.append("j", Record.make("run.started", data={"input": []}))
    journal = Journal(store, "j", store.load("j"))

    async def boom():
        raise RuntimeError("model overloaded")

    with pytest.raises(RuntimeError):
        await journal.run_step("llm/1", StepKind.MODEL, boom)
    # Its start is recorded (the next run of it is its next attempt); its error is not.
    assert [r.type for r in store.load("j")] == ["run.started", "step.started"]
    assert not journal.is_recorded("llm/1")


async def test_a_slow_read_shows_its_start_while_it_runs_and_a_fast_one_with_its_result(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    from durableagent import Journal, Record, StepKind
    from durableagent import journal as journal_module

    monkeypatch.setattr(journal_module, "SHOW_AFTER", 0.05)
    store.append("j", Record.make("run.started", data={"input": []}))
    journal = Journal(store, "j", store.load("j"))
    seen: list[list[str]] = []

    async def slow() -> str:
        for _ in range(200):  # until its start is in the journal, as a watcher sees it
            await asyncio.sleep(0.01)
            if len(store.load("j")) == 2:
                break
        seen.append([r.type for r in store.load("j")])
        return "slow"

    async def fast() -> str:
        seen.append([r.type for r in store.load("j")])
        return "fast"

    assert await journal.run_step("llm/1", StepKind.MODEL, slow) == "slow"
    assert await journal.run_step("tool/1/0/lookup", StepKind.TOOL, fast) == "fast"
    assert seen == [
        ["run.started", "step.started"],  # shown while it ran
        ["run.started", "step.started", "step.completed"],  # nothing of the fast one yet
    ]
    records = store.load("j")
    assert [(r.type, r.step) for r in records[1:]] == [
        ("step.started", "llm/1"),
        ("step.completed", "llm/1"),
        ("step.started", "tool/1/0/lookup"),
        ("step.completed", "tool/1/0/lookup"),
    ]
    assert records[1].at < records[2].at  # the start keeps the time the read began


async def test_a_slow_read_that_fails_leaves_its_start_and_a_failed_outcome_after_it(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    from durableagent import journal as journal_module

    monkeypatch.setattr(journal_module, "SHOW_AFTER", 0.02)

    class Slow:
        async def complete(self, messages: object, tools: object) -> Message:
            await asyncio.sleep(0.2)
            raise RuntimeError("model overloaded")

    config = Config(AgentConfig(Slow()), PolicyGate(), store)
    with pytest.raises(RuntimeError):
        await run(config, "f", INPUT)
    records = store.load("f")
    assert [(r.type, r.step) for r in records] == [("run.started", ""), ("step.started", "llm/1")]
    assert view_store(store, "f").status == RunStatus.FAILED  # the outcome is after the start


async def test_reconcile_after_a_second_one_is_refused(store: FileStore, side: Side):
    config = await approved_run(store, side)
    with pytest.raises(Crash):
        await run(crash_after(config, "create_ticket"), "a1", None)
    signal(
        store,
        "a1",
        "reconcile",
        {"step": "tool/2/0/create_ticket", "outcome": "done", "result": "TICKET-1"},
    )
    before = store.path("a1").read_bytes()
    with pytest.raises(SignalError, match="already reconciled"):
        signal(store, "a1", "reconcile", {"step": "tool/2/0/create_ticket", "outcome": "retry"})
    assert store.path("a1").read_bytes() == before


async def test_a_stop_request_ends_the_attempt_between_steps_and_saves_no_outcome(
    store: FileStore, side: Side
):
    from durableagent import RunStopped

    config, model = helpdesk(store, side)
    asked = []

    def stop() -> bool:
        asked.append(1)
        return len(asked) > 1  # let llm/1 start, then ask to stop

    with pytest.raises(RunStopped) as e:
        await run(config, "a1", INPUT, stop=stop)
    assert e.value.step == "tool/1/0/lookup_policy"
    assert model.calls == 1 and side.count("lookup") == 0
    assert store.last_outcome("a1") is None
    assert view_store(store, "a1").status == RunStatus.READY
    out = await run(config, "a1", None)
    assert out.status == Status.AWAITING_APPROVAL
    assert model.calls == 2


async def test_a_call_that_has_its_result_is_never_gated_again_when_the_gate_changes(
    store: FileStore, side: Side
):
    """Attempt 1 ran the ticket ungated, then failed on the next model call; attempt 2 runs
    with a gate that wants approval for tickets: the recorded call replays, nobody is asked."""
    from durableagent import AgentConfig, Config, PolicyGate, ScriptedModel

    config, _ = helpdesk(store, side)
    calls = {"n": 0}

    def flaky(messages):
        calls["n"] += 1
        if calls["n"] == 3:
            raise ConnectionError("model down")
        from helpdesk import reply

        return reply(messages)

    ungated = Config(
        AgentConfig(ScriptedModel(flaky), config.agent.tools), PolicyGate(writes=()), store
    )
    with pytest.raises(ConnectionError):
        await run(ungated, "g1", INPUT)
    assert side.count("tickets") == 1
    out = await run(config, "g1", None)  # the real gate: create_ticket needs approval
    assert out.status == Status.COMPLETED, out
    assert side.count("tickets") == 1


async def test_the_first_recorded_result_of_a_step_wins(store: FileStore):
    from durableagent import Journal, StepKind

    def line(seq: int, typ: str, step: str, kind: str, data: str) -> str:
        return (
            f'{{"seq":{seq},"type":"{typ}","step":"{step}","kind":"{kind}","data":{data},"at":0}}\n'
        )

    store.path("w1").write_text(
        line(1, "run.started", "", "", '{"input":[{"role":"user","content":"hi"}]}')
        + line(2, "step.started", "llm/1", "model", "{}")
        + line(3, "step.completed", "llm/1", "model", '{"role":"assistant","content":"first"}')
        + line(4, "step.completed", "llm/1", "model", '{"role":"assistant","content":"second"}')
    )
    records = store.load("w1")

    async def never():
        raise AssertionError("a recorded step ran again")

    journal = Journal(store, "w1", records)
    got = await journal.run_step("llm/1", StepKind.MODEL, never)
    assert got["content"] == "first"
    (step,) = view_store(store, "w1").steps
    assert step.result["content"] == "first"


async def test_a_writes_start_is_on_disk_before_the_tool_runs(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    """A crash inside the write must find its start in the journal after a power loss too:
    when the tool runs, every byte up to the end of its step.started line has been fsynced."""
    journal = str(store.path("w"))
    synced: list[int] = []  # the journal's size at each fsync of it that returned
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        size = os.fstat(fd).st_size
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}") == journal:
            synced.append(size)

    monkeypatch.setattr(os, "fsync", fsync)
    on_disk_when_called: list[bool] = []

    def create_ticket(args: dict) -> str:
        data = store.path("w").read_bytes()
        start = data.index(b'"type":"step.started","step":"tool/1/0/create_ticket"')
        end = data.index(b"\n", start) + 1
        on_disk_when_called.append(max(synced, default=0) >= end)
        return "TICKET-1"

    def reply(messages: list[Message]) -> Message:
        if any(m.role == "tool" for m in messages):
            return Message("assistant", "filed")
        return Message("assistant", tool_calls=(ToolCall("c", "create_ticket", {}),))

    config = Config(
        AgentConfig(ScriptedModel(reply), [Tool("create_ticket", fn=create_ticket)]),
        PolicyGate(writes={"create_ticket"}, approve=()),
        store,
    )
    out = await run(config, "w", [Message("user", "file it")])
    assert out.status == Status.COMPLETED
    assert on_disk_when_called == [True]


async def test_a_budgeted_model_steps_reservation_is_on_disk_before_the_model_is_called(
    store: FileStore, monkeypatch: pytest.MonkeyPatch
):
    """A crash (a power loss) inside a model call must find its reservation in the journal,
    or a restart would call again as if nothing had been spent: when the model is called,
    every byte up to the end of its step.started line (its reservation) has been fsynced."""
    from durableagent import Budget, submit

    journal = str(store.path("b"))
    synced: list[int] = []  # the journal's size at each fsync of it that returned
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        size = os.fstat(fd).st_size
        real_fsync(fd)
        if os.readlink(f"/proc/self/fd/{fd}") == journal:
            synced.append(size)

    monkeypatch.setattr(os, "fsync", fsync)
    on_disk_when_called: list[bool] = []

    def reply(messages: list[Message]) -> Message:
        data = store.path("b").read_bytes()
        start = data.index(b'"type":"step.started","step":"llm/1"')
        assert b'"reserve":{"tokens":' in data[start : data.index(b"\n", start)]
        on_disk_when_called.append(max(synced, default=0) >= data.index(b"\n", start) + 1)
        return Message("assistant", "done")

    submit(store, "b", [Message("user", "answer")], budget=Budget(tokens=100_000))
    config = Config(AgentConfig(ScriptedModel(reply), []), PolicyGate(), store)
    out = await run(config, "b", None)
    assert out.status == Status.COMPLETED
    assert on_disk_when_called == [True]


# A process that runs run ``c`` until its model is called, then hangs there (to be killed).
HANG_IN_MODEL = """
import asyncio, sys, time
from pathlib import Path
from durableagent import AgentConfig, Config, FileStore, PolicyGate, ScriptedModel, Tool, run

def reply(messages):
    Path(sys.argv[2]).write_text("calling")
    time.sleep(3600)

model = ScriptedModel(reply, output_limit=100)
tools = [Tool("lookup", fn=lambda args: "the policy")]
agent = AgentConfig(model, tools, prices={"m": (1e6, 1e6)})
asyncio.run(run(Config(agent, PolicyGate(), FileStore(sys.argv[1])), "c", None))
"""


async def test_a_lost_model_calls_reservation_counts_against_a_cost_limit_after_a_restart(
    store: FileStore, tmp_path
):
    """SIGKILLed inside its first model call, the run restarts and calls it again: the call
    lost counts at its reservation, priced, so the cost limit stops the next call that
    would pass it counting the lost one (and would fit were the lost one forgotten)."""
    import signal as signals
    import subprocess
    import sys
    import time

    from durableagent import Budget, submit

    submit(store, "c", [Message("user", "look it up")], budget=Budget(cost=1_000_000.0))
    calling = tmp_path / "calling"
    child = subprocess.Popen([sys.executable, "-c", HANG_IN_MODEL, str(store.root), str(calling)])
    try:
        deadline = time.monotonic() + 60
        while not calling.exists():
            assert child.poll() is None and time.monotonic() < deadline, "no model call"
            await asyncio.sleep(0.05)
    finally:
        child.send_signal(signals.SIGKILL)
        child.wait(30)
    (lost,) = [r for r in store.load("c") if r.type == "step.started" and r.step == "llm/1"]
    reserved = lost.data["reserve"]["tokens"]  # at 1 a token: the lost call cost this much
    # Room for the lost call and its second try, never for a third call on top.
    limit = float(2 * reserved)
    signal(store, "c", "budget", {"set": {"cost": limit}}, by="ana", reason="tight")
    calls: list[int] = []

    def reply(messages: list[Message]) -> Message:
        calls.append(len(messages))
        if len(calls) == 1:
            usage = {"input_tokens": 10, "output_tokens": 5}
            return Message("assistant", tool_calls=(ToolCall("a", "lookup", {}),), usage=usage)
        return Message("assistant", "found it")

    model = ScriptedModel(reply, output_limit=100)
    tools = [Tool("lookup", fn=lambda args: "the policy")]
    agent = AgentConfig(model, tools, prices={"m": (1e6, 1e6)})
    out = await run(Config(agent, PolicyGate(), store), "c", None)
    assert out.status == Status.OVER_BUDGET, out
    assert "cost" in out.error, out.error
    assert len(calls) == 1, out.error  # llm/1 again; llm/2 would pass the limit with the lost call
    spend = view_store(store, "c").controls.spend
    assert sum(spend.lost.values()) == reserved

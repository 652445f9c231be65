"""Traces (SPEC §12): a span per attempt and per step, to the SDK's in-memory exporter."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _telemetry_agents import helpdesk
from telemetry_support import by_attempt_spans as by_attempt
from telemetry_support import run_approved, traced, until

from durableagent import FileStore, Message, submit
from durableagent.journal import idempotency_key
from durableagent.telemetry import run_trace_id
from durableagent.worker import Worker

TESTS = Path(__file__).parent


async def test_a_run_is_one_trace_its_attempts_spans_and_replayed_steps_marked(
    store: FileStore,
) -> None:
    provider, exporter = traced()
    await run_approved(store, Worker(helpdesk(), store, rescan=0.5, tracer_provider=provider))
    spans = list(exporter.get_finished_spans())
    trace_id = run_trace_id(store.load("r1")[0])
    assert {s.context.trace_id for s in spans} == {trace_id}
    attempts = [s for s in spans if s.name == "durableagent.attempt"]
    assert [a.attributes["durableagent.outcome"] for a in attempts] == [
        "awaiting_approval",
        "completed",
    ]
    for number, a in enumerate(attempts, 1):
        assert a.attributes["durableagent.run_id"] == "r1"
        assert a.attributes["durableagent.attempt"] == number
        assert a.attributes["durableagent.lease.epoch"] == number
        assert a.attributes["durableagent.owner"]
        assert a.parent is not None and a.parent.trace_id == trace_id  # the run's context
    steps = by_attempt(spans)
    assert [(s.name, s.attributes["durableagent.step.replayed"]) for s in steps[1]] == [
        ("chat gpt-test", False)
    ]
    assert [(s.name, s.attributes["durableagent.step.replayed"]) for s in steps[2]] == [
        ("chat gpt-test", True),
        ("execute_tool lookup", False),
        ("execute_tool create_ticket", False),
        ("chat gpt-test", False),
    ]
    chat = steps[1][0].attributes
    assert chat["gen_ai.operation.name"] == "chat"
    assert chat["gen_ai.provider.name"] == "openai"
    assert chat["gen_ai.request.model"] == "gpt-test"
    assert chat["gen_ai.response.model"] == "gpt-test-0613"
    assert chat["gen_ai.response.id"] == "resp-0"
    assert (chat["gen_ai.usage.input_tokens"], chat["gen_ai.usage.output_tokens"]) == (7, 3)
    replayed = steps[2][0].attributes
    recorded = {r.type: r.at for r in store.load("r1") if r.step == "llm/1"}
    assert replayed["durableagent.step.recorded_start"] == recorded["step.started"]
    assert replayed["durableagent.step.recorded_end"] == recorded["step.completed"]
    assert replayed["gen_ai.response.id"] == "resp-0"
    lookup, create = steps[2][1].attributes, steps[2][2].attributes
    assert lookup["gen_ai.tool.name"] == "lookup"
    assert lookup["gen_ai.tool.call.id"] == "call-look"
    assert (lookup["durableagent.tool.write"], lookup["durableagent.tool.idempotent"]) == (
        False,
        False,
    )
    assert create["gen_ai.tool.call.id"] == "call-file"
    assert create["durableagent.tool.write"] is True
    # Contents only when opted in.
    assert not any("gen_ai.output.messages" in s.attributes for s in spans)
    assert not any("gen_ai.tool.call.arguments" in s.attributes for s in spans)


def test_the_trace_id_comes_from_the_start_digest_the_idempotency_key_uses(
    store: FileStore,
) -> None:
    submit(store, "r1", [Message("user", "hello")])
    first = store.load("r1")[0]
    digest = idempotency_key("r1", "", first).split(":")[1]
    assert f"{run_trace_id(first):032x}".startswith(digest)
    submit(store, "r2", [Message("user", "hello")])
    assert run_trace_id(store.load("r2")[0]) != run_trace_id(first)  # another run, time


async def test_contents_are_recorded_when_opted_in(store: FileStore) -> None:
    provider, exporter = traced()
    worker = Worker(helpdesk(), store, rescan=0.5, tracer_provider=provider, capture_content=True)
    await run_approved(store, worker)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    tool = spans["execute_tool create_ticket"].attributes
    assert json.loads(tool["gen_ai.tool.call.arguments"]) == {"summary": "printer on fire"}
    assert tool["gen_ai.tool.call.result"] == "T-1 printer on fire"
    answer = json.loads(spans["chat gpt-test"].attributes["gen_ai.output.messages"])
    assert answer[0]["role"] == "assistant"
    sent = json.loads(spans["chat gpt-test"].attributes["gen_ai.input.messages"])  # the last
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
    assert [m.get("tool_call_id") for m in sent[2:]] == ["call-look", "call-file"]
    assert sent[3]["content"] == "T-1 printer on fire"


async def test_a_step_that_raises_is_a_failed_span(store: FileStore) -> None:
    from durableagent import Agent, AgentConfig, PolicyGate, ScriptedModel

    def broken(messages: Any) -> Message:
        raise ConnectionError("the model service is down")

    provider, exporter = traced()
    agent = Agent(AgentConfig(ScriptedModel(broken)), PolicyGate())
    worker = Worker(agent, store, rescan=0.5, tracer_provider=provider, max_attempts=1)
    submit(store, "r1", [Message("user", "hi")])
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    await until(lambda: len(exporter.get_finished_spans()) >= 2)
    stop.set()
    await asyncio.wait_for(serving, 10)
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert spans["chat"].status.status_code.name == "ERROR"
    assert spans["chat"].attributes["error.type"] == "ConnectionError"
    assert spans["durableagent.attempt"].attributes["durableagent.outcome"] == "failed"


@pytest.mark.parametrize("configured", [False, True])
def test_nothing_imports_opentelemetry_unless_it_is_configured(
    tmp_path: Path, configured: bool
) -> None:
    script = f"""
import asyncio, sys
sys.path.insert(0, {str(TESTS)!r})
import durableagent
from durableagent import FileStore, Message, RunStatus, submit, view_store
from durableagent.worker import Worker
from _telemetry_agents import helpdesk
assert not [m for m in sys.modules if m.startswith(("opentelemetry", "prometheus_client"))]
store = FileStore({str(tmp_path / "runs")!r})
submit(store, "r1", [Message("user", "hi")])
async def main():
    stop = asyncio.Event()
    serving = asyncio.create_task(Worker(helpdesk(), store, rescan=0.5).serve(stop))
    while view_store(store, "r1").status != RunStatus.AWAITING_APPROVAL:
        await asyncio.sleep(0.02)
    stop.set()
    await serving
asyncio.run(main())
loaded = {{m.split(".")[0] for m in sys.modules}}
print(sorted(loaded & {{"opentelemetry", "prometheus_client"}}))
"""
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"} if configured else {}
    out = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=_env(env),
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("['opentelemetry']" if configured else "[]")


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    env["OTEL_BSP_EXPORT_TIMEOUT"] = "200"
    return env | extra


def test_an_otlp_endpoint_without_the_extra_says_what_to_install(tmp_path: Path) -> None:
    hide = tmp_path / "hide"
    (hide / "opentelemetry").mkdir(parents=True)
    (hide / "opentelemetry" / "__init__.py").write_text(
        "raise ImportError('No module named opentelemetry', name='opentelemetry')\n"
    )
    env = _env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"})
    env["PYTHONPATH"] = os.pathsep.join([str(hide), str(TESTS), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "durableagent.cli",
            "worker",
            "--agent",
            "_telemetry_agents:helpdesk",
            "--store",
            str(tmp_path / "runs"),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert out.returncode != 0
    assert "Traceback" not in out.stderr
    assert "pip install 'durableagent[otel]'" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr

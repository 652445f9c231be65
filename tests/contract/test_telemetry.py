"""Telemetry on both stores (SPEC §12): one trace per run, replayed steps marked, and the
metrics' counts, with the worker in this process."""

from __future__ import annotations

from _telemetry_agents import helpdesk
from telemetry_support import run_approved, traced

from durableagent import RunStatus, Store
from durableagent.telemetry import new_metrics, run_trace_id
from durableagent.worker import Worker


async def test_a_run_is_one_trace_and_its_counts_on_every_store(any_store: Store) -> None:
    provider, exporter = traced()
    metrics = new_metrics(any_store)
    worker = Worker(helpdesk(), any_store, rescan=0.5, tracer_provider=provider, metrics=metrics)
    await run_approved(any_store, worker)
    spans = exporter.get_finished_spans()
    assert {s.context.trace_id for s in spans} == {run_trace_id(any_store.load("r1")[0])}
    attempts = [s for s in spans if s.name == "durableagent.attempt"]
    assert [a.attributes["durableagent.attempt"] for a in attempts] == [1, 2]
    replayed = [s.name for s in spans if s.attributes.get("durableagent.step.replayed")]
    assert replayed == ["chat gpt-test"]

    def value(name: str, **labels: str) -> float | None:
        return metrics.registry.get_sample_value(name, labels)

    assert value("durableagent_steps_total", kind="model", outcome="ran") == 2
    assert value("durableagent_steps_total", kind="model", outcome="replayed") == 1
    assert value("durableagent_steps_total", kind="tool", outcome="ran") == 2
    assert value("durableagent_model_tokens_total", direction="input") == 14
    assert value("durableagent_attempts_total", ended="awaiting_approval") == 1
    assert value("durableagent_attempts_total", ended="completed") == 1
    assert (value("durableagent_append_seconds_count") or 0) >= 4
    metrics.runs.read()
    assert value("durableagent_runs", status=str(RunStatus.COMPLETED)) == 1

"""OpenTelemetry spans for attempts and steps (SPEC §12; extra ``otel``).

Each attempt is a span ``durableagent.attempt`` whose parent is a non-recording span context
holding the run's trace id (``run_trace_id``: from its start digest), so that every attempt of
a run, on any worker, lands in one trace. Each step is a child span following the GenAI
semantic conventions: ``chat {model}`` for a model step, ``execute_tool {tool}`` for a tool
step; a step replayed from the journal says ``durableagent.step.replayed=true`` and carries
the times its records were made. Message contents are recorded only with
``capture_content=True``.

This module imports OpenTelemetry: only a worker given a tracer provider, or configured by the
standard ``OTEL_EXPORTER_OTLP_*`` variables, loads it.
"""

from __future__ import annotations

import json
import os
from typing import Any

from opentelemetry import trace
from opentelemetry.trace import (
    NonRecordingSpan,
    Span,
    SpanContext,
    SpanKind,
    Status,
    StatusCode,
    TraceFlags,
    TracerProvider,
)

from ..messages import StepKind
from ..outcome import Outcome
from ..record import Record
from ..step_index import run_trace_id, start_digest
from ..steps import step_tool_name

INSTRUMENTATION = "durableagent"


class Traces:
    """Makes the spans with ``provider``'s tracer. ``owned``: this worker made the provider
    (from the environment) and shuts it down when it stops."""

    def __init__(
        self, provider: TracerProvider, *, capture_content: bool = False, owned: bool = False
    ) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer(INSTRUMENTATION)
        self.capture_content = capture_content
        self.owned = owned

    def begin_attempt(
        self, run_id: str, run_started: Record | None, epoch: int, owner: str
    ) -> Span:
        digest = start_digest(run_started)
        parent = SpanContext(
            trace_id=run_trace_id(run_started),
            span_id=int(digest[32:48], 16) or 1,  # the run's own (never exported) span
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
        context = trace.set_span_in_context(NonRecordingSpan(parent))
        return self.tracer.start_span(
            "durableagent.attempt",
            context=context,
            kind=SpanKind.INTERNAL,
            attributes={
                "durableagent.run_id": run_id,
                "durableagent.lease.epoch": epoch,
                "durableagent.owner": owner,
            },
        )

    def end_attempt(
        self,
        span: Span,
        number: int,
        ended: str,
        outcome: Outcome | None,
        error: BaseException | None,
    ) -> None:
        span.set_attribute("durableagent.attempt", number)
        span.set_attribute("durableagent.outcome", ended)
        if outcome is not None and outcome.step:
            span.set_attribute("durableagent.step", outcome.step)
        if ended == "failed" and error is not None:
            span.record_exception(error)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end()

    def step(
        self,
        attempt: Span,
        name: str,
        kind: StepKind,
        *,
        start_ns: int,
        end_ns: int,
        replayed: bool,
        value: Any,
        model: str,
        provider: str,
        call: dict[str, Any] | None,
        info: dict[str, Any],
        recorded: tuple[float | None, float | None],
        error: BaseException | None,
    ) -> None:
        attrs: dict[str, Any] = {"durableagent.step": name, "durableagent.step.replayed": replayed}
        if replayed:
            started_at, completed_at = recorded
            if started_at is not None:
                attrs["durableagent.step.recorded_start"] = started_at
            if completed_at is not None:
                attrs["durableagent.step.recorded_end"] = completed_at
        if kind == StepKind.MODEL:
            message = value if isinstance(value, dict) else {}
            response_model = message.get("model")
            asked = model or (response_model if isinstance(response_model, str) else "")
            span_name = f"chat {asked}" if asked else "chat"
            span_kind = SpanKind.CLIENT
            attrs["gen_ai.operation.name"] = "chat"
            attrs["gen_ai.provider.name"] = provider
            if model:
                attrs["gen_ai.request.model"] = model
            if isinstance(response_model, str):
                attrs["gen_ai.response.model"] = response_model
            if isinstance(message.get("response_id"), str):
                attrs["gen_ai.response.id"] = message["response_id"]
            usage = message.get("usage")
            if isinstance(usage, dict):
                for key in ("input_tokens", "output_tokens"):
                    if isinstance(usage.get(key), int):
                        attrs[f"gen_ai.usage.{key}"] = usage[key]
            if self.capture_content and message:
                attrs["gen_ai.output.messages"] = json.dumps([message])
                if "input_messages" in info:
                    attrs["gen_ai.input.messages"] = json.dumps(info["input_messages"])
        else:
            tool = step_tool_name(name) or name
            span_name = f"execute_tool {tool}"
            span_kind = SpanKind.INTERNAL
            attrs["gen_ai.operation.name"] = "execute_tool"
            attrs["gen_ai.tool.name"] = tool
            if call is not None and isinstance(call.get("id"), str):
                attrs["gen_ai.tool.call.id"] = call["id"]
            write, idempotent = bool(info.get("write")), bool(info.get("idempotent"))
            if replayed:
                write, idempotent = _recorded_class(info)
            attrs["durableagent.tool.write"] = write
            attrs["durableagent.tool.idempotent"] = idempotent
            if self.capture_content:
                if call is not None:
                    attrs["gen_ai.tool.call.arguments"] = json.dumps(call.get("arguments"))
                if isinstance(value, dict) and isinstance(value.get("content"), str):
                    attrs["gen_ai.tool.call.result"] = value["content"]
        context = trace.set_span_in_context(attempt)
        span = self.tracer.start_span(
            span_name, context=context, kind=span_kind, attributes=attrs, start_time=start_ns
        )
        if error is not None:
            span.set_attribute("error.type", type(error).__qualname__)
            span.set_status(Status(StatusCode.ERROR, f"{type(error).__name__}: {error}"))
        span.end(end_time=max(end_ns, start_ns))

    def close(self) -> None:
        flush = getattr(self.provider, "force_flush", None)
        if callable(flush):
            flush()
        if self.owned:
            shutdown = getattr(self.provider, "shutdown", None)
            if callable(shutdown):
                shutdown()


def _recorded_class(info: dict[str, Any]) -> tuple[bool, bool]:
    """A replayed tool step's class as its start recorded it (the journal wrapper passes the
    recorded start's data as ``recorded_class``)."""
    got = info.get("recorded_class")
    if isinstance(got, tuple) and len(got) == 2:
        return bool(got[0]), bool(got[1])
    return bool(info.get("write")), bool(info.get("idempotent"))


def from_environment(capture_content: bool = False) -> Traces | None:
    """Traces exported over OTLP/HTTP when ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or its
    ``_TRACES_`` form) is set and ``OTEL_SDK_DISABLED`` is not true; else None. The exporter
    reads the rest of the standard variables itself (headers, timeout, compression), and the
    batch processor its ``OTEL_BSP_*``. Raises ImportError without the extra."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider as SdkProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME") or "agentrun"})
    provider = SdkProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return Traces(provider, capture_content=capture_content, owned=True)

"""For the telemetry tests: an OTLP/HTTP receiver that decodes what workers export, and
``agentrun worker`` children running ``_telemetry_agents``."""

from __future__ import annotations

import asyncio
import gzip
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from procs import child_env

from durableagent import Message, RunStatus, Store, submit, view_store
from durableagent import signal as send_signal
from durableagent.worker import Worker


class Receiver:
    """A local OTLP/HTTP endpoint: every span of every ExportTraceServiceRequest posted to
    ``/v1/traces``, decoded, as a dict (name, trace and span ids as hex, parent, attributes)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportTraceServiceRequest.FromString(body)
                receiver.take(request, self.path)
                reply = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._lock = threading.Lock()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def take(self, request: ExportTraceServiceRequest, path: str) -> None:
        assert path == "/v1/traces", path
        got = []
        for rs in request.resource_spans:
            for ss in rs.scope_spans:
                for s in ss.spans:
                    got.append(
                        {
                            "name": s.name,
                            "trace_id": s.trace_id.hex(),
                            "span_id": s.span_id.hex(),
                            "parent": s.parent_span_id.hex(),
                            "attributes": {a.key: _value(a.value) for a in s.attributes},
                            "status": s.status.code,
                        }
                    )
        with self._lock:
            self.requests += 1
            self.spans.extend(got)

    def named(self, name: str) -> list[dict[str, Any]]:
        with self._lock:
            return [s for s in self.spans if s["name"] == name]

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()


def _value(v: Any) -> Any:
    kind = v.WhichOneof("value")
    return None if kind is None else getattr(v, kind)


def worker(root: Path, log: Path, *args: str, **env: str) -> subprocess.Popen[bytes]:
    """``agentrun worker --agent _telemetry_agents:helpdesk`` on ``root``, its stderr in
    ``log``; ``env`` on top of this process's own (with no OTEL_ variable of its own)."""
    base = {k: v for k, v in child_env().items() if not k.startswith("OTEL_")}
    with open(log, "ab") as out:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "durableagent.cli",
                "worker",
                "--agent",
                "_telemetry_agents:helpdesk",
                "--store",
                str(root),
                "--rescan",
                "0.5",
                *args,
            ],
            env=base | env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def by_attempt_spans(spans: list[Any]) -> dict[int, list[Any]]:
    """Each attempt's step spans, by the attempt's number, in the order they started."""
    attempts = {s.context.span_id: s for s in spans if s.name == "durableagent.attempt"}
    out: dict[int, list[Any]] = {}
    for a in attempts.values():
        out[int(a.attributes["durableagent.attempt"])] = sorted(
            (s for s in spans if s.parent is not None and s.parent.span_id == a.context.span_id),
            key=lambda s: s.start_time or 0,
        )
    return out


def traced() -> tuple[TracerProvider, InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


async def until(what: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not what():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def run_approved(store: Store, worker: Worker, run_id: str = "r1") -> None:
    """Submit, let the worker take the run to its approval, approve, let it complete."""
    submit(store, run_id, [Message("user", "the printer is on fire")])
    stop = asyncio.Event()
    serving = asyncio.create_task(worker.serve(stop))
    try:
        await until(lambda: view_store(store, run_id).status == RunStatus.AWAITING_APPROVAL)
        for p in view_store(store, run_id).pending:
            send_signal(store, run_id, "approve", {"marker": p.marker}, by="ana")
        await until(lambda: view_store(store, run_id).status == RunStatus.COMPLETED)
    finally:
        stop.set()
        await asyncio.wait_for(serving, 10)

"""Telemetry for machines (SPEC §12): traces (extra ``otel``), metrics (extra ``metrics``) and
log fields, each behind its extra and loaded only when configured.

``import durableagent`` and a run with nothing configured never import OpenTelemetry nor
prometheus_client: this package is standard library only; ``traces.py`` and ``metrics.py``
are imported by :func:`configure` when asked for.
"""

from __future__ import annotations

import os
from typing import Any

from ..errors import DurableAgentError
from ..step_index import run_trace_id, start_digest
from ..stores import Store
from .observe import Observed, RunWatch, Telemetry


class TelemetryUnavailable(DurableAgentError):
    """Telemetry was asked for without the extra that provides it."""


OTLP_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def otlp_configured(env: dict[str, str] | None = None) -> bool:
    """An OTLP endpoint for traces is set the standard way, and the SDK is not disabled."""
    env = dict(os.environ) if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    if env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none":
        return False
    return any(env.get(v) for v in OTLP_VARIABLES)


def otlp_endpoint(env: dict[str, str] | None = None) -> str:
    """Where OTLP/HTTP traces go, as the exporter reads it (the traces variable as given,
    else the general one with ``/v1/traces``), with any user, password and query removed:
    what a worker may print."""
    from urllib.parse import urlsplit, urlunsplit

    env = dict(os.environ) if env is None else env
    url = env.get(OTLP_VARIABLES[1], "").strip()
    general = not url
    if general:
        url = env.get(OTLP_VARIABLES[0], "").strip()
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        netloc = host if parts.port is None else f"{host}:{parts.port}"
    except ValueError:
        return "the endpoint in the environment (it does not parse as a URL)"
    path = parts.path.rstrip("/") + "/v1/traces" if general else parts.path
    return urlunsplit((parts.scheme, netloc, path, "", ""))


def configure(
    store: Store,
    *,
    tracer_provider: Any = None,
    capture_content: bool = False,
    metrics: Any = None,
) -> Telemetry:
    """A worker's telemetry: traces to ``tracer_provider``, else over OTLP/HTTP when the
    environment names an endpoint, else none; ``metrics``: a ``Metrics`` (or True for one
    with its own registry), else none. Raises TelemetryUnavailable (naming the extra to
    install) when what is asked for is not installed."""
    traces = None
    if tracer_provider is not None or otlp_configured():
        try:
            from . import traces as tracing
        except ImportError as e:
            raise TelemetryUnavailable(
                f"traces need OpenTelemetry ({e.name or e}): pip install 'durableagent[otel]'"
            ) from None
        if tracer_provider is not None:
            traces = tracing.Traces(tracer_provider, capture_content=capture_content)
        else:
            try:
                traces = tracing.from_environment(capture_content)
            except ImportError as e:
                raise TelemetryUnavailable(
                    f"OTEL_EXPORTER_OTLP_ENDPOINT is set but the OTLP exporter is missing "
                    f"({e.name or e}): pip install 'durableagent[otel]'"
                ) from None
    made = None
    if metrics is True:
        made = new_metrics(store)
    elif metrics is not None and metrics is not False:
        made = metrics
    return Telemetry(traces, made)


def new_metrics(store: Store, refresh: float = 5.0) -> Any:
    """A ``Metrics`` for ``store`` in a registry of its own; TelemetryUnavailable without
    prometheus_client."""
    try:
        from .metrics import Metrics
    except ImportError as e:
        raise TelemetryUnavailable(
            f"metrics need prometheus_client ({e.name or e}): pip install 'durableagent[metrics]'"
        ) from None
    return Metrics(store, refresh=refresh)


__all__ = [
    "Observed",
    "RunWatch",
    "Telemetry",
    "TelemetryUnavailable",
    "configure",
    "new_metrics",
    "otlp_configured",
    "run_trace_id",
    "start_digest",
]

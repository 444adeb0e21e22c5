"""Export traces to an OpenTelemetry backend over OTLP/HTTP (the ``tracing`` extra).

``llm-compiler serve`` calls :func:`start_export`: with ``--otlp-endpoint URL`` or the
standard ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` variables
(headers, timeouts and the like come from the other ``OTEL_EXPORTER_OTLP_*`` variables,
the service name from ``OTEL_SERVICE_NAME``), OpenInference's ``LlamaIndexInstrumentor``
turns every llama-index span, ours included, into an OpenTelemetry span, and a batch
processor sends them from its own thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from llm_compiler.errors import ConfigurationError

ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
INSTALL_HINT = "pip install 'llm-compiler[tracing]'"


def traces_url(endpoint: str) -> str:
    """The OTLP/HTTP traces URL of a base endpoint (``http://host:4318`` -> ``.../v1/traces``)."""
    endpoint = endpoint.rstrip("/")
    return endpoint if endpoint.endswith("/v1/traces") else endpoint + "/v1/traces"


def export_configured(endpoint: str | None = None) -> bool:
    """Whether `endpoint` or the OTel environment asks for an export."""
    return bool(endpoint) or any(os.environ.get(v) for v in ENDPOINT_VARS)


def start_export(endpoint: str | None = None) -> Callable[[], None] | None:
    """Start exporting spans; return the function that flushes and stops (None: no export).

    `endpoint` (a base URL like ``--otlp-endpoint``) wins over the environment.
    """
    if not export_configured(endpoint):
        return None
    try:
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as e:
        raise ConfigurationError(
            f"Exporting traces needs the tracing extra ({e.name} is missing): {INSTALL_HINT}"
        ) from None
    if endpoint is not None and not endpoint.startswith(("http://", "https://")):
        raise ConfigurationError(f"The OTLP endpoint {endpoint!r} is not an http(s) URL.")
    service = os.environ.get("OTEL_SERVICE_NAME") or "llm-compiler"
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    exporter = OTLPSpanExporter(endpoint=traces_url(endpoint)) if endpoint else OTLPSpanExporter()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)

    def stop() -> None:
        instrumentor.uninstrument()
        provider.shutdown()  # flushes what is still queued

    return stop

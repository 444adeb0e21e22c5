"""An OpenTelemetry in-memory exporter behind OpenInference's LlamaIndex instrumentor."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


@pytest.fixture(scope="module")
def _instrumented() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        yield exporter
    finally:
        instrumentor.uninstrument()
        provider.shutdown()


@pytest.fixture
def exporter(_instrumented: InMemorySpanExporter) -> InMemorySpanExporter:
    """Finished spans of this test (OpenInference maps the dispatcher's spans to OTel)."""
    _instrumented.clear()
    return _instrumented


class Tree:
    """Finished spans, with lookups by name prefix and by parent."""

    def __init__(self, spans: tuple[ReadableSpan, ...]) -> None:
        self.spans = sorted(spans, key=lambda s: s.start_time or 0)
        self.by_id = {s.context.span_id: s for s in self.spans}

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [s for s in self.spans if s.name.startswith(prefix)]

    def one(self, prefix: str) -> ReadableSpan:
        (span,) = self.named(prefix)
        return span

    def parent(self, span: ReadableSpan) -> ReadableSpan | None:
        return self.by_id.get(span.parent.span_id) if span.parent else None

    def children(self, span: ReadableSpan, prefix: str = "") -> list[ReadableSpan]:
        return [s for s in self.named(prefix) if self.parent(s) is span]

    @staticmethod
    def attr(span: ReadableSpan, key: str) -> Any:
        assert span.attributes is not None
        return span.attributes.get(key)

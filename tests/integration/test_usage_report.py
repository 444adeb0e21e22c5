"""Tokens and cost from a server's usage report in a stream (OpenAI's last chunk)."""

from __future__ import annotations

import pytest
from llama_index.llms.openai import OpenAI

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.tracing import OPENAI_PRICES

from .fake_openai import FakeOpenAI

PLAN = "1. search('x')\n2. join()<END_OF_PLAN>"
FINISH = "Thought: done.\nAction: Finish(x found)"


def search(query: str) -> str:
    """Search for a query."""
    return f"found {query}"


async def test_streamed_usage_reports_give_tokens_cached_tokens_and_cost(fake_openai: FakeOpenAI):
    fake_openai.stream_usage = {
        "prompt_tokens": 1200,
        "completion_tokens": 30,
        "total_tokens": 1230,
        "prompt_tokens_details": {"cached_tokens": 1024},
    }
    fake_openai.script(PLAN, FINISH)
    llm = OpenAI(model="gpt-4o-mini", api_base=fake_openai.base_url, api_key="sk-test")
    result = await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="Find x.")
    assert str(result) == "x found"
    for body in fake_openai.bodies:
        assert body["stream"] and body["stream_options"] == {"include_usage": True}
    calls = result.summary.llm_calls
    assert [c.phase for c in calls] == ["planner", "joiner"]
    price = OPENAI_PRICES["gpt-4o-mini"]
    for call in calls:
        assert call.source == "reported" and call.model == "gpt-4o-mini"
        assert (call.prompt_tokens, call.completion_tokens, call.cached_tokens) == (1200, 30, 1024)
        # 176 uncached and 1024 cached input tokens, 30 output tokens.
        expected = (176 * price.input + 1024 * price.cached_input + 30 * price.output) / 1e6
        assert call.cost == pytest.approx(expected)
    usage = result.summary.usage
    assert (usage.prompt_tokens, usage.cached_tokens, usage.calls) == (2400, 2048, 2)
    assert usage.cost == pytest.approx(2 * calls[0].cost)
    assert result.summary.prompt_tokens == 2400  # the older fields agree


async def test_a_server_without_a_report_gets_counted_tokens(fake_openai: FakeOpenAI):
    fake_openai.script(PLAN, FINISH)  # no stream_usage: the fake sends a 1-token report
    fake_openai.stream_usage = None
    llm = OpenAI(model="gpt-4o-mini-2024-07-18", api_base=fake_openai.base_url, api_key="sk")
    result = await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="Find x.")
    # A dated snapshot is priced as its model.
    assert all(c.cost is not None and c.cost > 0 for c in result.summary.llm_calls)


async def test_a_reported_usage_is_counted_once_by_backends_that_sum_llm_spans(fake_openai):
    from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)
    try:
        fake_openai.stream_usage = {"prompt_tokens": 1200, "completion_tokens": 30}
        fake_openai.script(PLAN, FINISH)
        llm = OpenAI(model="gpt-4o-mini", api_base=fake_openai.base_url, api_key="sk-test")
        await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="Find x.")
    finally:
        instrumentor.uninstrument()
    llm_spans = [
        s
        for s in exporter.get_finished_spans()
        if s.attributes.get("openinference.span.kind") == "LLM"
    ]
    ours = [s for s in llm_spans if s.name.startswith("llm_compiler.")]
    assert len(ours) == 2
    # OpenInference's counts: once per call (on the client's span) ...
    assert sum(s.attributes.get("llm.token_count.prompt", 0) for s in llm_spans) == 2400
    # ... and the GenAI ones once per call, on ours.
    assert [s.attributes["gen_ai.usage.input_tokens"] for s in ours] == [1200, 1200]
    assert all(s.attributes["llm_compiler.usage.source"] == "reported" for s in ours)

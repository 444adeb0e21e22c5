"""Traces, tokens and cost of runs.

:mod:`.spans` and :mod:`.tracer` emit the LLMCompiler span tree through llama-index's
instrumentation dispatcher; :mod:`.usage` accounts tokens and cost per LLM call, round
and run; :mod:`.prices` holds the price table; :mod:`.otel` exports to an OTLP backend
(the ``tracing`` extra).
"""

from llm_compiler.tracing.prices import (
    OPENAI_PRICES,
    ModelPrice,
    load_prices,
    price_for,
    price_table,
)
from llm_compiler.tracing.tracer import Tracer
from llm_compiler.tracing.usage import LLMCallUsage, Usage

__all__ = [
    "OPENAI_PRICES",
    "LLMCallUsage",
    "ModelPrice",
    "Tracer",
    "Usage",
    "load_prices",
    "price_for",
    "price_table",
]

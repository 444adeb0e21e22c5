"""Plan dialects: the formats in which an LLM writes a plan (see :mod:`.base`)."""

from llm_compiler.dialects.base import DirectAnswer, PlanDialect, PlannerContext, PlanStream
from llm_compiler.dialects.json_plan import JsonPlanDialect
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect

__all__ = [
    "DirectAnswer",
    "JsonPlanDialect",
    "LLMCompilerDialect",
    "PlanDialect",
    "PlanStream",
    "PlannerContext",
]

"""Plan dialects: the formats in which an LLM writes a plan (see :mod:`.base`)."""

from llm_compiler.dialects.base import (
    DirectAnswer,
    ForcedJoin,
    PlanDialect,
    PlannerContext,
    PlanStream,
)
from llm_compiler.dialects.json_plan import JsonPlanDialect
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect

__all__ = [
    "DirectAnswer",
    "ForcedJoin",
    "JsonPlanDialect",
    "LLMCompilerDialect",
    "PlanDialect",
    "PlanStream",
    "PlannerContext",
]

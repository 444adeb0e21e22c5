"""Plan dialects: the formats in which an LLM writes a plan (see :mod:`.base`)."""

from llm_compiler.dialects.base import DirectAnswer, PlanDialect, PlannerContext, PlanStream
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect

__all__ = ["DirectAnswer", "LLMCompilerDialect", "PlanDialect", "PlanStream", "PlannerContext"]

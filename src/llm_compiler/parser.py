"""Deprecated location (one release): the parsers moved.

Plan lines: :mod:`llm_compiler.dialects.llmcompiler.parser`; arguments and references:
:mod:`llm_compiler.arguments`; the joiner: :mod:`llm_compiler.joiner`.
"""

from llm_compiler.arguments import PlanLineError, parse_arguments
from llm_compiler.dialects.llmcompiler.parser import PlanParser, parse_task_line
from llm_compiler.joiner import JoinerDecision, parse_joiner_output
from llm_compiler.plan import END_OF_PLAN

__all__ = [
    "END_OF_PLAN",
    "JoinerDecision",
    "PlanLineError",
    "PlanParser",
    "parse_arguments",
    "parse_joiner_output",
    "parse_task_line",
]

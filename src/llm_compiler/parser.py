"""Deprecated location (one release): the parsers moved.

Plan lines: :mod:`llm_compiler.dialects.llmcompiler.parser`; arguments and references:
:mod:`llm_compiler.dialects.arguments`; the joiner: :mod:`llm_compiler.dialects.thought_action`.
"""

from llm_compiler.dialects.arguments import PlanLineError, parse_arguments
from llm_compiler.dialects.llmcompiler.parser import PlanParser, parse_task_line
from llm_compiler.dialects.thought_action import JoinerDecision, parse_joiner_output
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

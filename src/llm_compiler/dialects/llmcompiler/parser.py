"""The LLMCompiler plan-line parser, importable here too; it lives in
:mod:`llm_compiler.dialects.plan_lines`, below the modules that read plan lines again
(grounding, the selected answer) and the dialect package that imports them."""

from llm_compiler.dialects.plan_lines import (
    MAX_ARG_DEPTH,
    MAX_ID_DIGITS,
    MAX_LINE_CHARS,
    MAX_PLAN_CHARS,
    MAX_PLAN_ERRORS,
    PlanParser,
    parse_task_line,
)

__all__ = [
    "MAX_ARG_DEPTH",
    "MAX_ID_DIGITS",
    "MAX_LINE_CHARS",
    "MAX_PLAN_CHARS",
    "MAX_PLAN_ERRORS",
    "PlanParser",
    "parse_task_line",
]

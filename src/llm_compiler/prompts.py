"""Deprecated location (one release): the prompts moved.

Planner: :mod:`llm_compiler.dialects.llmcompiler.prompts`; joiner:
:mod:`llm_compiler.dialects.thought_action`; shared records: :mod:`llm_compiler.dialects.prompting`.
"""

from llm_compiler.dialects.llmcompiler.prompts import (
    EXAMPLE_NOTE,
    PLANNER_EXAMPLES,
    PLANNER_INSTRUCTIONS,
    REPLAN_NOTE,
    PlannerInput,
    render_actions,
)
from llm_compiler.dialects.prompting import RoundRecord, render_conversation, render_history
from llm_compiler.dialects.thought_action import (
    JOINER_EXAMPLES,
    JOINER_INSTRUCTIONS,
    LAST_ROUND_NOTE,
    JoinerInput,
)

__all__ = [
    "EXAMPLE_NOTE",
    "JOINER_EXAMPLES",
    "JOINER_INSTRUCTIONS",
    "LAST_ROUND_NOTE",
    "PLANNER_EXAMPLES",
    "PLANNER_INSTRUCTIONS",
    "REPLAN_NOTE",
    "JoinerInput",
    "PlannerInput",
    "RoundRecord",
    "render_actions",
    "render_conversation",
    "render_history",
]

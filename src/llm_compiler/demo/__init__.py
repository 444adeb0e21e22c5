"""Offline demo tools: a safe calculator and a small encyclopedia (:mod:`.tools`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: The question the demo and the served page offer first.
QUESTION = "What are the capitals of France and Japan?"

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

    from llm_compiler.engine.workflow import LLMCompilerWorkflow


def demo_compiler(llm: LLM, **options: Any) -> LLMCompilerWorkflow:
    """The compiler `make demo` runs: the demo tools with their few-shot examples.

    `options` override its settings (one replan, 10 s per tool, 300 s per run).
    """
    from llm_compiler.demo import tools
    from llm_compiler.engine.workflow import LLMCompilerWorkflow

    settings: dict[str, Any] = {
        "tools": tools.TOOLS,
        "planner_examples": tools.PLANNER_EXAMPLES,
        "joiner_examples": tools.JOINER_EXAMPLES,
        "max_replans": 1,
        "tool_timeout": 10,
        "timeout": 300,
        **options,
    }
    return LLMCompilerWorkflow(llm=llm, **settings)

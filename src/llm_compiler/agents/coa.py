"""Chain-of-Abstraction as one agent of a llama-index ``AgentWorkflow``."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from llm_compiler.agents.llmcompiler import LLMCompilerAgent
from llm_compiler.dialects.coa import CoADialect


class CoAAgent(LLMCompilerAgent):
    """Chain-of-Abstraction as one agent of a llama-index ``AgentWorkflow``.

    Each turn writes a reasoning with inline calls, runs them in parallel and answers
    from the filled-in reasoning. The ``handoff`` tool works as a call like any other.
    """

    dialect: Any = Field(default_factory=CoADialect, description="The CoA dialect.")

    @model_validator(mode="after")
    def _never_replan(self) -> CoAAgent:
        # The joiner of CoA only answers, so replans could never happen; 0 says so.
        if self.config.max_replans:
            object.__setattr__(self, "config", self.config.model_copy(update={"max_replans": 0}))
        return self


__all__ = ["CoAAgent"]

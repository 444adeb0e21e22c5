"""Errors raised by llm_compiler.

The tree::

    LLMCompilerError
    ├── ConfigurationError        a developer mistake (bad tool, bad option)
    │   └── LocalModelUnavailable the embedded model's packages or file are missing
    ├── LocalServerError          the embedded model's server exited or never listened
    └── RunError                  a run could not finish
        └── LLMCallError          the planner or joiner LLM call failed

Plan problems (unparseable lines, unknown tools, bad references) and tool failures are
never raised: they become error observations that the joiner reads and can replan on.
"""

from __future__ import annotations


class LLMCompilerError(Exception):
    """Root of every error raised by llm_compiler."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ConfigurationError(LLMCompilerError):
    """The compiler was configured wrongly (for example two tools with one name)."""


class RunError(LLMCompilerError):
    """A run could not finish."""


class LLMCallError(RunError):
    """The planner or joiner LLM call failed; `phase` says which, `round` when."""

    def __init__(self, phase: str, round: int, cause: BaseException) -> None:
        super().__init__(
            f"The {phase} LLM call of round {round} failed: {type(cause).__name__}: {cause}"
        )
        self.phase = phase
        self.round = round
        self.cause = cause


class LocalModelUnavailable(ConfigurationError):
    """The embedded model cannot run: llama-cpp-python, the model package or file is missing."""


class LocalServerError(LLMCompilerError):
    """The llama.cpp server exited or did not become ready; the message has its last output."""

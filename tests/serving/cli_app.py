"""A workflow factory for ``llm-compiler serve --workflow tests.serving.cli_app:make``."""

from __future__ import annotations

from llm_compiler import LLMCompilerWorkflow

from .conftest import Overlap, combine, scripted


def make() -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(tools=[Overlap().fetch, combine], llm=scripted(), timeout=30)


not_a_workflow = 42

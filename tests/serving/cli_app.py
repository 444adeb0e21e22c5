"""A workflow factory for ``llm-compiler serve --workflow tests.serving.cli_app:make``."""

from __future__ import annotations

from llm_compiler import LLMCompilerWorkflow

from .conftest import Overlap, combine, scripted


def make() -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(tools=[Overlap().fetch, combine], llm=scripted(), timeout=30)


not_a_workflow = 42


def with_cleanup() -> LLMCompilerWorkflow:
    """As `make`, and writes ``$CLEANUP_MARK`` when the process exits cleanly."""
    import atexit
    import os
    from pathlib import Path

    mark = Path(os.environ["CLEANUP_MARK"])
    atexit.register(mark.write_text, "cleaned up")
    return make()

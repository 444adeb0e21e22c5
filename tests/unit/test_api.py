"""The public API: a curated, sorted and complete ``__all__``."""

from __future__ import annotations

import llm_compiler


def test_all_is_sorted_and_complete():
    assert llm_compiler.__all__ == sorted(llm_compiler.__all__)
    public = {
        name
        for name, value in vars(llm_compiler).items()
        if not name.startswith("_") and not isinstance(value, type(llm_compiler))
    }
    assert public == set(llm_compiler.__all__)


def test_required_names_are_exported():
    from llm_compiler.events import JoinEvent, PlanEvent, ReplanEvent, TaskReady, TaskResult

    assert llm_compiler.LLMCompilerWorkflow and llm_compiler.LLMCompilerAgent
    assert {PlanEvent, TaskReady, TaskResult, JoinEvent, ReplanEvent} <= {
        getattr(llm_compiler, n) for n in llm_compiler.__all__
    }


def test_moved_modules_keep_their_old_import_paths_for_one_release():
    from llm_compiler import parser, prompts
    from llm_compiler.dialects.llmcompiler import PlanParser
    from llm_compiler.joiner import JoinerInput

    assert parser.PlanParser is PlanParser and prompts.JoinerInput is JoinerInput
    from llm_compiler.local import LocalLLMServer, main
    from llm_compiler.models import LocalLLMServer as Server

    assert LocalLLMServer is Server and callable(main)

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
    from llm_compiler.dialects.thought_action import JoinerInput

    assert parser.PlanParser is PlanParser and prompts.JoinerInput is JoinerInput
    from llm_compiler.local import LocalLLMServer, main
    from llm_compiler.models import LocalLLMServer as Server

    assert LocalLLMServer is Server and callable(main)


def test_every_module_of_the_flat_layout_is_an_alias_of_its_new_home():
    import importlib
    import sys
    import warnings

    from llm_compiler._aliases import MOVED

    for old, new in MOVED.items():
        sys.modules.pop(old, None)  # only the alias entry: the module itself stays
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            module = importlib.import_module(old)
        assert module is importlib.import_module(new), old
        assert module.__spec__.name == new  # the alias does not rename the real module
        assert any(new in str(w.message) for w in caught), old
    from llm_compiler.schema_tools import SchemaTool

    from llm_compiler.tools.schema import SchemaTool as New

    assert SchemaTool is New


def test_the_engine_imports_no_dialect_but_the_default_and_no_server_or_launcher():
    import ast
    from pathlib import Path

    engine = Path(llm_compiler.__file__).parent / "engine"
    allowed = ("llm_compiler.dialects.base", "llm_compiler.dialects.llmcompiler")
    for path in engine.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                mod = node.module
                assert not mod.startswith(("llm_compiler.serving", "llm_compiler.models")), path
                assert not mod.startswith(("llm_compiler.agents", "llm_compiler.compat")), path
                if mod.startswith("llm_compiler.dialects.") and mod not in allowed:
                    # Shared dialect infrastructure (formats, prompts, grammars) is fine.
                    assert mod.split(".")[2] in {
                        "thought_action",
                        "grounding",
                        "prompting",
                        "grammar",
                        "arguments",
                    }, (path, mod)


def test_python_versions_that_cannot_tell_a_cancelled_run_from_a_tool_are_refused():
    # Task.cancelling() (3.11) is how the executor tells a cancelled run apart from a tool
    # raising CancelledError; on 3.10 a cancelled run became an error observation.
    import tomllib
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    meta = tomllib.loads((Path(__file__).parents[2] / "pyproject.toml").read_text())
    allowed = SpecifierSet(meta["project"]["requires-python"])
    assert "3.10" not in allowed and "3.11" in allowed

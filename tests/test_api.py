"""The public API: a curated, sorted and complete ``__all__``."""

from __future__ import annotations

import pytest

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


def test_the_embedded_model_runs_as_python_m_llm_compiler_models():
    import importlib.util

    from llm_compiler.models.cli import main

    spec = importlib.util.find_spec("llm_compiler.models.__main__")
    assert spec is not None and callable(main)


@pytest.mark.parametrize(
    "old",
    ["llm_compiler.workflow", "llm_compiler.coa", "llm_compiler.parser", "llm_compiler.local"],
)
def test_paths_of_the_flat_layout_are_gone(old):
    import importlib

    with pytest.raises(ModuleNotFoundError):
        importlib.import_module(old)


def test_importing_the_package_installs_no_import_hook():
    import sys

    assert not [f for f in sys.meta_path if type(f).__module__.startswith("llm_compiler")]


def test_python_versions_that_cannot_tell_a_cancelled_run_from_a_tool_are_refused():
    # Task.cancelling() (3.11) is how the executor tells a cancelled run apart from a tool
    # raising CancelledError; on 3.10 a cancelled run became an error observation.
    import tomllib
    from pathlib import Path

    from packaging.specifiers import SpecifierSet

    meta = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    allowed = SpecifierSet(meta["project"]["requires-python"])
    assert "3.10" not in allowed and "3.11" in allowed


def test_the_package_calls_no_deprecated_workflow_handler_method():
    # pytest ignores the DeprecationWarnings of handler.done()/cancel() (llama-agents-server
    # calls them); this keeps our own code off them: is_done() and cancel_run() instead.
    import ast
    from pathlib import Path

    deprecated = {"done", "cancel", "exception", "cancelled"}
    found = [
        f"{path.name}:{node.lineno}"
        for path in Path(llm_compiler.__file__).parent.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in deprecated
        and "handler" in ast.unparse(node.func.value).lower()
    ]
    assert not found, found

"""One error tree: every public exception class of the package is an ``LLMCompilerError``."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import llm_compiler
from llm_compiler.errors import LLMCompilerError


def _public_exceptions() -> dict[str, type[BaseException]]:
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(llm_compiler.__path__, "llm_compiler."):
        if ".demo.mcp_server" in info.name or info.name.endswith("__main__"):
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an extra that is not installed here
            continue
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == module.__name__
                and not name.startswith("_")
            ):
                found[f"{module.__name__}.{name}"] = value
    return found


def test_every_public_error_is_under_the_root():
    found = _public_exceptions()
    assert "llm_compiler.tools.mcp.connection.MCPServerError" in found  # the walk sees them
    outside = sorted(name for name, cls in found.items() if not issubclass(cls, LLMCompilerError))
    assert not outside, f"Public errors outside LLMCompilerError: {outside}"


def test_the_tree_drawn_in_the_docstring_names_every_error_of_errors_py():
    import llm_compiler.errors as errors

    for name, cls in vars(errors).items():
        if inspect.isclass(cls) and issubclass(cls, LLMCompilerError):
            assert name in (errors.__doc__ or ""), name

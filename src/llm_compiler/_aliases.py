"""Old module paths of the flat layout, kept working for one release.

``import llm_compiler.workflow`` gives the very module ``llm_compiler.engine.workflow`` (not
a copy, so patching either patches both), with a DeprecationWarning naming the new path.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType

#: Old path -> new path. Remove after the next release.
MOVED = {
    "llm_compiler.workflow": "llm_compiler.engine.workflow",
    "llm_compiler.planner": "llm_compiler.engine.planner",
    "llm_compiler.executor": "llm_compiler.engine.executor",
    "llm_compiler.state": "llm_compiler.engine.state",
    "llm_compiler.summary": "llm_compiler.engine.summary",
    "llm_compiler._scheduler": "llm_compiler.engine.scheduler",
    "llm_compiler._runs": "llm_compiler.engine.runs",
    "llm_compiler._llm": "llm_compiler.engine.llm",
    "llm_compiler.joiner": "llm_compiler.dialects.thought_action",
    "llm_compiler.grammar": "llm_compiler.dialects.grammar",
    "llm_compiler.arguments": "llm_compiler.dialects.arguments",
    "llm_compiler.prompting": "llm_compiler.dialects.prompting",
    "llm_compiler.agent": "llm_compiler.agents.llmcompiler",
    "llm_compiler.coa": "llm_compiler.agents.coa",
    "llm_compiler.llms": "llm_compiler.models.resolve",
    "llm_compiler._llama_server": "llm_compiler.models.llama_server",
    "llm_compiler.mermaid": "llm_compiler.serving.mermaid",
    "llm_compiler.demo_tools": "llm_compiler.demo.tools",
    "llm_compiler.schema_tools": "llm_compiler.tools.schema",
    "llm_compiler._schema": "llm_compiler.tools.spec",
}


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds an old path and loads it as the module at its new path."""

    def __init__(self) -> None:
        self._specs: dict[str, importlib.machinery.ModuleSpec | None] = {}

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in MOVED:
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        new = MOVED[spec.name]
        warnings.warn(
            f"{spec.name} moved to {new}; the old path goes away in the next release.",
            DeprecationWarning,
            stacklevel=2,
        )
        module = importlib.import_module(new)
        self._specs[new] = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system stamped the old path's spec on the module: give its own back.
        module.__spec__ = self._specs[module.__name__]


def install() -> None:
    """Put the finder on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _MovedModules) for f in sys.meta_path):
        sys.meta_path.append(_MovedModules())

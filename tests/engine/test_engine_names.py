"""Names the code's comments and docstrings point to exist, and one name means one function."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import llm_compiler

SRC = Path(llm_compiler.__file__).parent
# A dotted name in a Sphinx role (:func:`~llm_compiler.x.y`) or in backticks.
NAME = re.compile(r"(?::[a-z]+:)?`{1,2}~?(llm_compiler(?:\.[A-Za-z_][A-Za-z0-9_]*)+)`{1,2}")


def resolves(dotted: str) -> bool:
    """Whether `dotted` is a module, or an attribute (path) of one."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attr in parts[cut:]:
                obj = getattr(obj, attr)
        except AttributeError:
            return False
        return True
    return False


def test_every_name_a_comment_points_to_exists():
    missing = sorted(
        f"{path.relative_to(SRC)}: {name}"
        for path in SRC.rglob("*.py")
        for name in NAME.findall(path.read_text())
        if not resolves(name)
    )
    assert missing == []


def test_idempotency_key_is_one_function():
    found = set()
    for info in pkgutil.walk_packages(llm_compiler.__path__, "llm_compiler."):
        if info.name.endswith(".__main__"):  # runs a command when imported
            continue
        try:
            module = importlib.import_module(info.name)
        except ImportError:  # an optional extra that is not installed
            continue
        for name, obj in vars(module).items():
            if name == "idempotency_key" and inspect.isfunction(obj):
                found.add(f"{obj.__module__}.{obj.__qualname__}")
    assert found == {"llm_compiler.tools.calls.idempotency_key"}


def test_compiler_config_keywords_are_split_in_one_place():
    """Every constructor that takes CompilerConfig fields as keywords uses split_config."""
    places = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if "CompilerConfig.model_fields" in path.read_text()
    )
    assert places == ["config.py"]

"""Every error of the project survives pickle (durable runs store failed runs' errors so)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import threading

import pytest

import llm_compiler
from llm_compiler.errors import LLMCallError, LLMCompilerError


def _all_subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub, *_all_subclasses(sub)}
    return found


def _error_classes() -> list[type[LLMCompilerError]]:
    for module in pkgutil.walk_packages(llm_compiler.__path__, "llm_compiler."):
        if ".demo.mcp_server" in module.name or module.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(module.name)
        except ImportError:  # an extra that is not installed here
            continue
    classes = {LLMCompilerError, *_all_subclasses(LLMCompilerError)}
    return sorted(classes, key=lambda c: c.__qualname__)


def _sample(name: str, annotation: object) -> object:
    text = str(annotation)
    if "Exception" in text or name in ("cause", "error"):
        return ValueError("boom")
    if "int" in text or name in ("round", "returncode", "attempt"):
        return 3
    if "float" in text:
        return 1.5
    if "list" in text or "tuple" in text:
        return ["a", "b"]
    if "dict" in text:
        return {"a": 1}
    if "bool" in text:
        return True
    return f"{name}-value"


def _build(cls: type[LLMCompilerError]) -> LLMCompilerError:
    params = list(inspect.signature(cls.__init__).parameters.values())[1:]
    args = [
        _sample(p.name, p.annotation)
        for p in params
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    return cls(*args)


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__qualname__)
def test_every_error_round_trips_through_pickle_with_its_fields(cls):
    error = _build(cls)
    back = pickle.loads(pickle.dumps(error))
    assert type(back) is cls
    assert str(back) == str(error)
    assert back.message == error.message
    assert set(vars(back)) == set(vars(error))
    for name, value in vars(error).items():
        restored = vars(back)[name]
        if isinstance(value, BaseException):
            assert (type(restored), str(restored)) == (type(value), str(value))
        else:
            assert restored == value, name


def test_the_tree_is_walked():
    names = {c.__name__ for c in _error_classes()}
    assert {"LLMCallError", "LocalServerExited", "ConfigurationError"} <= names


def test_a_cause_that_cannot_be_pickled_comes_back_as_its_text():
    class Unpicklable(Exception):
        def __init__(self) -> None:
            super().__init__("socket gone")
            self.lock = threading.Lock()

    error = LLMCallError("planner", 2, Unpicklable())
    back = pickle.loads(pickle.dumps(error))
    assert (back.phase, back.round) == ("planner", 2)
    assert isinstance(back.cause, RuntimeError)
    assert str(back.cause) == "Unpicklable: socket gone"

"""Fixtures for the integration tests."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from .fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started :class:`FakeOpenAI` on 127.0.0.1; closed (stalls released) afterwards."""
    with FakeOpenAI() as fake:
        yield fake


def load_demo_tools() -> ModuleType:
    """``examples/demo_tools.py`` as a module (examples/ is not a package)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "demo_tools.py"
    spec = importlib.util.spec_from_file_location("demo_tools", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def demo_tools() -> ModuleType:
    """The offline demo tools: ``search``, ``lookup``, ``calculator`` (``TOOLS``)."""
    return load_demo_tools()

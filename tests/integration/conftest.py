"""Fixtures for the integration tests."""

from __future__ import annotations

from collections.abc import Iterator
from types import ModuleType

import pytest

from .fake_openai import FakeOpenAI


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A started :class:`FakeOpenAI` on 127.0.0.1; closed (stalls released) afterwards."""
    with FakeOpenAI() as fake:
        yield fake


def load_demo_tools() -> ModuleType:
    """The demo tools module (``llm_compiler.demo.tools``)."""
    from llm_compiler.demo import tools as demo_tools

    return demo_tools


@pytest.fixture(scope="session")
def demo_tools() -> ModuleType:
    """The offline demo tools: ``search``, ``lookup``, ``calculator`` (``TOOLS``)."""
    return load_demo_tools()

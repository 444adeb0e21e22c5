"""Fixtures for the integration tests."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from types import ModuleType
from typing import Any

import pytest

from .fake_openai import FakeOpenAI


@pytest.fixture(autouse=True)
async def _close_openai_clients(monkeypatch) -> AsyncIterator[None]:
    """Close the HTTP pools of the OpenAI clients a test made, on the test's own loop.

    llama-index's ``OpenAI`` keeps its ``AsyncOpenAI`` (an httpx pool) for its lifetime
    and has no ``close()``: left to the garbage collector, the pool's sockets are
    reported unclosed (a ResourceWarning, an error in this suite) after the loop ended.
    """
    from llama_index.llms.openai import base

    made: dict[int, Any] = {}
    original = base.OpenAI._get_aclient

    def tracked(self: Any) -> Any:
        client = original(self)
        made[id(client)] = client
        return client

    monkeypatch.setattr(base.OpenAI, "_get_aclient", tracked)
    yield
    for client in made.values():
        await client.close()


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

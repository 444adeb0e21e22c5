"""Shared fixtures: no test may reach a real LLM by accident."""

from __future__ import annotations

from pathlib import Path

import pytest
from llama_index.core import Settings
from llama_index.core.llms import MockLLM

FIXTURES = Path(__file__).parent / "fixtures"


class _NoLLM(MockLLM):
    """Settings.llm during tests: any call fails loudly."""

    async def acomplete(self, *args, **kwargs):
        raise AssertionError("a test reached Settings.llm; pass llm= explicitly")

    async def astream_complete(self, *args, **kwargs):
        raise AssertionError("a test reached Settings.llm; pass llm= explicitly")


@pytest.fixture(autouse=True)
def _no_default_llm():
    previous = Settings._llm
    Settings.llm = _NoLLM()
    yield
    Settings._llm = previous


@pytest.fixture
def original_plans() -> list[str]:
    """The original LLMCompiler few-shot plans (question line first)."""
    text = (FIXTURES / "llmcompiler_original_plans.txt").read_text()
    return [block.strip() for block in text.split("=====") if block.strip()]

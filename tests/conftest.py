"""Shared fixtures: no test may reach a real LLM by accident; hypothesis profiles.

Profiles: ``ci`` (default: fixed seeds, few examples, fast) and ``fuzz`` (many examples,
random seeds). Choose with ``HYPOTHESIS_PROFILE=fuzz``; ``FUZZ_EXAMPLES`` sets how many
examples each property runs under ``fuzz``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from llama_index.core import Settings
from llama_index.core.llms import MockLLM

FIXTURES = Path(__file__).parent / "fixtures"
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much]

settings.register_profile(
    "ci", derandomize=True, max_examples=30, deadline=None, suppress_health_check=_SLOW_OK
)
settings.register_profile(
    "fuzz",
    max_examples=int(os.environ.get("FUZZ_EXAMPLES", "10000")),
    deadline=None,
    suppress_health_check=_SLOW_OK,
    print_blob=True,
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


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

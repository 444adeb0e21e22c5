"""Leaving llm= out without any configured LLM is a ConfigurationError that says what to pass."""

from __future__ import annotations

import pytest
from llama_index.core import Settings

import llm_compiler
from llm_compiler import ConfigurationError, LLMCompilerWorkflow


def search(query: str) -> str:
    """Look `query` up."""
    return query


def test_no_llm_anywhere_names_resolve_llm_and_hosted_llms(monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", None)
    with pytest.raises(ConfigurationError, match=r"llm=resolve_llm\(\)") as caught:
        LLMCompilerWorkflow(tools=[search])
    assert "from llm_compiler import resolve_llm" in caught.value.message
    assert "OpenAI(" in caught.value.message


def test_settings_llm_is_still_the_default():
    assert LLMCompilerWorkflow(tools=[search]).llm is Settings.llm


def test_resolve_llm_is_public():
    assert llm_compiler.resolve_llm is llm_compiler.models.resolve.resolve_llm
    assert "resolve_llm" in llm_compiler.__all__

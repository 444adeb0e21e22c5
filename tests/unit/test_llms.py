"""resolve_llm: choosing the LLM from the environment."""

from __future__ import annotations

import pytest
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

import llm_compiler.models.gguf as gguf
import llm_compiler.models.resolve as llms
from llm_compiler.errors import ConfigurationError
from llm_compiler.local import LocalModelUnavailable
from llm_compiler.models.resolve import ResolvedLLM, resolve_llm

ENV = ("OPENAI_API_KEY", "LLM_COMPILER_API_BASE", "LLM_COMPILER_MODEL", "LLM_COMPILER_API_KEY",
       "LLM_COMPILER_CHAT")  # fmt: skip


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ENV:
        monkeypatch.delenv(name, raising=False)


def test_openai_key_selects_openai(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("LLM_COMPILER_API_BASE", "http://127.0.0.1:1/v1")  # ignored
    with resolve_llm() as llm:
        assert isinstance(llm, OpenAI) and not isinstance(llm, OpenAILike)
        assert llm.model == "gpt-4o-mini"
    monkeypatch.setenv("LLM_COMPILER_MODEL", "gpt-4o")
    assert resolve_llm().description == "OpenAI gpt-4o"
    assert resolve_llm("gpt-4.1-mini").description == "OpenAI gpt-4.1-mini"


async def test_api_base_selects_an_openai_like_server(monkeypatch):
    monkeypatch.setenv("LLM_COMPILER_API_BASE", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("LLM_COMPILER_MODEL", "qwen2.5")
    resolved = resolve_llm()
    async with resolved as llm:
        assert isinstance(llm, OpenAILike)
        assert (llm.model, llm.api_base, llm.api_key) == (
            "qwen2.5",
            "http://127.0.0.1:1/v1",
            "none",
        )
        assert llm.metadata.is_chat_model is True
    assert resolved.source == "api_base"


def test_api_base_completion_model_and_key(monkeypatch):
    monkeypatch.setenv("LLM_COMPILER_API_BASE", "http://127.0.0.1:1/v1")
    monkeypatch.setenv("LLM_COMPILER_MODEL", "base-model")
    monkeypatch.setenv("LLM_COMPILER_CHAT", "0")
    monkeypatch.setenv("LLM_COMPILER_API_KEY", "secret")
    with resolve_llm() as llm:
        assert llm.metadata.is_chat_model is False
        assert llm.api_key == "secret"


def test_api_base_without_a_model_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("LLM_COMPILER_API_BASE", "http://127.0.0.1:1/v1")
    with pytest.raises(ConfigurationError, match="LLM_COMPILER_MODEL is not"):
        resolve_llm()


def test_nothing_configured_selects_the_embedded_model(monkeypatch):
    monkeypatch.setattr(llms, "check_installed", lambda: None)
    resolved = resolve_llm()
    assert resolved.source == "local"
    assert "gemma-3-270m" in resolved.description


def test_embedded_model_missing_says_how_to_install(monkeypatch):
    monkeypatch.setattr(gguf, "_SERVER_MODULES", ("no_such_module_xyz",))
    with pytest.raises(LocalModelUnavailable, match="make install-local"):
        resolve_llm()


def test_local_source_starts_and_stops_its_server():
    events = []

    class Server:
        base_url = "http://127.0.0.1:5/v1"
        n_ctx = 2048

        def start(self):
            events.append("start")

        def stop(self):
            events.append("stop")

    with ResolvedLLM("local", "test", None, Server()) as llm:  # type: ignore[arg-type]
        assert llm.api_base == "http://127.0.0.1:5/v1"
        events.append("body")
    assert events == ["start", "body", "stop"]

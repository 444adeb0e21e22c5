"""resolve_llm: choosing the LLM from the environment."""

from __future__ import annotations

import pytest
from llama_index.llms.openai import OpenAI
from llama_index.llms.openai_like import OpenAILike

import llm_compiler.models.gguf as gguf
import llm_compiler.models.resolve as llms
from llm_compiler.errors import ConfigurationError
from llm_compiler.models import LocalModelUnavailable
from llm_compiler.models.resolve import resolve_llm

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


class FakeServer:
    """Records starts and stops; listens on a port nothing serves."""

    n_ctx = 2048

    def __init__(self, events: list[str]) -> None:
        self.events, self.running, self.base_url = events, False, ""

    def start(self):
        self.events.append("start")
        self.running, self.base_url = True, f"http://127.0.0.1:{5 + len(self.events)}/v1"

    def stop(self):
        self.events.append("stop")
        self.running = False


def embedded(events: list[str]):
    return llms._classes()["local"](FakeServer(events))


def test_the_embedded_model_is_an_llm_that_starts_its_server_on_first_use(monkeypatch):
    from llama_index.core.llms import LLM

    events: list[str] = []
    llm = embedded(events)
    assert isinstance(llm, LLM) and llm.source == "local" and events == []
    monkeypatch.setattr(OpenAILike, "complete", lambda self, prompt, **kw: self.api_base)
    assert llm.complete("hi") == "http://127.0.0.1:6/v1"  # the started server's address
    assert llm.complete("again") == "http://127.0.0.1:6/v1" and events == ["start"]
    llm.close()
    assert events == ["start", "stop"]


async def test_the_embedded_model_starts_off_the_event_loop(monkeypatch):
    events: list[str] = []
    llm = embedded(events)

    async def fake(self, prompt, **kw):
        return self.api_base

    monkeypatch.setattr(OpenAILike, "acomplete", fake)
    async with llm as same:
        assert same is llm
        assert await llm.acomplete("hi") == "http://127.0.0.1:6/v1"
    assert events == ["start", "stop"]


def test_a_with_block_still_yields_the_llm_and_stops_the_server():
    events: list[str] = []
    with embedded(events) as llm:
        events.append("body")
        assert llm.description.startswith("gemma-3-270m")
    assert events == ["body", "stop"]  # never used: never started


@pytest.mark.parametrize("bad", ["gpt-4o-mini", object(), lambda prompt: prompt])
def test_anything_but_an_llm_is_refused_at_construction_with_a_hint(bad):
    from llm_compiler import LLMCompilerAgent, LLMCompilerWorkflow

    def tool(x: str) -> str:
        return x

    for make in (LLMCompilerWorkflow, LLMCompilerAgent):
        with pytest.raises(ConfigurationError, match=r"llm=resolve_llm\(\)") as info:
            make(tools=[tool], llm=bad)
        assert "must be a llama-index LLM" in str(info.value)


def test_the_earlier_resolved_llm_still_starts_and_stops_its_server():
    events: list[str] = []
    server = FakeServer(events)
    server.start = lambda: (events.append("start"), server)[1]  # type: ignore[method-assign]
    server.base_url = "http://127.0.0.1:5/v1"
    with llms.ResolvedLLM("local", "test", None, server) as llm:  # type: ignore[arg-type]
        assert llm.api_base == "http://127.0.0.1:5/v1"
        events.append("body")
    assert events == ["start", "body", "stop"]


def test_clients_without_a_server_share_the_processs_one_until_the_last_closes(monkeypatch):
    """A new client (a new workflow's, a request handler's) talks to the server an earlier
    one started, so llama.cpp's prompt cache serves it; it stops with the last close."""
    events: list[str] = []
    shared = llms._SharedServer()
    shared._server = FakeServer(events)  # type: ignore[assignment]
    monkeypatch.setattr(llms, "_SHARED", shared)
    monkeypatch.setattr(OpenAILike, "complete", lambda self, prompt, **kw: self.api_base)
    first, second = llms.embedded_llm(), llms.embedded_llm()
    assert first.server is second.server
    assert first.complete("a") == second.complete("b") == "http://127.0.0.1:6/v1"
    assert events == ["start"]  # started once, for both
    first.close()
    assert events == ["start"]  # the second still uses it
    assert second.complete("c") == "http://127.0.0.1:6/v1"
    second.close()
    assert events == ["start", "stop"]
    assert first.complete("again") and events == ["start", "stop", "start"]  # used again
    first.close()
    assert events[-1] == "stop"


def test_the_embedded_models_requests_carry_its_sampling_under_a_calls_own_extras():
    """llama-cpp-python's server penalizes repeats (1.1 over 64 tokens) unless a request
    says otherwise; the embedded client says so in every request's body."""
    with llms.embedded_llm() as llm:
        fields = llm._get_model_kwargs(extra_body={"grammar": "root ::= x"})
        assert fields["extra_body"] == {**llms.EMBEDDED_SAMPLING, "grammar": "root ::= x"}
        assert fields["temperature"] == 0.0
    with llms.embedded_llm(sampling={"repeat_penalty": 1.3}) as tuned:
        assert tuned._get_model_kwargs()["extra_body"] == {"repeat_penalty": 1.3}

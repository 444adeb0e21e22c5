"""Constrained decoding wherever the server takes it: declared, detected, sent as it takes it."""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar

import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.grammar import json_plan_schema
from llm_compiler.dialects.json_plan import JsonPlanDialect
from llm_compiler.errors import ConfigurationError
from llm_compiler.models import cli
from llm_compiler.models.resolve import resolve_llm
from llm_compiler.testing import ScriptedLLM


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in ("OPENAI_API_KEY", "LLM_COMPILER_API_BASE", "LLM_COMPILER_MODEL",
                 "LLM_COMPILER_CHAT", "LLM_COMPILER_DECODING"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _models_server(owner: str) -> Iterator[str]:
    """A loopback server whose ``/v1/models`` names `owner` as the models' owner."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            body = json.dumps({"object": "list", "data": [{"id": "m", "owned_by": owner}]})
            self.send_response(200 if self.path == "/v1/models" else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body.encode())

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_the_serve_llm_export_line_keeps_grammars_on(env, monkeypatch, capsys):
    class Served:
        base_url = "http://127.0.0.1:9/v1"  # nothing listens: nothing to detect

        def __init__(self, **kwargs: Any) -> None:
            pass

        def __enter__(self) -> Served:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def wait(self) -> int:
            return 0

    monkeypatch.setattr(cli, "LocalLLMServer", Served)
    assert cli.main(["--quiet"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("export "))
    for assignment in shlex.split(line)[1:]:
        name, value = assignment.split("=", 1)
        env.setenv(name, value)
    llm = resolve_llm()
    assert getattr(llm, "llm_compiler_constrained", False)
    wf = LLMCompilerWorkflow(tools=[json_plan_schema], llm=llm)
    assert wf._constrained()


@pytest.mark.parametrize(
    ("owner", "grammars"), [("me", True), ("llamacpp", True), ("vllm", False), ("acme", False)]
)
def test_a_llama_cpp_server_is_detected_once(env, owner, grammars):
    for base in _models_server(owner):
        env.setenv("LLM_COMPILER_API_BASE", base)
        env.setenv("LLM_COMPILER_MODEL", "m")
        llm = resolve_llm()
    assert bool(getattr(llm, "llm_compiler_constrained", False)) is grammars
    text_plans = LLMCompilerWorkflow(tools=[json_plan_schema], llm=llm)
    json_plans = LLMCompilerWorkflow(tools=[json_plan_schema], llm=llm, dialect=JsonPlanDialect())
    assert text_plans._constrained() is grammars
    assert json_plans._constrained() is (owner in ("me", "llamacpp", "vllm"))


def test_a_declared_decoding_wins_and_a_wrong_one_is_named(env):
    env.setenv("LLM_COMPILER_API_BASE", "http://127.0.0.1:9/v1")
    env.setenv("LLM_COMPILER_MODEL", "m")
    env.setenv("LLM_COMPILER_DECODING", "json_schema")
    assert "decoding json_schema" in resolve_llm().description
    env.setenv("LLM_COMPILER_DECODING", "gbnf")
    with pytest.raises(ConfigurationError, match="LLM_COMPILER_DECODING"):
        resolve_llm()


class StructuredOutputs(ScriptedLLM):
    """A server with OpenAI-style structured outputs and no grammars."""

    llm_compiler_decoding: ClassVar[str] = "json_schema"


def lookup(name: str, unit: str | None = None) -> str:
    """Look a name up."""
    return f"<{name}>"


async def test_structured_output_servers_get_the_plan_schema_and_never_a_grammar():
    plan = {
        "thought": "t",
        "tasks": [{"id": 1, "tool": "lookup", "args": {"name": "a", "unit": None}}],
    }
    llm = StructuredOutputs([json.dumps(plan), "Thought: ok.\nAction: Finish(<a>)"])
    wf = LLMCompilerWorkflow(tools=[lookup], llm=llm, dialect=JsonPlanDialect())
    assert str(await wf.run(user_msg="a?")) == "<a>"
    fmt = llm.calls[0].kwargs["extra_body"]["response_format"]
    assert fmt["json_schema"]["strict"] is True
    assert fmt["json_schema"]["schema"] == json_plan_schema([lookup])
    assert all("grammar" not in c.kwargs.get("extra_body", {}) for c in llm.calls)

    text = StructuredOutputs(
        ['1. lookup("a")\n2. join()\n<END_OF_PLAN>', "Thought: ok.\nAction: Finish(<a>)"]
    )
    wf = LLMCompilerWorkflow(tools=[lookup], llm=text, dialect=LLMCompilerDialect(joiner="text"))
    await wf.run(user_msg="a?")
    assert all("grammar" not in c.kwargs.get("extra_body", {}) for c in text.calls)

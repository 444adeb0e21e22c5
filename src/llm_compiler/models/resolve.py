"""Pick the LLM from the environment: ``llm = resolve_llm()``.

In order of precedence:

1. ``OPENAI_API_KEY`` set: OpenAI, model ``model`` or ``LLM_COMPILER_MODEL`` or
   ``gpt-4o-mini``.
2. ``LLM_COMPILER_API_BASE`` set: any OpenAI-compatible server (vLLM, llama.cpp, Ollama,
   ...), with ``LLM_COMPILER_MODEL`` (required), ``LLM_COMPILER_API_KEY`` (default
   ``none``) and ``LLM_COMPILER_CHAT=0`` for a completion-only model (default: chat).
   The constrained decoding it takes (``LLM_COMPILER_DECODING``: ``grammar``,
   ``json_schema`` or ``off``) is declared, or else detected once here from the
   server's model list: llama.cpp's servers take grammars, vLLM structured outputs.
3. Neither: the embedded Gemma 3 270M (needs ``make install-local``). Its llama.cpp
   server starts on the first request and stops at interpreter exit, or earlier with
   ``llm.close()`` / ``await llm.aclose()`` or at the end of a ``with`` block.

Example::

    llm = resolve_llm()
    workflow = LLMCompilerWorkflow(tools=[...], llm=llm)

Every returned LLM is also a context manager (``with`` or ``async with``) that yields
itself and stops the embedded server on exit, as earlier releases' ``ResolvedLLM`` did,
and has ``source`` (``"openai"``, ``"api_base"`` or ``"local"``) and ``description``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import threading
import weakref
from types import TracebackType
from typing import Any, ClassVar, Self

from llama_index.core.llms import LLM
from pydantic import Field, PrivateAttr

from llm_compiler.decoding import DECODINGS, Decoding
from llm_compiler.errors import ConfigurationError, LocalServerExited
from llm_compiler.models.gguf import MODEL_NAME, check_installed
from llm_compiler.models.server import (
    _EXIT_GRACE,
    LocalLLMServer,
    _embedded_class,
    local_llm,
    local_llm_options,
)

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"
#: The embedded model's sampling settings, sent with every request (llama.cpp's server
#: takes them per request); temperature 0 (greedy) is a client setting. Chosen by
#: measurement (``docs/models.md``): without a repeat penalty the model writes one plan
#: line again and again.
EMBEDDED_SAMPLING: dict[str, Any] = {"repeat_penalty": 1.1}
logger = logging.getLogger(__name__)


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


class Resolved(LLM):
    """An LLM from :func:`resolve_llm`: a llama-index LLM that also says where it runs
    and has a lifetime (abstract: the concrete classes also derive from a real client)."""

    source: ClassVar[str] = ""

    @property
    def description(self) -> str:
        """A short human-readable name of the model and where it runs."""
        return type(self).__name__

    def close(self) -> None:
        """Release what the model holds (the embedded server); it restarts on next use."""

    async def aclose(self) -> None:
        """:meth:`close` without blocking the event loop (remote models hold nothing)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


@functools.cache
def _classes() -> dict[str, type[Any]]:
    """The three LLM classes (imported late: llama-index's OpenAI package is slow to load)."""
    from llama_index.llms.openai import OpenAI
    from llama_index.llms.openai_like import OpenAILike

    class ResolvedOpenAI(Resolved, OpenAI):
        source: ClassVar[str] = "openai"
        llm_compiler_decoding: Decoding = "json_schema"

        @property
        def description(self) -> str:
            return f"OpenAI {self.model}"

    class ResolvedOpenAILike(Resolved, OpenAILike):  # type: ignore[misc]
        source: ClassVar[str] = "api_base"
        llm_compiler_decoding: Decoding = "off"

        @property
        def llm_compiler_constrained(self) -> bool:
            """Whether the server takes grammars (the planner then warms its prompt)."""
            return self.llm_compiler_decoding == "grammar"

        @property
        def description(self) -> str:
            kind = "chat" if self.is_chat_model else "completion"
            return (
                f"{self.model} ({kind}, decoding {self.llm_compiler_decoding}) at {self.api_base}"
            )

    return {
        "openai": ResolvedOpenAI,
        "api_base": ResolvedOpenAILike,
        "local": _lazy_embedded_class(),
    }


def dead_server_error(server: LocalLLMServer, error: Exception) -> LocalServerExited | None:
    """The error naming `server`'s death when `error` came from it dying (blocks briefly).

    A dropped or refused connection waits a moment for the process to be seen gone;
    other errors only look whether it is already gone.
    """
    grace = _EXIT_GRACE if _is_transport_error(error) else 0.0
    code = server.exited(grace)
    return None if code is None else server.exited_error(code)


def _is_transport_error(error: BaseException) -> bool:
    import httpx
    import openai

    return isinstance(error, httpx.TransportError | openai.APIConnectionError)


def _lazy_embedded_class() -> type[Any]:  # noqa: C901 - one short override per LLM entry point
    class LazyEmbeddedLLM(Resolved, _embedded_class()):  # type: ignore[misc]
        """The embedded model; its server starts on the first request."""

        source: ClassVar[str] = "local"
        sampling: dict[str, Any] = Field(
            default_factory=lambda: dict(EMBEDDED_SAMPLING),
            description="Sampling settings sent with every request (repeat_penalty, ...).",
        )
        _server: LocalLLMServer = PrivateAttr()
        _lock: threading.Lock = PrivateAttr()
        _shared: _SharedServer | None = PrivateAttr(default=None)

        def __init__(
            self, server: LocalLLMServer, shared: _SharedServer | None = None, **kwargs: Any
        ) -> None:
            super().__init__(**local_llm_options("http://127.0.0.1:0/v1", server.n_ctx, kwargs))
            self._server, self._shared = server, shared
            self._lock = _start_lock(server)  # one per server: clients sharing it start it once

        @property
        def description(self) -> str:
            return f"{MODEL_NAME} (embedded, llama.cpp on 127.0.0.1)"

        @property
        def server(self) -> LocalLLMServer:
            """The llama.cpp server this model talks to (started on first use)."""
            return self._server

        def ensure_started(self) -> None:
            """Start the server unless it runs (blocks until it listens)."""
            with self._lock:
                if self._shared is not None:
                    self._shared.use(self)
                if not self._server.running:
                    self._server.start()
                if getattr(self, "api_base", None) != self._server.base_url:
                    self.api_base = self._server.base_url
                    self._client = self._aclient = None  # clients of an earlier server

        def close(self) -> None:
            """Stop the server (a shared one once no open client of it is left)."""
            with self._lock:
                if self._shared is None or self._shared.release(self):
                    self._server.stop()

        async def aclose(self) -> None:
            if self._server.running:  # stopping waits for the process: not on the loop
                await asyncio.to_thread(self.close)
            elif self._shared is not None:
                self._shared.release(self)  # nothing to stop: only counted closed

        def died(self, error: Exception) -> LocalServerExited | None:
            """The server's death behind `error`, if the server died on its own."""
            return dead_server_error(self._server, error)

        def _get_model_kwargs(self, **kwargs: Any) -> dict[str, Any]:
            """The request's fields, with :attr:`sampling` in its body (under a call's
            own extras, such as its grammar)."""
            out: dict[str, Any] = super()._get_model_kwargs(**kwargs)
            out["extra_body"] = {**self.sampling, **(out.get("extra_body") or {})}
            return out

        def chat(self, *args: Any, **kwargs: Any) -> Any:
            return self._sync(super().chat, args, kwargs)  # type: ignore[safe-super]

        def stream_chat(self, *args: Any, **kwargs: Any) -> Any:
            stream = self._sync(super().stream_chat, args, kwargs)  # type: ignore[safe-super]
            return self._sync_stream(stream)

        def complete(self, *args: Any, **kwargs: Any) -> Any:
            return self._sync(super().complete, args, kwargs)  # type: ignore[safe-super]

        def stream_complete(self, *args: Any, **kwargs: Any) -> Any:
            stream = self._sync(super().stream_complete, args, kwargs)  # type: ignore[safe-super]
            return self._sync_stream(stream)

        async def achat(self, *args: Any, **kwargs: Any) -> Any:
            return await self._async(super().achat, args, kwargs)  # type: ignore[safe-super]

        async def astream_chat(self, *args: Any, **kwargs: Any) -> Any:
            stream = await self._async(super().astream_chat, args, kwargs)  # type: ignore[safe-super]
            return self._async_stream(stream)

        async def acomplete(self, *args: Any, **kwargs: Any) -> Any:
            return await self._async(super().acomplete, args, kwargs)  # type: ignore[safe-super]

        async def astream_complete(self, *args: Any, **kwargs: Any) -> Any:
            call = super().astream_complete  # type: ignore[safe-super]
            return self._async_stream(await self._async(call, args, kwargs))

        def _sync(self, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            self.ensure_started()
            try:
                return call(*args, **kwargs)
            except Exception as e:
                raise (self.died(e) or e) from e

        def _sync_stream(self, stream: Any) -> Any:
            try:
                yield from stream
            except Exception as e:
                raise (self.died(e) or e) from e

        async def _async(self, call: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            await asyncio.to_thread(self.ensure_started)
            try:
                return await call(*args, **kwargs)
            except Exception as e:
                raise (await asyncio.to_thread(self.died, e) or e) from e

        async def _async_stream(self, stream: Any) -> Any:
            try:
                async for item in stream:
                    yield item
            except Exception as e:
                raise (await asyncio.to_thread(self.died, e) or e) from e

    return LazyEmbeddedLLM


def resolve_llm(model: str | None = None) -> Resolved:
    """The LLM the environment configures (see the module docstring).

    Args:
        model: Overrides ``LLM_COMPILER_MODEL`` for OpenAI and API-base servers; the
            embedded model has one name and ignores it.

    Raises:
        ConfigurationError: ``LLM_COMPILER_API_BASE`` is set without a model name.
        LocalModelUnavailable: No remote model is configured and the embedded one is not
            installed (raised here, not at the first request).
    """
    classes = _classes()
    declared = declared_decoding()
    if _env("OPENAI_API_KEY"):
        name = model or _env("LLM_COMPILER_MODEL") or DEFAULT_OPENAI_MODEL
        kind = {} if declared is None else {"llm_compiler_decoding": declared}
        return classes["openai"](model=name, **kind)  # type: ignore[no-any-return]
    if api_base := _env("LLM_COMPILER_API_BASE"):
        api_model = model or _env("LLM_COMPILER_MODEL")
        if not api_model:
            raise ConfigurationError(
                f"LLM_COMPILER_API_BASE is set ({api_base}) but LLM_COMPILER_MODEL is not: "
                "set it to the model name the server expects."
            )
        return classes["api_base"](  # type: ignore[no-any-return]
            model=api_model,
            api_base=api_base,
            api_key=_env("LLM_COMPILER_API_KEY") or "none",
            is_chat_model=os.environ.get("LLM_COMPILER_CHAT", "1") != "0",
            llm_compiler_decoding=declared or detect_decoding(api_base),
        )
    check_installed()
    return embedded_llm()


def declared_decoding() -> Decoding | None:
    """``LLM_COMPILER_DECODING``, if set to other than ``auto``.

    Raises:
        ConfigurationError: It names no kind of decoding.
    """
    value = (_env("LLM_COMPILER_DECODING") or "auto").strip().lower()
    if value == "auto":
        return None
    if value not in DECODINGS:
        raise ConfigurationError(
            f"LLM_COMPILER_DECODING={value!r}: use one of auto, {', '.join(DECODINGS)}."
        )
    return value


#: What the ``owned_by`` of a server's model list says it takes.
_OWNERS: dict[str, Decoding] = {"llamacpp": "grammar", "me": "grammar", "vllm": "json_schema"}


def detect_decoding(api_base: str, timeout: float = 3.0) -> Decoding:
    """The constrained decoding an OpenAI-compatible server takes, read once from its
    model list (``GET /models``): llama.cpp's server (``owned_by`` ``llamacpp``) and
    llama-cpp-python's (``me``) take grammars, vLLM (``vllm``) JSON schemas; anything
    else, or no answer within `timeout` seconds, is ``off``."""
    import httpx

    try:
        reply = httpx.get(f"{api_base.rstrip('/')}/models", timeout=timeout)
        models = reply.json().get("data") or []
        owners = {str(m.get("owned_by", "")).lower() for m in models if isinstance(m, dict)}
    except (httpx.HTTPError, ValueError, AttributeError) as e:
        logger.debug("No decoding detected at %s: %s", api_base, e)
        return "off"
    found = [_OWNERS[o] for o in sorted(owners) if o in _OWNERS]
    return found[0] if found else "off"


def embedded_llm(server: LocalLLMServer | None = None, **kwargs: Any) -> Resolved:
    """The embedded model on `server`, started on first use.

    Without `server`, every client of the process shares one default server, so a new
    workflow (or a new client, as a request handler or a script's function makes one)
    finds the planner's prompt that an earlier one left evaluated in llama.cpp's cache;
    ``close()`` stops it when no open client of it is left. A server that dies is named
    in the error of the call it broke (:class:`~llm_compiler.errors.LocalServerExited`),
    and the next call starts a fresh one. `kwargs` override the client settings (see
    ``local_llm_options``).
    """
    local = _classes()["local"]
    if server is not None:
        return local(server, **kwargs)  # type: ignore[no-any-return]
    client = local(_SHARED.server, _SHARED, **kwargs)
    _SHARED.use(client)
    return client  # type: ignore[no-any-return]


class _SharedServer:
    """The process's default embedded server and its open clients (by id)."""

    def __init__(self) -> None:
        self._server: LocalLLMServer | None = None
        self._open: set[int] = set()
        self._lock = threading.Lock()

    @property
    def server(self) -> LocalLLMServer:
        with self._lock:
            if self._server is None:
                self._server = LocalLLMServer()
            return self._server

    def use(self, client: object) -> None:
        """Count `client` as open (again, if it was closed and is used now)."""
        with self._lock:
            self._open.add(id(client))

    def release(self, client: object) -> bool:
        """Count `client` as closed; whether no open client is left."""
        with self._lock:
            self._open.discard(id(client))
            return not self._open


_SHARED = _SharedServer()
_START_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_START_LOCKS_GUARD = threading.Lock()


def _start_lock(server: Any) -> threading.Lock:
    """The lock under which clients of `server` start and stop it."""
    with _START_LOCKS_GUARD:
        return _START_LOCKS.setdefault(server, threading.Lock())


class ResolvedLLM:
    """Earlier releases' result of :func:`resolve_llm`, kept for one release: a context
    manager (sync or async) that yields `llm`, or the LLM of `server` while it runs."""

    def __init__(
        self, source: str, description: str, llm: LLM | None, server: LocalLLMServer | None
    ) -> None:
        self.source, self.description = source, description
        self._llm, self._server = llm, server

    def __enter__(self) -> LLM:
        if self._server is None:
            assert self._llm is not None
            return self._llm
        return local_llm(self._server.start())

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.stop()

    async def __aenter__(self) -> LLM:
        if self._server is None:
            return self.__enter__()
        return local_llm(await self._server.__aenter__())

    async def __aexit__(self, *exc: object) -> None:
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)

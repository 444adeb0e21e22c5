"""Pick the LLM from the environment.

In order of precedence:

1. ``OPENAI_API_KEY`` set: OpenAI, model ``model`` or ``LLM_COMPILER_MODEL`` or
   ``gpt-4o-mini``.
2. ``LLM_COMPILER_API_BASE`` set: any OpenAI-compatible server (vLLM, llama.cpp, Ollama,
   ...), with ``LLM_COMPILER_MODEL`` (required), ``LLM_COMPILER_API_KEY`` (default
   ``none``) and ``LLM_COMPILER_CHAT=0`` for a completion-only model (default: chat).
3. Neither: the embedded Gemma 3 270M, served by llama.cpp on 127.0.0.1 while the
   context is open (needs ``make install-local``).

Example::

    with resolve_llm() as llm:          # or: async with resolve_llm() as llm:
        workflow = LLMCompilerWorkflow(tools=[...], llm=llm)
"""

from __future__ import annotations

import asyncio
import os
from types import TracebackType
from typing import TYPE_CHECKING

from llm_compiler.errors import ConfigurationError
from llm_compiler.models import MODEL_NAME, LocalLLMServer, check_installed, local_llm

if TYPE_CHECKING:
    from llama_index.core.llms import LLM

DEFAULT_OPENAI_MODEL = "gpt-4o-mini"


def _env(name: str) -> str | None:
    return os.environ.get(name) or None


class ResolvedLLM:
    """The configured LLM; a context manager (sync or async) that yields it.

    For the embedded model, entering starts the llama.cpp server and exiting stops it;
    for remote models both are no-ops.

    Attributes:
        source: ``"openai"``, ``"api_base"`` or ``"local"``.
        description: A short human-readable name of the model and where it runs.
    """

    def __init__(
        self, source: str, description: str, llm: LLM | None, server: LocalLLMServer | None
    ) -> None:
        self.source = source
        self.description = description
        self._llm = llm
        self._server = server

    def __enter__(self) -> LLM:
        if self._server is None:
            assert self._llm is not None
            return self._llm
        self._server.start()
        return local_llm(self._server)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.stop()

    async def __aenter__(self) -> LLM:
        if self._server is None:
            return self.__enter__()
        await self._server.__aenter__()
        return local_llm(self._server)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._server is not None:
            await asyncio.to_thread(self._server.stop)


def resolve_llm(model: str | None = None) -> ResolvedLLM:
    """Choose the LLM from the environment (see the module docstring).

    Args:
        model: Overrides ``LLM_COMPILER_MODEL`` for OpenAI and API-base servers; the
            embedded model has one name and ignores it.

    Raises:
        ConfigurationError: ``LLM_COMPILER_API_BASE`` is set without a model name.
        LocalModelUnavailable: No remote model is configured and the embedded one is not
            installed.
    """
    if _env("OPENAI_API_KEY"):
        from llama_index.llms.openai import OpenAI

        name = model or _env("LLM_COMPILER_MODEL") or DEFAULT_OPENAI_MODEL
        return ResolvedLLM("openai", f"OpenAI {name}", OpenAI(model=name), None)
    if api_base := _env("LLM_COMPILER_API_BASE"):
        from llama_index.llms.openai_like import OpenAILike

        api_model = model or _env("LLM_COMPILER_MODEL")
        if not api_model:
            raise ConfigurationError(
                f"LLM_COMPILER_API_BASE is set ({api_base}) but LLM_COMPILER_MODEL is not: "
                "set it to the model name the server expects."
            )
        chat = os.environ.get("LLM_COMPILER_CHAT", "1") != "0"
        llm = OpenAILike(
            model=api_model,
            api_base=api_base,
            api_key=_env("LLM_COMPILER_API_KEY") or "none",
            is_chat_model=chat,
        )
        kind = "chat" if chat else "completion"
        return ResolvedLLM("api_base", f"{api_model} ({kind}) at {api_base}", llm, None)
    check_installed()
    description = f"{MODEL_NAME} (embedded, llama.cpp on 127.0.0.1)"
    return ResolvedLLM("local", description, None, LocalLLMServer())

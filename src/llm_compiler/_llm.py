"""One streaming text interface over llama-index chat and completion models."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Sequence
from typing import Any

from llama_index.core.llms import LLM, ChatMessage


def is_chat(llm: LLM) -> bool:
    """Whether to talk to `llm` with messages (else with one completion prompt)."""
    try:
        return bool(llm.metadata.is_chat_model)
    except Exception:  # a metadata lookup that fails (unknown model names) means chat
        return True


#: Completion endpoints (OpenAI's, llama.cpp's) stop after 16 tokens unless told otherwise.
COMPLETION_MAX_TOKENS = 2048


def _request_kwargs(llm: LLM, stop: Sequence[str], completion: bool) -> dict[str, Any]:
    """Extra request fields for OpenAI-protocol clients (others get none; we cut client-side)."""
    # An OpenAI instance means its module is loaded: look it up rather than import it (1 s).
    module = sys.modules.get("llama_index.llms.openai")
    openai_cls = getattr(module, "OpenAI", None)
    if openai_cls is None or not isinstance(llm, openai_cls):
        return {}
    kwargs: dict[str, Any] = {"stop": list(stop)[:4]} if stop else {}
    if completion and getattr(llm, "max_tokens", None) is None:
        kwargs["max_tokens"] = COMPLETION_MAX_TOKENS
    return kwargs


async def stream_text(
    llm: LLM,
    *,
    messages: Sequence[ChatMessage] | None = None,
    prompt: str | None = None,
    stop: Sequence[str] = (),
) -> AsyncIterator[str]:
    """Yield text deltas of one LLM call (chat if `messages`, else completion of `prompt`).

    Falls back to the non-streaming API when the model cannot stream.
    """
    kwargs = _request_kwargs(llm, stop, completion=messages is None)
    if messages is not None:
        try:
            gen = await llm.astream_chat(list(messages), **kwargs)
        except NotImplementedError:
            response = await llm.achat(list(messages), **kwargs)
            yield response.message.content or ""
            return
        text = ""
        async for chunk in gen:
            delta = chunk.delta
            if delta is None:  # some models send the text so far, some only the new piece
                content = chunk.message.content or ""
                delta = content[len(text) :] if content.startswith(text) else content
            text += delta
            if delta:
                yield delta
        return
    assert prompt is not None
    try:
        cgen = await llm.astream_complete(prompt, formatted=True, **kwargs)
    except NotImplementedError:
        completion = await llm.acomplete(prompt, formatted=True, **kwargs)
        yield completion.text
        return
    async for piece in cgen:
        if piece.delta is not None:
            yield piece.delta

"""Latency-modelled scripted LLMs: a text LLM (planner, joiner, ReAct) and a tool-calling one.

Both time a reply the same way: token ``i`` (0-based, :func:`llm_compiler.testing.split_tokens`
tokens) arrives ``ttft + i / tokens_per_second`` seconds after the call. Sleeps target
absolute deadlines from the call's start, so scheduling delays do not accumulate. A
non-streamed reply returns when its last token would have arrived.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import AsyncGenerator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    MessageRole,
    TextBlock,
    ToolCallBlock,
)
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import BaseTool
from pydantic import PrivateAttr

from llm_compiler.testing import LLMCall, Script, ScriptedLLM, split_tokens


@dataclass(frozen=True)
class LatencyModel:
    """How fast a model answers: time to first token and decode speed."""

    name: str
    ttft: float
    """Seconds from the request to the first token."""
    tokens_per_second: float
    """Decode speed after the first token (``math.inf``: instant)."""

    def token_at(self, index: int) -> float:
        """Seconds from the request until token `index` (0-based) has arrived."""
        if math.isinf(self.tokens_per_second):
            return self.ttft
        return self.ttft + max(0, index) / self.tokens_per_second

    def duration(self, text: str) -> float:
        """Seconds a whole reply takes (until its last token)."""
        return self.token_at(len(split_tokens(text)) - 1)

    def describe(self) -> str:
        """``ttft 0.30 s, 40 tok/s`` style text."""
        tps = "inf" if math.isinf(self.tokens_per_second) else f"{self.tokens_per_second:g}"
        return f"{self.name}: ttft {self.ttft:g} s, {tps} tok/s"


INSTANT = LatencyModel("instant", 0.0, math.inf)
CLOUD = LatencyModel("cloud", 0.3, 40.0)
LOCAL_SLOW = LatencyModel("local-slow", 0.5, 10.0)


@dataclass
class CallRecord:
    """One LLM call: token counts and ``time.time()`` stamps."""

    prompt: str
    prompt_tokens: int
    completion_tokens: int
    started: float
    first_token: float = 0.0
    last_token: float = 0.0


@dataclass
class _Stream:
    record: CallRecord
    start: float  # perf_counter at the request
    tokens: int = 0


_STREAM: ContextVar[_Stream | None] = ContextVar("benchmark_llm_stream", default=None)


async def _sleep_until(deadline: float) -> None:
    # Always yields once, like a network read, even when the deadline has passed.
    await asyncio.sleep(max(0.0, deadline - time.perf_counter()))


class _Timed:
    """What both latency-modelled LLMs expose (their fields live on each pydantic model)."""

    ttft: float
    tokens_per_second: float
    _records: list[CallRecord]

    @property
    def model(self) -> LatencyModel:
        """The latency model."""
        return LatencyModel("llm", self.ttft, self.tokens_per_second)

    @property
    def records(self) -> list[CallRecord]:
        """One record per call, in order."""
        return self._records


class LatencyLLM(_Timed, ScriptedLLM):
    """A :class:`ScriptedLLM` whose replies take the time a :class:`LatencyModel` says.

    Each call's timing state lives in a context variable of the calling task, so
    concurrent runs sharing one instance are timed independently. ``records`` holds one
    :class:`CallRecord` per call.
    """

    ttft: float = 0.0
    tokens_per_second: float = math.inf
    _records: list[CallRecord] = PrivateAttr(default_factory=list)

    def __init__(self, script: Script, model: LatencyModel, **kwargs: Any) -> None:
        super().__init__(
            script, ttft=model.ttft, tokens_per_second=model.tokens_per_second, **kwargs
        )

    @classmethod
    def class_name(cls) -> str:
        return "LatencyLLM"

    def _reply(self, call: LLMCall) -> str:
        text = super()._reply(call)
        record = CallRecord(
            prompt=call.prompt,
            prompt_tokens=len(split_tokens(call.prompt)),
            completion_tokens=len(split_tokens(text)),
            started=time.time(),
        )
        self._records.append(record)
        _STREAM.set(_Stream(record, time.perf_counter()))
        return text

    async def on_chunk(self, index: int, chunk: str) -> None:
        """Wait until the chunk's last token is due."""
        st = _STREAM.get()
        assert st is not None, "on_chunk outside a call"
        st.tokens += len(split_tokens(chunk))
        await _sleep_until(st.start + self.model.token_at(st.tokens - 1))
        now = time.time()
        if index == 0:
            st.record.first_token = now
        st.record.last_token = now

    async def on_reply(self, text: str) -> None:
        """Wait until the whole reply is due."""
        st = _STREAM.get()
        assert st is not None, "on_reply outside a call"
        await _sleep_until(st.start + self.model.duration(text))
        st.record.first_token = st.record.last_token = time.time()


@dataclass(frozen=True)
class FCReply:
    """One scripted reply of the tool-calling LLM: text and/or parallel tool calls."""

    text: str = ""
    calls: tuple[tuple[str, dict[str, Any]], ...] = ()
    """``(tool name, keyword arguments)`` per call, all in this one reply."""

    def call_text(self) -> str:
        """How the calls are counted as completion tokens: one JSON call per line."""
        return "\n".join(f"{name}({json.dumps(kwargs)})" for name, kwargs in self.calls)

    def tokens(self) -> list[str]:
        """The reply's tokens: the text, then the calls."""
        return split_tokens(self.text) + split_tokens(self.call_text())


def _render_messages(messages: Sequence[ChatMessage]) -> str:
    parts: list[str] = []
    for m in messages:
        for block in m.blocks:
            if isinstance(block, TextBlock):
                parts.append(block.text)
            elif isinstance(block, ToolCallBlock):
                parts.append(f"{block.tool_name}({json.dumps(block.tool_kwargs)})")
    return "\n".join(parts)


def _render_tools(tools: Sequence[BaseTool]) -> str:
    return "\n".join(json.dumps(t.metadata.to_openai_tool()) for t in tools)


class LatencyFunctionLLM(_Timed, MockFunctionCallingLLM):
    """A function-calling LLM (for ``FunctionAgent``) replaying :class:`FCReply` items.

    Streams the reply's text tokens as deltas and its tool-call tokens as empty deltas
    (as OpenAI streams arguments), with the same timing as :class:`LatencyLLM`; the last
    chunk carries every ``ToolCallBlock``. Prompt tokens count the messages and the tool
    schemas the request carries.
    """

    ttft: float = 0.0
    tokens_per_second: float = math.inf
    _script: list[FCReply] = PrivateAttr(default_factory=list)
    _next: int = PrivateAttr(default=0)
    _records: list[CallRecord] = PrivateAttr(default_factory=list)

    def __init__(self, script: Sequence[FCReply], model: LatencyModel) -> None:
        super().__init__(is_chat_model=True)
        self.ttft, self.tokens_per_second = model.ttft, model.tokens_per_second
        self._script = list(script)

    @classmethod
    def class_name(cls) -> str:
        return "LatencyFunctionLLM"

    def _take(self, messages: Sequence[ChatMessage], tools: Sequence[BaseTool]) -> FCReply:
        if self._next >= len(self._script):
            raise AssertionError(f"LatencyFunctionLLM has no reply left for call {self._next + 1}")
        reply = self._script[self._next]
        self._next += 1
        prompt = _render_messages(messages) + "\n" + _render_tools(tools)
        self._records.append(
            CallRecord(
                prompt=prompt,
                prompt_tokens=len(split_tokens(prompt)),
                completion_tokens=len(reply.tokens()),
                started=time.time(),
            )
        )
        return reply

    def _message(self, text: str, reply: FCReply | None) -> ChatMessage:
        blocks: list[Any] = [TextBlock(text=text)] if text else []
        if reply is not None:
            blocks += [
                ToolCallBlock(tool_call_id=f"call_{i}", tool_name=name, tool_kwargs=kwargs)
                for i, (name, kwargs) in enumerate(reply.calls)
            ]
        return ChatMessage(role=MessageRole.ASSISTANT, blocks=blocks)

    async def astream_chat(  # type: ignore[override]
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        reply = self._take(messages, kwargs.get("tools") or [])
        record, start = self._records[-1], time.perf_counter()
        n_text = len(split_tokens(reply.text))

        async def gen() -> AsyncGenerator[ChatResponse, None]:
            tokens = reply.tokens() or [""]
            text = ""
            for i, token in enumerate(tokens):
                await _sleep_until(start + self.model.token_at(i))
                record.last_token = time.time()
                if i == 0:
                    record.first_token = record.last_token
                delta = token if i < n_text else ""
                text += delta
                last = i == len(tokens) - 1
                yield ChatResponse(
                    message=self._message(text, reply if last else None), delta=delta
                )

        return gen()

    async def achat(  # type: ignore[override]
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> ChatResponse:
        reply = self._take(messages, kwargs.get("tools") or [])
        record, start = self._records[-1], time.perf_counter()
        await _sleep_until(start + self.model.token_at(len(reply.tokens()) - 1))
        record.first_token = record.last_token = time.time()
        return ChatResponse(message=self._message(reply.text, reply))


@dataclass
class Usage:
    """LLM usage summed over calls."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    records: list[CallRecord] = field(default_factory=list)

    @classmethod
    def of(cls, records: Sequence[CallRecord]) -> Usage:
        """Sum `records`."""
        return cls(
            calls=len(records),
            prompt_tokens=sum(r.prompt_tokens for r in records),
            completion_tokens=sum(r.completion_tokens for r in records),
            records=list(records),
        )

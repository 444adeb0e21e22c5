"""Test helpers: a scripted LLM that streams chosen answers and records its prompts, and a
run-and-collect helper that runs a workflow to the end and keeps what it streamed."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import AsyncGenerator, Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from llama_index.core.agent.workflow import AgentStream
from llama_index.core.base.llms.types import (
    ChatMessage,
    ChatResponse,
    CompletionResponse,
    LLMMetadata,
    MessageRole,
)
from llama_index.core.llms import LLM
from pydantic import PrivateAttr
from workflows import Workflow

from llm_compiler.engine.llm import CALL_ROLE
from llm_compiler.logs import RUN_ID

_TOKEN = re.compile(r"\s*\S+|\s+")
E = TypeVar("E")


@dataclass
class LLMCall:
    """One call the scripted LLM received."""

    kind: str
    """``chat`` or ``complete``."""
    prompt: str
    """The completion prompt, or all message contents joined."""
    messages: list[ChatMessage] = field(default_factory=list)
    stream: bool = False
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Extra request arguments (``extra_body`` holds a dialect's request extras)."""
    role: str | None = field(default_factory=lambda: CALL_ROLE.get())
    """``planner`` or ``joiner``: which of the compiler's calls this is (None when the
    model is called outside a compiler run)."""
    run_id: str | None = field(default_factory=lambda: RUN_ID.get())
    """The compiler run that makes the call (None outside one)."""


Reply = str | BaseException
Script = Sequence[Reply] | Callable[[LLMCall], Reply]
#: Calls a ScriptedLLM keeps in ``calls`` by default (older ones are dropped).
KEEP_CALLS = 1000


def by_role(
    planner: Reply | Callable[[LLMCall], Reply], joiner: Reply | Callable[[LLMCall], Reply]
) -> Callable[[LLMCall], Reply]:
    """A script answering every planner call with `planner` and every joiner call with
    `joiner` (each a reply, or a function of the :class:`LLMCall`), for as many runs as
    come: give it to :class:`ScriptedLLM` to serve a workflow without a model.

    A call made outside a compiler run (no role) is an error.
    """
    answers: Mapping[str, Reply | Callable[[LLMCall], Reply]] = {
        "planner": planner,
        "joiner": joiner,
    }

    def reply(call: LLMCall) -> Reply:
        answer = answers.get(call.role or "")
        if answer is None:
            return AssertionError("by_role answers the compiler's planner and joiner calls only")
        return answer(call) if callable(answer) else answer

    return reply


def split_tokens(text: str) -> list[str]:
    """Word-like tokens (each with its leading whitespace); joined they give `text`."""
    return _TOKEN.findall(text)


class ScriptedLLM(LLM):
    """Replays scripted replies, in order or from a function of the call.

    A run of the default dialect asks for a plan, then for the joiner's verdict, so a
    script gives one reply of each format per round::

        llm = ScriptedLLM([
            # the plan: numbered calls (keyword or positional arguments, Python
            # literals), $N for task N's result, join(), then <END_OF_PLAN>
            '1. get_weather(city="Oslo")\n'
            "2. convert_c_to_f(celsius=$1)\n"
            "3. join()<END_OF_PLAN>",
            # the joiner: a Thought, then Finish(the answer) or Replan(what is missing)
            "Thought: Oslo is at 4 C.\nAction: Finish(It is 39.2 F in Oslo.)",
        ])

    A line without its number (``get_weather("Oslo")``) is no task: a plan of such
    lines runs nothing (the run logs a warning, its summary says ``no_tasks``).
    A reply that is an exception is raised instead. Streams split replies into
    ``tokens_per_chunk`` word-like tokens. The last `keep_calls` calls are kept in
    ``calls``; ``call_count`` counts them all. Subclasses may override :meth:`on_chunk`
    to model latency.

    For a served workflow, which answers any number of runs, give a function:
    :func:`by_role` answers planner and joiner calls apart (each call's ``role`` says
    which it is), and a function of the call can answer by rule (its ``prompt`` holds
    the question).

    Args:
        script: The replies, or a function of the :class:`LLMCall` returning one.
        chat: Whether the model is a chat model (else completion prompts).
        tokens_per_chunk: Tokens per streamed chunk.
        chunker: Splits a reply into streamed chunks instead (their concatenation must
            be the reply), e.g. ``lambda t: list(t)`` for one character at a time.
        keep_calls: How many of the latest calls ``calls`` keeps (memory stays bounded
            however long the model serves).
    """

    chat_model: bool = True
    tokens_per_chunk: int = 1
    accepts_request_extras: ClassVar[bool] = True  # record extras as a server would get them
    _script: Any = PrivateAttr()
    _chunker: Callable[[str], Sequence[str]] | None = PrivateAttr(default=None)
    _next: int = PrivateAttr(default=0)
    _calls: deque[LLMCall] = PrivateAttr()
    _count: int = PrivateAttr(default=0)

    def __init__(
        self,
        script: Script,
        *,
        chat: bool = True,
        tokens_per_chunk: int = 1,
        chunker: Callable[[str], Sequence[str]] | None = None,
        keep_calls: int = KEEP_CALLS,
        **kwargs: Any,
    ) -> None:
        super().__init__(chat_model=chat, tokens_per_chunk=tokens_per_chunk, **kwargs)  # type: ignore[call-arg]
        self._script = script
        self._chunker = chunker
        self._calls = deque(maxlen=max(1, keep_calls))

    @classmethod
    def class_name(cls) -> str:
        return "ScriptedLLM"

    @property
    def metadata(self) -> LLMMetadata:
        return LLMMetadata(model_name="scripted", is_chat_model=self.chat_model)

    @property
    def calls(self) -> list[LLMCall]:
        """The latest calls received (at most `keep_calls`), oldest first."""
        return list(self._calls)

    @property
    def call_count(self) -> int:
        """How many calls were received in all."""
        return self._count

    async def on_chunk(self, index: int, chunk: str) -> None:
        """Called before each streamed chunk (index 0 is the first); a latency hook."""

    async def on_reply(self, text: str) -> None:
        """Called before a non-streamed reply is returned; a latency hook."""

    def _reply(self, call: LLMCall) -> str:
        self._calls.append(call)
        self._count += 1
        if callable(self._script):
            reply = self._script(call)
        else:
            if self._next >= len(self._script):
                raise AssertionError(f"ScriptedLLM has no reply left for call {self._count}")
            reply = self._script[self._next]
            self._next += 1
        if isinstance(reply, BaseException):
            raise reply
        return str(reply)

    def _chunks(self, text: str) -> list[str]:
        if self._chunker is not None:
            chunks = [c for c in self._chunker(text) if c]
            if "".join(chunks) != text:
                raise AssertionError("ScriptedLLM: the chunker's chunks do not add up to the reply")
            return chunks
        tokens = split_tokens(text)
        n = max(1, self.tokens_per_chunk)
        return ["".join(tokens[i : i + n]) for i in range(0, len(tokens), n)]

    @staticmethod
    def _chat_call(messages: Sequence[ChatMessage], stream: bool, **kwargs: Any) -> LLMCall:
        prompt = "\n".join(m.content or "" for m in messages)
        return LLMCall("chat", prompt, list(messages), stream, kwargs)

    # -- async API (used by the compiler) ------------------------------------------------

    async def achat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = self._reply(self._chat_call(messages, False))
        await self.on_reply(text)
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    async def acomplete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> CompletionResponse:
        text = self._reply(LLMCall("complete", prompt, kwargs=kwargs))
        await self.on_reply(text)
        return CompletionResponse(text=text)

    async def astream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> AsyncGenerator[ChatResponse, None]:
        text = self._reply(self._chat_call(messages, True, **kwargs))

        async def gen() -> AsyncGenerator[ChatResponse, None]:
            acc = ""
            for i, chunk in enumerate(self._chunks(text)):
                await self.on_chunk(i, chunk)
                acc += chunk
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=acc), delta=chunk
                )

        return gen()

    async def astream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> AsyncGenerator[CompletionResponse, None]:
        text = self._reply(LLMCall("complete", prompt, stream=True, kwargs=kwargs))

        async def gen() -> AsyncGenerator[CompletionResponse, None]:
            acc = ""
            for i, chunk in enumerate(self._chunks(text)):
                await self.on_chunk(i, chunk)
                acc += chunk
                yield CompletionResponse(text=acc, delta=chunk)

        return gen()

    # -- sync API (for completeness; the compiler never blocks on it) -------------------

    def chat(self, messages: Sequence[ChatMessage], **kwargs: Any) -> ChatResponse:
        text = self._reply(self._chat_call(messages, False))
        return ChatResponse(message=ChatMessage(role=MessageRole.ASSISTANT, content=text))

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
        return CompletionResponse(text=self._reply(LLMCall("complete", prompt)))

    def stream_chat(
        self, messages: Sequence[ChatMessage], **kwargs: Any
    ) -> Generator[ChatResponse, None, None]:
        text = self._reply(self._chat_call(messages, True))
        acc = ""
        for chunk in self._chunks(text):
            acc += chunk
            yield ChatResponse(
                message=ChatMessage(role=MessageRole.ASSISTANT, content=acc), delta=chunk
            )

    def stream_complete(
        self, prompt: str, formatted: bool = False, **kwargs: Any
    ) -> Generator[CompletionResponse, None, None]:
        text = self._reply(LLMCall("complete", prompt, stream=True))
        acc = ""
        for chunk in self._chunks(text):
            acc += chunk
            yield CompletionResponse(text=acc, delta=chunk)


async def run_and_collect(
    workflow: Workflow, *, tokens: bool = False, **start: Any
) -> tuple[Any, list[Any]]:
    """Run `workflow` to the end; return its result and every event it streamed, in order.

    ``out, events = await run_and_collect(wf, user_msg="...")``. The streamed tokens
    (``AgentStream`` events) are left out unless `tokens` is true; `start` goes to
    ``workflow.run`` (``user_msg=``, ``ctx=``, ``start_event=`` ...). A failed run raises
    as ``await workflow.run(...)`` does.
    """
    handler = workflow.run(**start)
    events = [e async for e in handler.stream_events() if tokens or not isinstance(e, AgentStream)]
    return await handler, events


def events_of(events: Iterable[object], kind: type[E]) -> list[E]:
    """The events of one type (``events_of(events, TaskResult)``), in order."""
    return [e for e in events if isinstance(e, kind)]

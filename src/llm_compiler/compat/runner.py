"""``AgentRunner``: the legacy chat surface (``chat``, ``stream_chat`` ...) on a workflow.

The legacy ``AgentRunner`` drove a step worker; this one runs the worker's workflow once
per message, with the conversation in a chat memory (each turn stored once), and returns
the llama-index response types the legacy agents returned, ``sources`` filled with every
tool output. Sync methods run on a private event loop kept by the agent (so a client bound
to a loop keeps working across calls); inside a running loop they raise and point to
the async method, instead of needing ``nest_asyncio``.
"""

from __future__ import annotations

import asyncio
import threading
import warnings
import weakref
from collections.abc import AsyncGenerator, Coroutine, Generator
from typing import Any, TypeVar

from llama_index.core.base.llms.types import ChatMessage, ChatResponse, MessageRole
from llama_index.core.base.response.schema import Response
from llama_index.core.chat_engine.types import AgentChatResponse, StreamingAgentChatResponse
from llama_index.core.memory import BaseMemory, ChatMemoryBuffer
from llama_index.core.tools import ToolOutput

from llm_compiler.compat._verbose import VerbosePrinter
from llm_compiler.engine.summary import CompilerOutput
from llm_compiler.errors import ConfigurationError
from llm_compiler.events import CompilerStream, TaskReady, TaskResult

T = TypeVar("T")


class _PrivateLoop:
    """An event loop for the sync methods, created once and closed with its owner."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        # Two threads calling one agent's sync methods take turns on its loop.
        self._lock = threading.Lock()

    @staticmethod
    def check(method: str) -> None:
        """Raise a clear error when a sync method is called inside a running event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise ConfigurationError(
            f"agent.{method}() was called inside a running event loop (async code or a "
            f"notebook): use `await agent.a{method}(...)` instead."
        )

    def run(self, coro: Coroutine[Any, Any, T], method: str) -> T:
        try:
            self.check(method)
        except ConfigurationError:
            coro.close()
            raise
        with self._lock:
            if self._loop is None:
                self._loop = asyncio.new_event_loop()
                weakref.finalize(self, self._loop.close)
            return self._loop.run_until_complete(coro)


class AgentRunner:
    """The legacy ``AgentRunner`` surface over a compat worker's workflow.

    Args:
        agent_worker: An ``LLMCompilerAgentWorker`` or ``CoAAgentWorker``.
        chat_history: The conversation to start from.
        memory: A chat memory to keep the conversation in (default: a
            ``ChatMemoryBuffer``).
        llm: Accepted for compatibility; the worker's LLM is used (a warning says so).
        callback_manager: Accepted for compatibility (a warning says how to observe runs).
        verbose: Print the plan, tasks and answers (also on when the worker has it).
    """

    def __init__(
        self,
        agent_worker: Any,
        chat_history: list[ChatMessage] | None = None,
        memory: BaseMemory | None = None,
        llm: Any = None,
        callback_manager: Any = None,
        verbose: bool = False,
        **kwargs: Any,
    ) -> None:
        _warn_unused(
            {"llm": llm, "callback_manager": callback_manager, **kwargs},
            "the worker's LLM and the workflow's events (handler.stream_events()) replace them",
        )
        self.agent_worker = agent_worker
        self.workflow = agent_worker.build_workflow()
        self.verbose = verbose or bool(getattr(agent_worker, "verbose", False))
        self.memory: BaseMemory | None = memory
        self._initial_history = list(chat_history or [])
        self._sync = _PrivateLoop()

    # ------------------------------------------------------------------ history

    @property
    def chat_history(self) -> list[ChatMessage]:
        """The conversation so far, each turn once."""
        if self.memory is None:
            return list(self._initial_history)
        return self.memory.get_all()

    def reset(self) -> None:
        """Forget the conversation."""
        self._initial_history = []
        if self.memory is not None:
            self.memory.reset()

    async def _memory(self) -> BaseMemory:
        if self.memory is None:  # its tokenizer loads from disk: not on the event loop
            self.memory = await asyncio.to_thread(
                ChatMemoryBuffer.from_defaults, chat_history=self._initial_history
            )
        return self.memory

    # ------------------------------------------------------------------ running

    async def _events(
        self, message: str, chat_history: list[ChatMessage] | None, memory: BaseMemory | None
    ) -> AsyncGenerator[Any, None]:
        """Run one turn; yield its events, then its ``CompilerOutput`` last."""
        memory = memory or await self._memory()
        printer = None
        if self.verbose:
            printer = VerbosePrinter(self.workflow.dialect, self.agent_worker.coa)
        handler = self.workflow.run(user_msg=message, chat_history=chat_history, memory=memory)
        try:
            async for ev in handler.stream_events():
                if printer is not None:
                    if printer.wants_functions:  # the run's tools, the retriever's included
                        tools = self.workflow.run_tools(handler.run_id)
                        printer.functions(list(tools or []))
                    printer.event(ev)
                yield ev
            result: CompilerOutput = await handler
        except BaseException:
            if not handler.is_done():
                await handler.cancel_run()
            raise
        if printer is not None:
            printer.answer(str(result), len(result.summary.rounds) - 1)
        yield result

    async def _turn(
        self, message: str, chat_history: list[ChatMessage] | None, memory: BaseMemory | None
    ) -> tuple[str, list[ToolOutput]]:
        sources = _Sources()
        answer = ""
        async for ev in self._events(message, chat_history, memory):
            sources.see(ev)
            if isinstance(ev, CompilerOutput):
                answer = str(ev)
        return answer, sources.outputs

    async def achat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> AgentChatResponse:
        """Answer `message` (``chat_history`` replaces the conversation, as before)."""
        _warn_tool_choice(tool_choice)
        answer, sources = await self._turn(message, chat_history, None)
        return AgentChatResponse(response=answer, sources=sources)

    def chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> AgentChatResponse:
        """Sync :meth:`achat` (not inside a running event loop)."""
        return self._sync.run(self.achat(message, chat_history, tool_choice), "chat")

    async def aquery(self, query: Any) -> Response:
        """Answer one question outside the conversation (the conversation is unchanged)."""
        text = getattr(query, "query_str", query)
        memory = await asyncio.to_thread(ChatMemoryBuffer.from_defaults)
        answer, sources = await self._turn(str(text), None, memory)
        chat = AgentChatResponse(response=answer, sources=sources)
        return Response(response=answer, source_nodes=chat.source_nodes)

    def query(self, query: Any) -> Response:
        """Sync :meth:`aquery`."""
        return self._sync.run(self.aquery(query), "query")

    # ------------------------------------------------------------------ streaming

    async def _deltas(
        self, message: str, chat_history: list[ChatMessage] | None, sources: list[ToolOutput]
    ) -> AsyncGenerator[ChatResponse, None]:
        """The answer as it streams: CoA's answer call live, else the answer at the end."""
        seen = _Sources()
        streamed = ""
        async for ev in self._events(message, chat_history, None):
            seen.see(ev)
            delta = ""
            if isinstance(ev, CompilerStream) and ev.phase == "join" and self.agent_worker.coa:
                delta = ev.delta if streamed else ev.delta.lstrip()
            elif isinstance(ev, CompilerOutput):
                sources.extend(seen.outputs)
                answer, done = str(ev), streamed.strip()
                # What the live tokens did not give (all of it when nothing streamed).
                delta = answer[len(done) :] if answer.startswith(done) else ""
            if delta:
                streamed += delta
                yield ChatResponse(
                    message=ChatMessage(role=MessageRole.ASSISTANT, content=streamed),
                    delta=delta,
                )

    async def astream_chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> StreamingAgentChatResponse:
        """Stream the answer; ``sources`` is filled when the stream ends."""
        _warn_tool_choice(tool_choice)
        sources: list[ToolOutput] = []
        return StreamingAgentChatResponse(
            achat_stream=self._deltas(message, chat_history, sources),
            sources=sources,
            is_writing_to_memory=False,  # the workflow writes each turn to the memory
        )

    def stream_chat(
        self,
        message: str,
        chat_history: list[ChatMessage] | None = None,
        tool_choice: str | dict[str, Any] | None = None,
    ) -> StreamingAgentChatResponse:
        """Sync :meth:`astream_chat`: iterate ``response.response_gen``."""
        _warn_tool_choice(tool_choice)
        self._sync.check("stream_chat")
        sources: list[ToolOutput] = []
        deltas = self._deltas(message, chat_history, sources)

        def gen() -> Generator[ChatResponse, None, None]:
            try:
                while True:
                    try:
                        yield self._sync.run(deltas.__anext__(), "stream_chat")
                    except StopAsyncIteration:
                        return
            finally:
                self._sync.run(deltas.aclose(), "stream_chat")

        return StreamingAgentChatResponse(
            chat_stream=gen(), sources=sources, is_writing_to_memory=False
        )


class _Sources:
    """Tool outputs of a run, as ``ToolOutput`` s (the legacy ``sources``)."""

    def __init__(self) -> None:
        self.args: dict[int, dict[str, Any]] = {}
        self.outputs: list[ToolOutput] = []

    def see(self, ev: Any) -> None:
        if isinstance(ev, TaskReady):
            self.args[ev.task_id] = ev.args
        elif isinstance(ev, TaskResult):
            self.outputs.append(
                ToolOutput(
                    content=ev.output if isinstance(ev.output, str) else str(ev.output),
                    tool_name=ev.tool_name,
                    raw_input={"kwargs": self.args.get(ev.task_id, {})},
                    raw_output=ev.output,
                    is_error=ev.is_error,
                )
            )


def _warn_unused(values: dict[str, Any], instead: str) -> None:
    for name, value in values.items():
        if value is not None and value is not False:
            warnings.warn(
                f"AgentRunner({name}=...) has no effect on this engine: {instead}.",
                DeprecationWarning,
                stacklevel=3,
            )


def _warn_tool_choice(tool_choice: Any) -> None:
    if tool_choice not in (None, "auto"):
        warnings.warn(
            "tool_choice has no effect: the planner chooses the tools.",
            DeprecationWarning,
            stacklevel=3,
        )

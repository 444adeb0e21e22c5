"""What a run costs the process beside its steps: no thread hop for its own memory."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.storage.chat_store import SimpleChatStore

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import ScriptedLLM

PLAN = '1. search("a")\n2. search("b")\n3. join()<END_OF_PLAN>'
FINISH = "Thought: done.\nAction: Finish(a and b)"


async def search(q: str) -> str:
    """Look `q` up."""
    return q


def workflow() -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([PLAN, FINISH]))


@pytest.fixture
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Whatever is handed to a thread pool while the test runs."""
    hops: list[Any] = []
    submit = ThreadPoolExecutor.submit

    def counting(self: ThreadPoolExecutor, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        hops.append(fn)
        return submit(self, fn, *args, **kwargs)

    monkeypatch.setattr(ThreadPoolExecutor, "submit", counting)
    return hops


async def test_a_run_on_its_own_memory_hands_nothing_to_a_thread(thread_hops):
    assert str(await workflow().run(user_msg="q")) == "a and b"  # loads the tokenizer
    thread_hops.clear()
    assert str(await workflow().run(user_msg="q")) == "a and b"
    assert thread_hops == []


ADDED: list[object] = []


class RecordingStore(SimpleChatStore):
    """A chat store of the user's own: its async API is what the run must use."""

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        ADDED.append(message.content)
        await super().async_add_message(key, message)


async def test_a_memory_on_a_store_of_its_own_is_written_through_its_async_api():
    ADDED.clear()
    memory = ChatMemoryBuffer.from_defaults(chat_store=RecordingStore())
    assert str(await workflow().run(user_msg="q", memory=memory)) == "a and b"
    assert ADDED == ["q", "a and b"]
    assert [m.content for m in memory.get_all()] == ["q", "a and b"]

"""A run's chat memory, read and written on the event loop when it lives in this process."""

from __future__ import annotations

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import BaseMemory, ChatMemoryBuffer
from llama_index.core.storage.chat_store import SimpleChatStore


def in_process(memory: BaseMemory) -> bool:
    """Whether `memory` is a ``ChatMemoryBuffer`` on llama-index's in-process
    ``SimpleChatStore`` (a run's default): its async methods only hop to a thread, one
    per call, around a few list operations."""
    return type(memory) is ChatMemoryBuffer and type(memory.chat_store) is SimpleChatStore


async def read(memory: BaseMemory) -> list[ChatMessage]:
    """The conversation `memory` holds (its async read unless :func:`in_process`)."""
    return memory.get() if in_process(memory) else await memory.aget()


async def remember(memory: BaseMemory, message: ChatMessage) -> None:
    """Add `message` to `memory` (its async write unless :func:`in_process`)."""
    if in_process(memory):
        memory.put(message)
    else:
        await memory.aput(message)

"""Helpers for scripted end-to-end runs."""

from __future__ import annotations

import asyncio
from typing import Any

from llama_index.core.agent.workflow import AgentStream

from llm_compiler import LLMCompilerWorkflow


async def run(wf: LLMCompilerWorkflow, **kwargs: Any) -> tuple[Any, list[Any]]:
    """Run to the end; return the result and every streamed event (tokens excluded)."""
    handler = wf.run(**kwargs)
    events = [ev async for ev in handler.stream_events() if not isinstance(ev, AgentStream)]
    return await handler, events


def of(events: list[Any], kind: type) -> list[Any]:
    return [e for e in events if isinstance(e, kind)]


class Gate:
    """An asyncio.Event with a name, for proving order without sleeps."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def open(self) -> None:
        self.event.set()

    async def wait(self, timeout: float = 5.0) -> None:
        await asyncio.wait_for(self.event.wait(), timeout)

"""A served compiler workflow on 127.0.0.1 with a scripted model and overlapping tools.

The two ``fetch`` tasks of a plan only finish once two fetches run at the same time
(a condition, not a sleep), so every run proves its tasks overlap.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import LLMCall, ScriptedLLM

JOINER_MARK = "Answer a question from the results of a plan"
PLAN = '1. fetch("alpha")\n2. fetch("beta")\n3. combine("$1", "$2")\n4. join()<END_OF_PLAN>'
ANSWER = "alpha and beta combined"


class Overlap:
    """Counts fetches running now; each waits until two run together."""

    def __init__(self) -> None:
        self.running = 0
        self.peak = 0
        self.cond = asyncio.Condition()
        self.release: asyncio.Event | None = None

    async def fetch(self, name: str) -> str:
        """Fetch a value by name."""
        async with self.cond:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.cond.notify_all()
            await asyncio.wait_for(self.cond.wait_for(lambda: self.running >= 2), 10)
        if self.release is not None:  # a test holds the tools to cancel mid-run
            await self.release.wait()
        async with self.cond:
            self.running -= 1
        return f"value of {name}"


def combine(a: str, b: str) -> str:
    """Combine two values."""
    return f"{a} + {b}"


def scripted(
    plans: list[str] | None = None, answers: list[str] | None = None, *, tokens_per_chunk: int = 2
) -> ScriptedLLM:
    """The planner replies `plans` in turn (then PLAN); the joiner `answers`, then Finish(ANSWER).

    The queues are shared by all runs of the model: concurrent runs get PLAN and ANSWER.
    """
    plan_queue, answer_queue = list(plans or []), list(answers or [])

    def reply(call: LLMCall) -> str:
        if JOINER_MARK in call.prompt:
            if answer_queue:
                return answer_queue.pop(0)
            return f"Thought: Both values are here.\nAction: Finish({ANSWER})"
        return plan_queue.pop(0) if plan_queue else PLAN

    return ScriptedLLM(reply, tokens_per_chunk=tokens_per_chunk)


def workflow(overlap: Overlap, llm: ScriptedLLM | None = None) -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(
        tools=[overlap.fetch, combine], llm=llm or scripted(), max_replans=2, timeout=60
    )


@pytest.fixture
def overlap() -> Overlap:
    return Overlap()


async def start_server(app_factory: Callable[[], Any]) -> tuple[str, asyncio.Task, Any]:
    from llm_compiler.serving import serve
    from llm_compiler.serving.server import bound_socket

    served = app_factory()
    sock = bound_socket("127.0.0.1", 0)
    ready = asyncio.get_running_loop().create_future()
    stop_event = asyncio.Event()
    task = asyncio.create_task(
        serve(served, "127.0.0.1", 0, sock=sock, on_ready=ready.set_result, stop=stop_event)
    )
    task.stop_event = stop_event  # type: ignore[attr-defined]
    url = await asyncio.wait_for(ready, 20)
    return url.rstrip("/"), task, served


async def stop(task: asyncio.Task) -> None:
    """Shut a server from :func:`start_server` down gracefully."""
    task.stop_event.set()
    await asyncio.wait_for(task, 20)


@pytest.fixture
async def base_url(overlap) -> AsyncIterator[str]:
    """The URL of a server running `workflow(overlap)` as ``compiler``."""
    from llm_compiler.serving import build_app

    url, task, _ = await start_server(lambda: build_app({"compiler": workflow(overlap)}))
    yield url
    await stop(task)


async def start_run(client: httpx.AsyncClient, question: str = "alpha and beta?") -> str:
    r = await client.post(
        "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": question}}
    )
    assert r.status_code == 200, r.text
    return r.json()["handler_id"]


async def sse(
    client: httpx.AsyncClient,
    handler_id: str,
    *,
    after: str = "-1",
    headers: dict | None = None,
    limit: int | None = None,
    stop_at: str | None = None,
) -> list[tuple[int, dict]]:
    """Read the SSE stream of `handler_id` (to its end, `limit` events, or the first event
    of type `stop_at`): (id, envelope)."""
    out: list[tuple[int, dict]] = []
    params = {"after_sequence": after}
    async with client.stream("GET", f"/events/{handler_id}", params=params, headers=headers) as r:
        assert r.status_code == 200, await r.aread()
        seq = None
        async for line in r.aiter_lines():
            if line.startswith("id: "):
                seq = int(line[4:])
            elif line.startswith("data: "):
                out.append((seq, json.loads(line[6:])))
                if limit is not None and len(out) >= limit:
                    break
                if stop_at is not None and out[-1][1].get("type") == stop_at:
                    break
    return out

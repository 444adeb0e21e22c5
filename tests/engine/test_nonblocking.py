"""No blocking call on the event loop while a run executes (blockbuster patches them)."""

from __future__ import annotations

import asyncio

from blockbuster import blockbuster_ctx

from llm_compiler import LLMCompilerAgent, LLMCompilerWorkflow, TaskResult
from llm_compiler.testing import ScriptedLLM

PLAN = '1. lookup("a")\n2. multiply(2, 3)\n3. lookup("$1 and $2")\n4. join()'
FINISH = "Thought: ok\nAction: Finish(done)"


async def lookup(query: str) -> str:
    """Async lookup."""
    await asyncio.sleep(0.01)
    return query.upper()


def multiply(a: float, b: float) -> float:
    """Sync tool: runs in a thread, so it may block."""
    return a * b


async def run_workflow() -> str:
    wf = LLMCompilerWorkflow(tools=[lookup, multiply], llm=ScriptedLLM([PLAN, FINISH]))
    handler = wf.run(user_msg="q")
    results = [e async for e in handler.stream_events() if isinstance(e, TaskResult)]
    # A blocking call inside a tool would surface as an error observation.
    assert [r.is_error for r in results] == [False] * 3, [r.output for r in results]
    return str(await handler)


async def run_agent() -> str:
    agent = LLMCompilerAgent(tools=[lookup, multiply], llm=ScriptedLLM([PLAN, FINISH]))
    handler = agent.run(user_msg="q")
    results = [e async for e in handler.stream_events() if isinstance(e, TaskResult)]
    assert [r.is_error for r in results] == [False] * 3, [r.output for r in results]
    return str(await handler)


async def test_runs_make_no_blocking_calls_on_the_loop():
    # Warm up first: imports and the tokenizer's first load read files (once per process).
    assert await run_workflow() == "done" and await run_agent() == "done"
    with blockbuster_ctx():
        assert await run_workflow() == "done"
        assert await run_agent() == "done"

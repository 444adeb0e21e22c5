"""The run's state: reads are pure, the tool set is chosen once, steps commit once."""

from __future__ import annotations

import json
from typing import Any

from llama_index.core.tools import FunctionTool
from workflows import Context

from llm_compiler import LLMCompilerWorkflow, TaskResult
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: done.\nAction: Finish(done)"


def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


class Counting:
    """A retriever (duck-typed) that counts its calls and offers one extra tool."""

    def __init__(self) -> None:
        self.calls = 0

    async def aretrieve(self, query: Any) -> list[Any]:
        self.calls += 1

        def extra() -> str:
            """An extra tool."""
            return "extra"

        return [FunctionTool.from_defaults(fn=extra)]


def script(call: Any) -> str:
    return FINISH if "Action: Finish(" in call.prompt else '1. search("a")\n2. join()'


async def snapshot_mid_run(retriever: Counting) -> dict[str, Any]:
    wf = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script), tool_retriever=retriever)
    handler = wf.run(user_msg="q")
    saved: dict[str, Any] = {}
    async for ev in handler.stream_events():
        if isinstance(ev, TaskResult) and not saved:
            saved = json.loads(json.dumps(handler.ctx.to_dict()))
    await handler
    assert retriever.calls == 1 and saved["is_running"]
    return saved


async def test_a_resumed_run_planned_with_its_own_tools_asks_no_retriever():
    """The tool set is the fact chosen at the start (tool_names); resuming reads it."""
    saved = await snapshot_mid_run(Counting())
    retriever = Counting()
    fresh = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script), tool_retriever=retriever)
    ctx = Context.from_dict(fresh, saved)
    assert (await ctx.store.get_state()).tool_names == ["search", "extra"]
    # the plan used our own tool only, but the run may use `extra`: it is looked up once
    out = await fresh.run(ctx=ctx)
    assert str(out) == "done" and retriever.calls == 1


async def test_a_resumed_run_without_retrieved_tools_asks_no_retriever():
    saved = await snapshot_mid_run(Counting())
    fresh = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM(script))
    retriever = Counting()
    fresh.tool_retriever = retriever  # type: ignore[assignment]
    ctx = Context.from_dict(fresh, saved)
    async with ctx.store.edit_state() as s:
        s.tool_names = ["search"]  # a run that chose only the workflow's own tools
    out = await fresh.run(ctx=ctx)
    assert str(out) == "done" and retriever.calls == 0

"""A call's arguments: resolved once, validated once at dispatch, any failure an observation."""

from __future__ import annotations

from typing import Any

import pytest
from llama_index.core.agent.workflow import AgentStream
from llama_index.core.tools import FunctionTool
from pydantic import BaseModel, field_validator

from llm_compiler import LLMCompilerWorkflow, TaskReady, TaskResult
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: done.\nAction: Finish(done)"


class Query(BaseModel):
    text: str

    @field_validator("text")
    @classmethod
    def _check(cls, value: str) -> str:
        if value.startswith("bad"):
            raise TypeError(f"cannot take {value!r}")  # pydantic lets a TypeError through
        if value.startswith("odd"):
            return value.nosuch  # type: ignore[attr-defined]  # an AttributeError
        return value


calls: list[str] = []


def lookup(text: str) -> str:
    """Look text up."""
    calls.append(text)
    return f"<{text}>"


def source(word: str) -> str:
    """Return a word."""
    return word


TOOLS = [
    FunctionTool.from_defaults(fn=lookup, fn_schema=Query),
    FunctionTool.from_defaults(fn=source),
]


async def run(plan: str) -> tuple[Any, list[Any]]:
    calls.clear()
    wf = LLMCompilerWorkflow(tools=TOOLS, llm=ScriptedLLM([plan, FINISH]), timeout=10)
    handler = wf.run(user_msg="q")
    events = [e async for e in handler.stream_events() if not isinstance(e, AgentStream)]
    return await handler, events


@pytest.mark.parametrize(
    ("word", "error"), [("bad", "TypeError: cannot take 'bad'"), ("odd", "AttributeError")]
)
async def test_a_validator_that_raises_anything_is_an_observation(word, error):
    """With a `$ref` input (validated at dispatch) as with a literal (checked in the plan)."""
    plan = f'1. source("{word}")\n2. lookup($1)\n3. lookup("{word}")\n4. lookup("fine")\n5. join()'
    out, events = await run(plan)
    assert str(out) == "done"
    results = {r.task_id: r for r in events if isinstance(r, TaskResult)}
    for tid in (2, 3):
        assert results[tid].is_error, results[tid]
        assert results[tid].output.startswith("Invalid arguments for lookup: ")
        assert error in results[tid].output
    assert results[4].output == "<fine>" and calls == ["fine"]
    assert out.summary.task(2).status == "error" and out.summary.task(3).status == "error"


async def test_the_executor_runs_with_the_arguments_it_was_dispatched_with():
    """A forged TaskReady's arguments are never used (a second delivery of a running
    task's TaskReady runs it again, as a step run again would, with its own arguments)."""
    plan = '1. source("a")\n2. lookup($1)\n3. join()'
    calls.clear()
    wf = LLMCompilerWorkflow(tools=TOOLS, llm=ScriptedLLM([plan, FINISH]), timeout=10)
    handler = wf.run(user_msg="q")
    async for ev in handler.stream_events():
        if isinstance(ev, TaskReady) and ev.task_id == 2:
            forged = ev.model_copy(update={"args": {"text": "forged"}})
            handler.ctx.send_event(forged)
    await handler
    assert set(calls) == {"a"}


def test_a_prepared_call_is_taken_once_and_a_finished_run_forgets_its_calls():
    from llm_compiler.engine.dispatch import Calls

    calls = Calls(kept=2)
    calls.put("r1", 1, {"text": "a"})
    calls.put("r1", 2, {"text": "b"})
    assert calls.take("r1", 1) == {"text": "a"} and calls.take("r1", 1) is None
    calls.forget("r1")
    assert calls.take("r1", 2) is None
    for run in ("r2", "r3", "r4"):  # the oldest run's calls go past `kept` runs
        calls.put(run, 1, {"run": run})
    assert calls.take("r2", 1) is None and calls.take("r4", 1) == {"run": "r4"}

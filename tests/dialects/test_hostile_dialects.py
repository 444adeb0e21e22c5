"""Hostile plans in the JSON and Chain-of-Abstraction dialects: one bad call is one error
observation, and every plan is bounded, whatever the dialect."""

from __future__ import annotations

import json

from llm_compiler import LLMCompilerWorkflow, PlanEvent, TaskResult
from llm_compiler.dialects import JsonPlanDialect, PlannerContext
from llm_compiler.dialects.coa.parser import CoAParser
from llm_compiler.dialects.json_plan import JsonPlanStream
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: ok.\nAction: Finish({})"


async def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


def test_deep_json_arguments_are_one_error_task():
    deep = "[" * 5000 + "]" * 5000
    plan = '{"tasks": [{"id": 1, "tool": "a", "args": {"x": ' + deep + "}}, "
    plan += '{"id": 2, "tool": "a", "args": {"x": 1}}]}'
    stream = JsonPlanStream(PlannerContext(prompt=PromptContext("q"), tools=[]))
    tasks = stream.feed(plan) + stream.finish()
    assert [t.id for t in tasks] == [1, 2]
    assert "nested more than 20 deep" in (tasks[0].error or "") and tasks[1].error is None
    assert len(tasks[0].text) < 300  # a huge bad call is not copied into prompts


def test_an_attribute_chain_in_a_coa_call_is_one_error_task():
    parser = CoAParser()
    text = "[FUNC f(" + "a." * 20_000 + "b) = y1] and [FUNC g(2) = y2]"
    tasks = parser.feed(text) + parser.finish()
    assert [(t.id, t.tool) for t in tasks] == [(1, "f"), (2, "g")]
    assert "too deep to read" in (tasks[0].error or "") and tasks[1].error is None


async def test_every_dialect_stops_reading_at_max_plan_chars():
    task = {"id": 1, "tool": "search", "args": {"query": "x" * 50}}
    endless = '{"tasks": [' + ", ".join(json.dumps({**task, "id": i}) for i in range(1, 400))
    llm = ScriptedLLM([endless, FINISH.format("bounded")], tokens_per_chunk=50)
    wf = LLMCompilerWorkflow(
        tools=[search], llm=llm, dialect=JsonPlanDialect(), max_plan_chars=2_000
    )
    handler = wf.run(user_msg="q")
    events = [e async for e in handler.stream_events()]
    assert str(await handler) == "bounded"
    final = next(e for e in events if isinstance(e, PlanEvent) and e.complete)
    assert "longer than 2000 characters" in final.errors[-1]
    assert len(final.text) <= 2_000
    ran = [e for e in events if isinstance(e, TaskResult)]
    assert 0 < len(ran) < 30

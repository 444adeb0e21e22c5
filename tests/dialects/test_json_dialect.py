"""The JSON plan dialect: streamed, dispatched per completed task object."""

from __future__ import annotations

import asyncio
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from llm_compiler import LLMCompilerWorkflow, TaskResult
from llm_compiler.dialects import PlannerContext
from llm_compiler.dialects.json_plan import JsonPlanDialect, JsonPlanStream
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.plan import ref
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect

FINISH = "Thought: ok.\nAction: Finish({})"
PLAN = json.dumps(
    {
        "thought": "Look both up, then compare.",
        "tasks": [
            {"id": 1, "tool": "search", "args": {"query": "a {x}"}},
            {"id": 2, "tool": "search", "args": {"query": 'b "y"'}},
            {"id": 3, "tool": "search", "args": {"query": "$1 vs $2"}},
        ],
    }
)


def parse(chunks: list[str]) -> tuple[list, JsonPlanStream]:
    stream = JsonPlanStream(PlannerContext(prompt=PromptContext("q"), tools=[]))
    tasks = [t for c in chunks for t in stream.feed(c)] + stream.finish()
    return tasks, stream


def test_tasks_parse_with_references_and_thought():
    tasks, stream = parse([PLAN])
    assert [(t.id, t.tool, t.kwargs, t.deps) for t in tasks] == [
        (1, "search", {"query": "a {x}"}, []),
        (2, "search", {"query": 'b "y"'}, []),
        (3, "search", {"query": {"$concat": [ref(1), " vs ", ref(2)]}}, [1, 2]),
    ]
    assert stream.thoughts == ["Look both up, then compare."] and not stream.errors


@settings(max_examples=50, derandomize=True)
@given(st.lists(st.integers(min_value=1, max_value=len(PLAN)), max_size=12))
def test_any_chunking_gives_the_same_plan(cuts):
    points = sorted(set(cuts))
    chunks = [PLAN[a:b] for a, b in zip([0, *points], [*points, len(PLAN)], strict=True)]
    tasks, _ = parse([c for c in chunks if c])
    assert [t.model_dump() for t in tasks] == [t.model_dump() for t in parse([PLAN])[0]]


def test_a_cut_plan_keeps_its_complete_tasks_and_says_so():
    tasks, stream = parse([PLAN[: PLAN.index('{"id": 3')]])
    assert [t.id for t in tasks] == [1, 2]
    assert stream.errors == ["The plan's JSON was cut off before its end."]


async def test_each_task_starts_while_the_plan_still_streams():
    first_ran = asyncio.Event()

    hold_at = len(ScriptedLLM([])._chunks(PLAN)) - 3  # near the end of the plan

    class Held(ScriptedLLM):
        async def on_chunk(self, index: int, chunk: str) -> None:
            if index == hold_at and not self.calls[1:]:
                await asyncio.wait_for(first_ran.wait(), 5)  # only a dispatched task opens it

    async def search(query: str) -> str:
        """Look a topic up."""
        first_ran.set()
        return f"<{query}>"

    llm = Held([PLAN, FINISH.format("done")], tokens_per_chunk=1)
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, dialect=JsonPlanDialect())
    out, events = await run_and_collect(wf, user_msg="a or b?")
    assert str(out) == "done"
    assert [r.output for r in sorted(events_of(events, TaskResult), key=lambda r: r.task_id)] == [
        "<a {x}>",
        '<b "y">',
        '<<a {x}> vs <b "y">>',
    ]


def test_constrained_requests_carry_a_response_format():
    context = PlannerContext(prompt=PromptContext("q"), tools=[], constrained=True)
    request = JsonPlanDialect(schema=lambda tools: {"type": "object"}).planner_request(context)
    assert request.extras["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert JsonPlanDialect().planner_request(context).extras == {
        "response_format": {"type": "json_object"}
    }

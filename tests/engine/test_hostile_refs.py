"""Item 1: model-written dicts shaped like reference markers are data, never references."""

from __future__ import annotations

import pytest
from hostile_helpers import FINISH, TasksDialect, results

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.dialects.llmcompiler import PlanParser
from llm_compiler.plan import PlanTask, iter_refs, resolve_kwargs
from llm_compiler.testing import ScriptedLLM, run_and_collect

received: list[object] = []


async def echo(query: object) -> str:
    """Return what it was given."""
    received.append(query)
    return f"got {query!r}"


HOSTILE = [
    ('search({"$ref": 99})', {"$ref": 99}),
    ('search({"$ref": 1})', {"$ref": 1}),  # itself
    ('search({"$concat": ["a", {"$ref": 5}]})', {"$concat": ["a", {"$ref": 5}]}),
    ('search({"$lit": {"$ref": 7}})', {"$lit": {"$ref": 7}}),
    ('{"search": {"query": {"$ref": 42}}}', {"$ref": 42}),
    ('{"search": [{"$concat": [{"$ref": 3}]}]}', {"$concat": [{"$ref": 3}]}),
]


@pytest.mark.parametrize("line,value", HOSTILE)
def test_marker_shaped_dicts_parse_as_data(line, value):
    parser = PlanParser()
    (task,) = parser.feed(f"1. {line}\n") + parser.finish()
    assert task.error is None
    assert task.deps == []
    assert list(iter_refs(task.args)) + list(iter_refs(list(task.kwargs.values()))) == []
    args = resolve_kwargs({"query": (task.args or list(task.kwargs.values()))[0]}, {})
    assert args == {"query": value}


def test_a_real_reference_inside_a_literal_dict_still_counts():
    parser = PlanParser()
    tasks = parser.feed('1. search("a")\n2. search({"$ref": $1, "x": "$1!"})\n') + parser.finish()
    assert tasks[1].deps == [1]
    assert resolve_kwargs({"q": tasks[1].args[0]}, {1: "A"}) == {"q": {"$ref": "A", "x": "A!"}}


@pytest.mark.timeout(20)
async def test_marker_dicts_reach_the_tool_as_written_and_the_run_ends():
    received.clear()
    plan = (
        '1. echo({"$ref": 99})\n2. echo({"$ref": 2})\n3. echo({"$ref": 4})\n'
        '4. echo({"$ref": 3})\n5. echo({"$concat": ["x", {"$ref": 1}]})\n'
        '6. {"echo": {"query": {"$ref": 6}}}\n7. join()'
    )
    llm = ScriptedLLM([plan, FINISH.format("ok")])
    wf = LLMCompilerWorkflow(tools=[echo], llm=llm, timeout=15)
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "ok"
    done = results(events)
    assert sorted(done) == [1, 2, 3, 4, 5, 6]
    assert not any(r.is_error for r in done.values())
    assert {"$ref": 99} in received and {"$ref": 6} in received
    assert {"$concat": ["x", {"$ref": 1}]} in received


def _bad_tasks(context):
    n = context.next_id
    return [
        PlanTask(id=n, tool="echo", kwargs={"query": "fine"}),
        PlanTask(id=n + 1, tool="echo", kwargs={"query": {"$ref": 99}}, deps=[99]),
        PlanTask(id=n + 2, tool="echo", kwargs={"query": {"$ref": n + 2}}, deps=[n + 2]),
        PlanTask(id=n + 3, tool="echo", kwargs={"query": {"$ref": n + 4}}, deps=[n + 4]),
        PlanTask(id=n + 4, tool="echo", kwargs={"query": {"$ref": n + 3}}, deps=[n + 3]),
        PlanTask(id=n + 5, tool="echo", kwargs={"query": {"$ref": n}}),  # deps not listed
    ]


@pytest.mark.timeout(20)
async def test_the_scheduler_settles_tasks_whose_inputs_can_never_settle():
    """Defence in depth: even a dialect that emits impossible deps cannot hang a run."""
    llm = ScriptedLLM(["(ignored)", FINISH.format("ok")])
    dialect = TasksDialect(make=_bad_tasks)
    wf = LLMCompilerWorkflow(tools=[echo], llm=llm, dialect=dialect, timeout=15)
    out, events = await run_and_collect(wf, user_msg="q")
    assert str(out) == "ok"
    done = results(events)
    assert sorted(done) == [1, 2, 3, 4, 5, 6]
    assert not done[1].is_error
    for tid in (2, 3, 4):
        assert done[tid].is_error and "not an earlier task" in done[tid].output
    assert done[5].is_error  # its input (task 4) failed
    assert done[6].is_error and "does not list" in done[6].output


def test_a_json_payload_shaped_like_a_reference_is_argument_names_not_a_reference():
    parser = PlanParser()
    (task,) = parser.feed('1. {"search": {"$ref": 99}}\n') + parser.finish()
    assert task.deps == [] and task.kwargs == {"$ref": 99}
    assert resolve_kwargs(task.kwargs, {}) == {"$ref": 99}

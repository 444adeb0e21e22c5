"""A plan with no tasks is said so: in the log, in the summary and in the events."""

from __future__ import annotations

import logging

from llm_compiler import LLMCompilerWorkflow, PlanEvent
from llm_compiler.testing import ScriptedLLM


def search(query: str) -> str:
    """Look a topic up."""
    return query


async def test_an_unnumbered_plan_is_logged_and_summarized_as_no_tasks(caplog):
    llm = ScriptedLLM(
        ['search("Oslo")\njoin()<END_OF_PLAN>', "Thought: nothing.\nAction: Finish(no idea)"]
    )
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, max_replans=0)
    with caplog.at_level(logging.WARNING, logger="llm_compiler.engine.planner"):
        handler = wf.run(user_msg="Oslo?")
        plans = [ev async for ev in handler.stream_events() if isinstance(ev, PlanEvent)]
        out = await handler
    (record,) = caplog.records
    assert "the plan of round 0 has no tasks" in record.getMessage()
    assert "'search(\"Oslo\")'" in record.getMessage()  # what the model wrote instead
    assert "`1. tool(arguments)`" in record.getMessage()
    (round0,) = out.summary.rounds
    assert round0.no_tasks and "The plan has no tasks." in round0.errors
    assert out.summary.model_dump()["rounds"][0]["no_tasks"] is True
    assert plans[-1].complete and plans[-1].tasks == []


async def test_a_plan_with_tasks_is_not_flagged(caplog):
    llm = ScriptedLLM(
        ['1. search("Oslo")\n2. join()<END_OF_PLAN>', "Thought: found.\nAction: Finish(Oslo)"]
    )
    with caplog.at_level(logging.WARNING, logger="llm_compiler.engine.planner"):
        out = await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="Oslo?")
    assert not caplog.records and not out.summary.rounds[0].no_tasks

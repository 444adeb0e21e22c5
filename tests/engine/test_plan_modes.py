"""Plan only, and plan approval (approve, edit, reject), in process."""

from __future__ import annotations

from llama_index.core.agent.workflow import AgentStream

from llm_compiler import (
    CompiledPlan,
    LLMCompilerWorkflow,
    PlanApprovalRequest,
    PlanApprovalResponse,
    TaskReady,
    TaskResult,
)
from llm_compiler.testing import ScriptedLLM, events_of

PLAN = '1. search("a")\n2. search("b")\n3. nosuch(1)\n4. join()'
FINISH = "Thought: ok.\nAction: Finish({})"
calls: list[str] = []


async def search(query: str) -> str:
    """Look a topic up."""
    calls.append(query)
    return f"<{query}>"


async def test_plan_only_compiles_without_running_anything():
    calls.clear()
    llm = ScriptedLLM([PLAN])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    plan = await wf.compile_plan("a and b?")
    assert isinstance(plan, CompiledPlan) and not plan.valid
    assert [(t.id, t.tool, t.kwargs, t.error is None) for t in plan.tasks] == [
        (1, "search", {"query": "a"}, True),
        (2, "search", {"query": "b"}, True),
        (3, "nosuch", {}, False),
    ]
    assert plan.join_id == 4 and calls == [] and len(llm.calls) == 1  # no joiner call


async def approval_run(response: dict, *replies: str):
    calls.clear()
    llm = ScriptedLLM([PLAN.replace("3. nosuch(1)\n4.", "3."), *replies])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    handler = wf.run(user_msg="a and b?", mode="approve")
    events = []
    async for ev in handler.stream_events():
        if isinstance(ev, AgentStream):
            continue
        events.append(ev)
        if isinstance(ev, PlanApprovalRequest):
            assert not events_of(events, TaskReady) and calls == []  # nothing ran before approval
            assert [t.id for t in ev.plan.tasks] == [1, 2] and ev.plan.valid
            handler.ctx.send_event(ev.respond(**response))
    return await handler, events


async def test_approved_plan_runs():
    out, events = await approval_run({}, FINISH.format("A and B"))
    assert str(out) == "A and B" and sorted(calls) == ["a", "b"]
    assert len(events_of(events, TaskResult)) == 2


async def test_edited_plan_runs_instead():
    edit = {"action": "edit", "plan_text": '1. search("c")\n2. join()'}
    out, events = await approval_run(edit, FINISH.format("C"))
    assert str(out) == "C" and calls == ["c"]
    assert [r.output for r in events_of(events, TaskResult)] == ["<c>"]


async def test_rejected_plan_ends_the_run():
    out, events = await approval_run({"action": "reject", "reason": "too costly"})
    assert str(out) == "The plan was rejected: too costly" and calls == []
    assert not events_of(events, TaskReady)


async def test_a_response_naming_another_run_or_round_is_ignored():
    """A late or forged verdict (wrong run, wrong round) approves nothing; the right one does."""
    calls.clear()
    llm = ScriptedLLM([PLAN.replace("3. nosuch(1)\n4.", "3."), FINISH.format("A and B")])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    handler = wf.run(user_msg="a and b?", mode="approve")
    async for ev in handler.stream_events():
        if isinstance(ev, PlanApprovalRequest):
            forged = {"action": "edit", "plan_text": '1. search("forged")\n2. join()'}
            handler.ctx.send_event(PlanApprovalResponse(run_id="other", round=ev.round, **forged))
            handler.ctx.send_event(
                PlanApprovalResponse(run_id=ev.run_id, round=ev.round + 1, **forged)
            )
            handler.ctx.send_event(ev.respond())
    assert str(await handler) == "A and B" and sorted(calls) == ["a", "b"]


async def test_a_second_verdict_changes_nothing():
    calls.clear()
    llm = ScriptedLLM([PLAN.replace("3. nosuch(1)\n4.", "3."), FINISH.format("A and B")])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm)
    handler = wf.run(user_msg="a and b?", mode="approve")
    async for ev in handler.stream_events():
        if isinstance(ev, PlanApprovalRequest):
            handler.ctx.send_event(ev.respond())
            handler.ctx.send_event(ev.respond())  # a double click
            handler.ctx.send_event(ev.respond(action="reject"))  # too late
    out = await handler
    assert str(out) == "A and B" and sorted(calls) == ["a", "b"]  # each task ran once
    state = await handler.ctx.store.get_state()
    assert state.verdict is not None and state.verdict.action == "approve"

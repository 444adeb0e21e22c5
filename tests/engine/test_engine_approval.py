"""Plan approval and plan_only: the planner call is accounted for on every verdict, and an
edited plan replaces the streamed one for every consumer (in process, on the wire, AG-UI)."""

from __future__ import annotations

import json
from typing import Any

from llama_index.core.agent.workflow import AgentStream
from workflows.context.serializers import JsonSerializer

from llm_compiler import (
    CompiledPlan,
    LLMCompilerWorkflow,
    PlanApprovalRequest,
    PlanEvent,
    TaskResult,
)
from llm_compiler.serving.agui import AGUITranslator
from llm_compiler.serving.mermaid import run_graph
from llm_compiler.testing import ScriptedLLM

PLAN = '1. search("a")\n2. search("b")\n3. join()'
FINISH = "Thought: ok.\nAction: Finish(done)"


async def search(query: str) -> str:
    """Look a topic up."""
    return f"<{query}>"


async def approval_run(verdict: dict[str, Any], *replies: str) -> tuple[Any, list[Any], Any]:
    llm = ScriptedLLM([PLAN, *replies])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, timeout=10)
    handler = wf.run(user_msg="a and b?", mode="approve")
    events: list[Any] = []
    async for ev in handler.stream_events():
        if isinstance(ev, AgentStream):
            continue
        events.append(ev)
        if isinstance(ev, PlanApprovalRequest):
            handler.ctx.send_event(ev.respond(**verdict))
    out = await handler
    return out, events, await handler.ctx.store.get_state()


def planner_call(events: list[Any]) -> Any:
    (held,) = [e for e in events if isinstance(e, PlanEvent) and e.complete and e.llm_call]
    assert held.llm_call.prompt_tokens > 0
    return held.llm_call


async def test_a_rejected_plan_reports_the_planner_call():
    out, events, state = await approval_run({"action": "reject", "reason": "no"})
    call = planner_call(events)
    assert out.summary.llm_calls == [call] and state.llm_calls == [call]
    assert out.summary.usage.calls == 1
    assert out.summary.prompt_tokens == out.summary.usage.prompt_tokens == call.prompt_tokens
    assert out.summary.completion_tokens == call.completion_tokens > 0


async def test_an_edited_plan_keeps_the_planner_call():
    edit = {"action": "edit", "plan_text": '1. search("c")\n2. join()'}
    out, events, _ = await approval_run(edit, FINISH)
    call = planner_call(events)
    assert [c.phase for c in out.summary.llm_calls] == ["planner", "joiner"]
    assert out.summary.llm_calls[0] == call
    assert out.summary.usage.calls == 2 == out.summary.rounds[0].usage.calls
    assert out.summary.prompt_tokens == sum(c.prompt_tokens for c in out.summary.llm_calls)


async def test_an_approved_plan_counts_its_planner_call_once():
    out, events, _ = await approval_run({}, FINISH)
    assert [c.phase for c in out.summary.llm_calls] == ["planner", "joiner"]
    assert out.summary.llm_calls[0] == planner_call(events)


async def test_plan_only_reports_its_usage():
    llm = ScriptedLLM([PLAN])
    wf = LLMCompilerWorkflow(tools=[search], llm=llm, timeout=10)
    handler = wf.run(user_msg="a and b?", mode="plan_only")
    plan = await handler
    assert isinstance(plan, CompiledPlan) and plan.llm_call is not None
    assert plan.llm_call.phase == "planner" and plan.llm_call.prompt_tokens > 0
    assert (await handler.ctx.store.get_state()).llm_calls == [plan.llm_call]


def wire(events: list[Any]) -> list[Any]:
    """The events as a client of the workflow server gets them (serialized, read back)."""
    serializer = JsonSerializer()
    return [serializer.deserialize(serializer.serialize(e)) for e in events]


def patched(state: dict[str, Any], ops: list[dict[str, Any]]) -> None:
    """Apply JSON Patch `ops` (add, replace, remove of object members) to `state`."""
    for op in ops:
        *parents, key = [p for p in op["path"].split("/")[1:]]
        node = state
        for p in parents:
            node = node[p]
        if op["op"] == "remove":
            del node[key]
        elif key == "-":
            node.append(op["value"])
        else:
            node[key] = op["value"]


async def test_an_edited_plan_replaces_the_streamed_one():
    edit = {"action": "edit", "plan_text": '1. search("c")\n2. join()'}
    out, events, _ = await approval_run(edit, FINISH)
    assert str(out) == "done"
    events = wire(events)
    i = next(i for i, e in enumerate(events) if isinstance(e, PlanApprovalRequest))
    before = [e for e in events[:i] if isinstance(e, PlanEvent) and e.complete]
    after = [e for e in events[i:] if isinstance(e, PlanEvent) and e.complete]
    assert [t.text for t in before[0].tasks] == ['1. search("a")', '2. search("b")']
    assert not before[0].replaces
    (edited,) = after
    assert edited.replaces and [t.text for t in edited.tasks] == ['1. search("c")']
    # AG-UI: the translator's state, and the state a client builds from its patches
    translator = AGUITranslator("thread", "run")
    snapshot = translator.start("a and b?")[1].snapshot
    for ev in events:
        for out_ev in translator.translate(ev):
            if type(out_ev).__name__ == "StateDeltaEvent":
                patched(snapshot, json.loads(out_ev.model_dump_json())["delta"])
    for state in (translator.state, snapshot):
        assert {k: (v["line"], v["state"]) for k, v in state["tasks"].items()} == {
            "1": ('1. search("c")', "done")
        }
    assert [r.output for r in events if isinstance(r, TaskResult)] == ["<c>"]
    # the Mermaid chart of the run, folded from the same events
    graph = run_graph(events)
    assert {i: (t.label, t.state) for i, t in graph.tasks.items()} == {
        1: ('1. search("c")', "done")
    }
    assert graph.joins == {0: 2}

"""LLMCompilerAgent standalone and inside AgentWorkflow."""

# No `from __future__ import annotations`: llama-index finds `ctx: Context` tool
# parameters by their evaluated annotation.

import asyncio
import time

import pytest
from llama_index.core.agent.workflow import (
    AgentInput,
    AgentOutput,
    AgentWorkflow,
    FunctionAgent,
    ToolCall,
    ToolCallResult,
)
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from workflows import Context

from llm_compiler import (
    CompilerStream,
    LLMCallError,
    LLMCompilerAgent,
    PlanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: done.\nAction: Finish({})"


async def lookup(query: str) -> str:
    """Look a topic up (0.2 s)."""
    await asyncio.sleep(0.2)
    return f"<{query}>"


async def note(ctx: Context, text: str) -> str:
    """Write a note into the team's shared state."""
    async with ctx.store.edit_state() as s:
        s["state"].setdefault("notes", []).append(text)
    return "noted"


def writer_script(messages, **kwargs):
    """A FunctionAgent that writes up what is in memory."""
    seen = " | ".join(m.content or "" for m in messages if m.role.value != "system")
    return ChatMessage(role="assistant", content=f"WRITER saw: {seen}")


def router_script(messages, **kwargs):
    """A FunctionAgent that hands every question to the researcher."""
    if any(m.role.value == "tool" for m in messages):
        return ChatMessage(role="assistant", content="(router done)")
    return ChatMessage(
        role="assistant",
        blocks=[
            ToolCallBlock(
                tool_call_id="h1",
                tool_name="handoff",
                tool_kwargs={"to_agent": "researcher", "reason": "needs lookups"},
            )
        ],
    )


def researcher(script, **kw) -> LLMCompilerAgent:
    return LLMCompilerAgent(
        name="researcher",
        description="Looks things up in parallel.",
        tools=[lookup, note],
        llm=ScriptedLLM(script),
        **kw,
    )


async def collect(handler):
    events = [e async for e in handler.stream_events()]
    return await handler, events


async def test_standalone_run_returns_agent_output():
    agent = researcher(['1. lookup("a")\n2. lookup("b")\n3. join()', FINISH.format("a and b")])
    out, events = await collect(agent.run(user_msg="a and b?"))
    assert isinstance(out, AgentOutput) and str(out) == "a and b"
    assert out.current_agent_name == "researcher"
    kinds = {type(e) for e in events}
    assert {
        AgentInput,
        CompilerStream,
        AgentOutput,
        ToolCall,
        ToolCallResult,
        PlanEvent,
        TaskReady,
        TaskResult,
    } <= kinds
    results = [e for e in events if isinstance(e, ToolCallResult)]
    assert sorted(r.tool_output.content for r in results) == ["<a>", "<b>"]


async def test_router_hands_off_to_the_compiler_whose_calls_and_results_carry_their_arguments():
    script = ['1. lookup("x")\n2. lookup("y")\n3. join()', FINISH.format("x and y found")]
    team = AgentWorkflow(
        agents=[
            FunctionAgent(
                name="router",
                description="Routes questions.",
                llm=MockFunctionCallingLLM(response_generator=router_script),
                can_handoff_to=["researcher"],
            ),
            researcher(script),
        ],
        root_agent="router",
        timeout=30,
    )
    started = time.perf_counter()
    handler = team.run(user_msg="what are x and y?")
    out, events = await collect(handler)
    elapsed = time.perf_counter() - started
    assert str(out) == "x and y found" and out.current_agent_name == "researcher"
    # The two 0.2 s lookups ran in parallel inside the team.
    tool_results = [e for e in events if isinstance(e, TaskResult)]
    starts = sorted(e.started_at for e in tool_results)
    ends = sorted(e.finished_at for e in tool_results)
    assert starts[1] < ends[0]
    assert elapsed < 5
    calls = [e for e in events if isinstance(e, ToolCall) and e.tool_name == "lookup"]
    assert sorted(c.tool_kwargs["query"] for c in calls) == ["x", "y"]
    results = [e for e in events if isinstance(e, ToolCallResult) and e.tool_name == "lookup"]
    assert sorted((r.tool_kwargs["query"], r.tool_output.content) for r in results) == [
        ("x", "<x>"),
        ("y", "<y>"),
    ]
    assert any(isinstance(e, AgentInput) and e.current_agent_name == "researcher" for e in events)
    memory = await handler.ctx.store.get("memory")
    assert (await memory.aget())[-1].content == "x and y found"


async def test_compiler_hands_off_to_a_writer_with_its_results():
    script = ['1. lookup("facts")\n2. handoff(to_agent="writer", reason="write up $1")\n3. join()']
    llm = ScriptedLLM(script)
    team = AgentWorkflow(
        agents=[
            LLMCompilerAgent(
                name="researcher",
                description="Looks things up.",
                tools=[lookup],
                llm=llm,
                can_handoff_to=["writer"],
            ),
            FunctionAgent(
                name="writer",
                description="Writes answers.",
                llm=MockFunctionCallingLLM(response_generator=writer_script),
            ),
        ],
        root_agent="researcher",
        timeout=30,
    )
    handler = team.run(user_msg="write about facts")
    out, events = await collect(handler)
    assert out.current_agent_name == "writer"
    assert "Results gathered before the handoff" in str(out) and "<facts>" in str(out)
    assert len(llm.calls) == 1  # the handoff ended the compiler's turn: no joiner call
    handoff_calls = [e for e in events if isinstance(e, ToolCall) and e.tool_name == "handoff"]
    assert handoff_calls[-1].tool_kwargs == {"to_agent": "writer", "reason": "write up <facts>"}
    planner_prompt = llm.calls[0].messages[0].content
    assert "handoff(to_agent: str, reason: str)" in planner_prompt and "writer" in planner_prompt


async def test_answer_lands_in_shared_memory_state_reaches_ctx_tools_and_runs_continue():
    script = [
        '1. note("hello")\n2. lookup("a")\n3. join()',
        FINISH.format("first answer"),
        '1. lookup("b")\n2. join()',
        FINISH.format("second answer"),
    ]
    agent = researcher(script)
    team = AgentWorkflow(
        agents=[agent], root_agent="researcher", initial_state={"notes": []}, timeout=30
    )
    ctx = Context(team)
    out = await team.run(user_msg="first question", ctx=ctx)
    assert str(out) == "first answer"
    assert (await ctx.store.get("state"))["notes"] == ["hello"]
    memory = await ctx.store.get("memory")
    contents = [m.content for m in await memory.aget()]
    assert contents[-1] == "first answer" and "first question" in contents[-2]
    out = await team.run(user_msg="second question", ctx=ctx)
    assert str(out) == "second answer"
    second_plan = agent.llm.calls[2]
    history = [m.content for m in second_plan.messages[1:-1]]
    assert "first answer" in history


async def test_compiler_llm_failure_is_a_clear_error_of_the_team_run():
    team = AgentWorkflow(
        agents=[researcher([ConnectionError("model server down")])],
        root_agent="researcher",
        timeout=30,
    )
    with pytest.raises(LLMCallError, match="planner LLM call of round 0 failed"):
        await team.run(user_msg="q")

"""ChainOfAbstractionWorkflow and CoAAgent end to end, on scripted models."""

# No `from __future__ import annotations`: llama-index reads tool annotations at runtime.

import asyncio

import pytest
from llama_index.core.agent.workflow import AgentStream, AgentWorkflow, ToolCall

from llm_compiler import (
    ChainOfAbstractionWorkflow,
    CoAAgent,
    CompilerStream,
    ConfigurationError,
    JoinEvent,
    LLMCompilerWorkflow,
    PlanEvent,
    TaskReady,
    TaskResult,
)
from llm_compiler.testing import ScriptedLLM, events_of, run_and_collect


async def slow(x: int) -> int:
    """Return x after 0.2 s."""
    await asyncio.sleep(0.2)
    return x


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def broken(q: str) -> str:
    """Always fails."""
    raise ValueError(f"no data for {q}")


async def test_independent_calls_run_in_parallel():
    calls = ", ".join(f"[FUNC slow({i}) = y{i}]" for i in range(1, 6))
    llm = ScriptedLLM([f"The values are {calls}.", "They are 1 to 5."])
    out, events = await run_and_collect(
        ChainOfAbstractionWorkflow(tools=[slow], llm=llm), tokens=True, user_msg="q"
    )
    results = events_of(events, TaskResult)
    assert sorted(r.output for r in results) == [1, 2, 3, 4, 5]
    span = max(r.finished_at for r in results) - min(r.started_at for r in results)
    assert span < 0.9  # five 0.2 s calls overlap (one after another: at least 1.0 s)
    assert str(out) == "They are 1 to 5."
    assert "[FUNC slow(3) = 3]" in llm.calls[1].prompt


class GatedLLM(ScriptedLLM):
    """Holds its stream after the first call's `]` until that call has started."""

    started: asyncio.Event | None = None

    async def on_chunk(self, index, chunk):
        if index > 0 and "after" in chunk:
            await asyncio.wait_for(self.started.wait(), 5)


async def test_a_call_starts_while_the_reasoning_still_streams():
    started = asyncio.Event()

    async def probe(q: str) -> str:
        """Records that it started."""
        started.set()
        return q.upper()

    llm = GatedLLM(['It is [FUNC probe("a") = y1] and after that y1.', "A."])
    llm.started = started
    out, events = await run_and_collect(
        ChainOfAbstractionWorkflow(tools=[probe], llm=llm), tokens=True, user_msg="q"
    )
    assert str(out) == "A."
    kinds = [type(e) for e in events if not isinstance(e, AgentStream)]
    complete = next(i for i, e in enumerate(events) if isinstance(e, PlanEvent) and e.complete)
    ready = next(i for i, e in enumerate(events) if isinstance(e, TaskReady))
    assert ready < complete and TaskResult in kinds


async def test_failures_are_filled_in_and_dependents_skipped():
    llm = ScriptedLLM(
        ['A [FUNC broken("x") = y1], B [FUNC add(y1, 1) = y2], C [FUNC add(2, 3) = y3].', "C=5."]
    )
    out, events = await run_and_collect(
        ChainOfAbstractionWorkflow(tools=[broken, add], llm=llm), tokens=True, user_msg="q"
    )
    results = {r.task_id: r for r in events_of(events, TaskResult)}
    assert results[1].is_error and not results[1].skipped
    assert results[2].skipped and results[3].output == 5
    prompt = llm.calls[1].prompt
    assert 'A [FUNC broken("x") = Error: ValueError: no data for x]' in prompt
    assert "B [FUNC add(Error: ValueError: no data for x, 1) = Skipped:" in prompt
    assert "C [FUNC add(2, 3) = 5]" in prompt
    assert out.summary.dialect == "coa" and str(out) == "C=5."


async def test_a_reasoning_without_calls_is_the_answer_in_one_llm_call():
    llm = ScriptedLLM(["Reasoning: The capital of France is Paris."])
    out, events = await run_and_collect(
        ChainOfAbstractionWorkflow(tools=[add], llm=llm), tokens=True, user_msg="q"
    )
    assert str(out) == "The capital of France is Paris."
    assert len(llm.calls) == 1
    assert len(events_of(events, JoinEvent)) == 1
    assert all(e.phase == "plan" for e in events_of(events, CompilerStream))


async def test_events_are_the_same_kinds_as_an_llmcompiler_run():
    coa = ScriptedLLM(["[FUNC add(1, 2) = y1] and [FUNC add(y1, 3) = y2]", "6"])
    plan = "1. add(1, 2)\n2. add($1, 3)\n3. join()<END_OF_PLAN>"
    llmc = ScriptedLLM([plan, "Thought: ok.\nAction: Finish(6)"])
    _, coa_events = await run_and_collect(
        ChainOfAbstractionWorkflow(tools=[add], llm=coa), tokens=True, user_msg="q"
    )
    _, llmc_events = await run_and_collect(
        LLMCompilerWorkflow(tools=[add], llm=llmc), tokens=True, user_msg="q"
    )
    assert {type(e) for e in coa_events} == {type(e) for e in llmc_events}
    assert [r.output for r in events_of(coa_events, TaskResult)] == [3, 6]


async def test_completion_models_get_one_prompt():
    llm = ScriptedLLM(["It is [FUNC add(2, 2) = y1].", " Four."], chat=False)
    out, _ = await run_and_collect(
        ChainOfAbstractionWorkflow(tools=[add], llm=llm), tokens=True, user_msg="2+2?"
    )
    assert str(out) == "Four."
    assert [c.kind for c in llm.calls] == ["complete", "complete"]
    assert llm.calls[0].prompt.endswith("Question: 2+2?\nReasoning:")
    assert "def add(a: int, b: int):" in llm.calls[0].prompt
    assert llm.calls[1].prompt.endswith("Reasoning: It is [FUNC add(2, 2) = 4].\nAnswer:")


async def test_templates_replace_the_prompts():
    llm = ScriptedLLM(["[FUNC add(1, 1) = y1]", "two"])
    wf = ChainOfAbstractionWorkflow(
        tools=[add],
        llm=llm,
        reasoning_template="F:{functions}|Q:{question}",
        answer_template="Q:{question}|R:{prev_reasoning}",
    )
    out, _ = await run_and_collect(wf, tokens=True, user_msg="1+1?")
    assert llm.calls[0].messages[-1].content.startswith("F:def add(a: int, b: int):")
    assert llm.calls[1].messages[-1].content == "Q:1+1?|R:[FUNC add(1, 1) = 2]"
    assert str(out) == "two"


def test_bad_templates_and_replans_are_configuration_errors():
    with pytest.raises(ConfigurationError, match="must use only"):
        ChainOfAbstractionWorkflow(tools=[add], reasoning_template="{tools} {question}")
    with pytest.raises(ConfigurationError, match="does not replan"):
        ChainOfAbstractionWorkflow(tools=[add], max_replans=2)


async def test_coa_agent_in_an_agent_workflow():
    llm = ScriptedLLM(["[FUNC slow(1) = y1] and [FUNC slow(2) = y2]", "1 and 2"])
    agent = CoAAgent(name="coa", description="Computes.", tools=[slow], llm=llm)
    assert agent.config.max_replans == 0
    team = AgentWorkflow(agents=[agent], root_agent="coa", timeout=30)
    handler = team.run(user_msg="values?")
    events = [ev async for ev in handler.stream_events()]
    out = await handler
    assert str(out) == "1 and 2"
    assert sorted(c.tool_kwargs["x"] for c in events_of(events, ToolCall)) == [1, 2]
    results = events_of(events, TaskResult)
    assert max(r.started_at for r in results) < min(r.finished_at for r in results)


async def test_coa_agent_hands_off_with_an_inline_call():
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.llms import ChatMessage
    from llama_index.core.llms.mock import MockFunctionCallingLLM

    def writer(messages, **kwargs):
        return ChatMessage(role="assistant", content="WRITER: " + (messages[-1].content or ""))

    llm = ScriptedLLM(
        ['It is [FUNC slow(7) = y1]; [FUNC handoff(to_agent="writer", reason="write y1")]']
    )
    coa = CoAAgent(name="coa", description="Computes.", tools=[slow], llm=llm)
    coa.can_handoff_to = ["writer"]
    team = AgentWorkflow(
        agents=[
            coa,
            FunctionAgent(
                name="writer",
                description="Writes.",
                llm=MockFunctionCallingLLM(response_generator=writer),
            ),
        ],
        root_agent="coa",
        timeout=30,
    )
    out = await team.run(user_msg="seven?")
    assert out.current_agent_name == "writer" and "-> 7" in str(out)
    assert len(llm.calls) == 1  # the handoff ended the CoA turn without an answer call

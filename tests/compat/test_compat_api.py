"""The legacy constructors' parameters and the AgentRunner chat surface."""

# No `from __future__ import annotations`: llama-index reads tool annotations at runtime.

import asyncio

import pytest
from llama_index.core.base.response.schema import Response
from llama_index.core.chat_engine.types import StreamingAgentChatResponse
from llama_index.core.prompts import PromptTemplate

from llm_compiler import ConfigurationError
from llm_compiler.compat import CoAAgentWorker, LLMCompilerAgentPack, LLMCompilerAgentWorker
from llm_compiler.testing import ScriptedLLM

PLAN = "1. add(1, 2)\n2. join()<END_OF_PLAN>"


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def finish(answer):
    return f"Thought: done.\nAction: Finish({answer})"


def test_from_tools_honours_what_the_legacy_one_dropped():
    llm = ScriptedLLM(
        [
            "1. add(1, 2)\nSTOP HERE 2. add(3, 4)\n3. join()",
            "Thought: more.\nAction: Replan(need more)",
        ]
    )
    worker = LLMCompilerAgentWorker.from_tools(
        [add],
        llm=llm,
        planner_example_prompt_str="Question: EXAMPLE\n1. add(5, 6)\n2. join()<END_OF_PLAN>",
        stop=["STOP HERE"],
        joiner_prompt=PromptTemplate("JOIN {query_str} WITH {context_str}"),
        max_replans=0,
    )
    response = worker.as_agent().chat("q?")
    planner_prompt, joiner = llm.calls[0].prompt, llm.calls[1].messages[-1].content
    assert "Question: EXAMPLE" in planner_prompt
    assert [s.raw_output for s in response.sources] == [3]  # nothing after the stop ran
    context = "1. add(1, 2)\nObservation: 3\nPlan error: The plan did not end with join()."
    assert joiner == f"JOIN q? WITH {context}"
    assert str(response) == "more."  # max_replans=0: the last round answers with its thought


def test_engine_options_pass_and_unknown_ones_warn():
    with pytest.warns(DeprecationWarning, match="colour=...\\) is not a parameter"):
        worker = LLMCompilerAgentWorker.from_tools([add], llm=ScriptedLLM([]), colour="red")
    assert "colour" not in worker.options
    worker = LLMCompilerAgentWorker.from_tools([add], llm=ScriptedLLM([]), tool_timeout=3)
    assert worker.build_workflow().config.tool_timeout == 3


def test_parameters_without_meaning_warn():
    llm = ScriptedLLM([])
    with pytest.warns(DeprecationWarning, match="output_parser=...\\) is not used"):
        CoAAgentWorker(llm, output_parser=object(), tools=[add])
    with pytest.warns(DeprecationWarning, match="callback_manager=...\\) only reaches"):
        LLMCompilerAgentWorker([add], llm, callback_manager=llm.callback_manager)
    with pytest.warns(DeprecationWarning, match="AgentRunner\\(delete_task_on_finish"):
        LLMCompilerAgentWorker([add], llm).as_agent(delete_task_on_finish=True)
    with pytest.raises(ValueError, match="Either tools or tool_retriever"):
        CoAAgentWorker(llm)


def test_bad_joiner_prompt_is_a_configuration_error():
    with pytest.raises(ConfigurationError, match="only \\{query_str\\} and \\{context_str\\}"):
        LLMCompilerAgentWorker([add], ScriptedLLM([]), joiner_prompt="{question}")


def test_coa_worker_uses_the_given_templates():
    llm = ScriptedLLM(["[FUNC add(1, 1) = y1]", "two"])
    worker = CoAAgentWorker.from_tools(
        tools=[add],
        llm=llm,
        reasoning_prompt_template="Functions:\n{functions}\nQ: {question}",
        refine_reasoning_prompt_template="Q: {question}\nPrevious: {prev_reasoning}",
    )
    response = worker.as_agent().chat("1+1?")
    assert llm.calls[0].messages[-1].content == (
        'Functions:\ndef add(a: int, b: int):\n    """Add two numbers."""\nQ: 1+1?'
    )
    assert llm.calls[1].messages[-1].content == "Q: 1+1?\nPrevious: [FUNC add(1, 1) = 2]"
    assert str(response) == "two"


def test_history_holds_each_turn_once_and_reset_clears_it():
    llm = ScriptedLLM([PLAN, finish("3"), "The sum is [FUNC add(2, 2) = y1].", "4"])
    agent = LLMCompilerAgentWorker.from_tools([add], llm=llm).as_agent()
    agent.chat("first")
    coa = CoAAgentWorker.from_tools(tools=[add], llm=llm).as_agent(chat_history=agent.chat_history)
    coa.chat("second")
    assert [(m.role.value, m.content) for m in coa.chat_history] == [
        ("user", "first"),
        ("assistant", "3"),
        ("user", "second"),
        ("assistant", "4"),
    ]
    assert "first" in llm.calls[2].prompt  # the conversation reached the reasoning prompt
    coa.reset()
    assert coa.chat_history == []


def test_query_answers_outside_the_conversation():
    llm = ScriptedLLM([PLAN, finish("3")])
    agent = LLMCompilerAgentWorker.from_tools([add], llm=llm).as_agent()
    response = agent.query("1+2?")
    assert isinstance(response, Response) and str(response) == "3"
    assert agent.chat_history == []


class TokenByToken(ScriptedLLM):
    """Gives the event loop a turn between chunks, as a network stream does."""

    async def on_chunk(self, index, chunk):
        await asyncio.sleep(0)


def test_sync_stream_chat():
    llm = TokenByToken(["[FUNC add(20, 22) = y1]", "The answer is 42."])
    agent = CoAAgentWorker.from_tools(tools=[add], llm=llm).as_agent()
    response = agent.stream_chat("20+22?")
    assert isinstance(response, StreamingAgentChatResponse)
    tokens = list(response.response_gen)
    assert len(tokens) > 1 and "".join(tokens).strip() == "The answer is 42."
    assert str(response) == "The answer is 42."
    assert [s.raw_output for s in response.sources] == [42]
    assert [m.content for m in agent.chat_history] == ["20+22?", "The answer is 42."]


async def test_async_methods_and_the_sync_ones_inside_a_loop():
    llm = ScriptedLLM([PLAN, finish("3"), PLAN, finish("three")])
    agent = LLMCompilerAgentPack([add], llm=llm, agent_worker_kwargs={"verbose": False}).agent
    response = await agent.achat("1+2?")
    assert str(response) == "3"
    streaming = await agent.astream_chat("again?")
    assert "".join([t async for t in streaming.async_response_gen()]) == "three"
    assert [s.raw_output for s in streaming.sources] == [3]
    with pytest.raises(ConfigurationError, match="use `await agent.achat"):
        agent.chat("inside a loop")
    with pytest.raises(ConfigurationError, match="use `await agent.astream_chat"):
        agent.stream_chat("inside a loop")
    assert len(agent.chat_history) == 4

"""The legacy packs' usage snippets, unchanged except for the import line."""

# No `from __future__ import annotations`: llama-index reads tool annotations at runtime.

import asyncio
import time

import pytest
from llama_index.core.chat_engine.types import AgentChatResponse
from llama_index.core.tools import FunctionTool

from llm_compiler.compat import AgentRunner, CoAAgentPack, LLMCompilerAgentWorker
from llm_compiler.testing import ScriptedLLM

PLAN = "Thought: multiply first.\n1. multiply(121, 3)\n2. add($1, 42)\n3. join()<END_OF_PLAN>"
FINISH = "Thought: 363 + 42 is 405.\nAction: Finish(405)"


def multiply(a: int, b: int) -> int:
    """Multiple two integers and returns the result integer"""
    return a * b


def add(a: int, b: int) -> int:
    """Add two integers and returns the result integer"""
    return a + b


def test_llmcompiler_worker_as_agent_chat(capsys):
    llm = ScriptedLLM([PLAN, FINISH])
    multiply_tool = FunctionTool.from_defaults(fn=multiply)
    add_tool = FunctionTool.from_defaults(fn=add)
    tools = [multiply_tool, add_tool]

    agent_worker = LLMCompilerAgentWorker.from_tools(tools, llm=llm, verbose=True)
    agent = agent_worker.as_agent()
    response = agent.chat("What is (121 * 3) + 42?")

    assert isinstance(response, AgentChatResponse)
    assert str(response) == "405"
    assert [(s.tool_name, s.raw_output, s.is_error) for s in response.sources] == [
        ("multiply", 363, False),
        ("add", 405, False),
    ]
    assert response.sources[1].raw_input == {"kwargs": {"a": 363, "b": 42}}
    out = capsys.readouterr().out
    assert "> Plan (round 0): Thought: multiply first.\n1. multiply(121, 3)" in out
    assert "> Running task 2: add(a=363, b=42)" in out
    assert "Ran task 2: add. Observation: 405" in out
    assert "> Thought: 363 + 42 is 405.\n> Answer: 405" in out
    assert [m.content for m in agent.chat_history] == ["What is (121 * 3) + 42?", "405"]


# The snippet passes callback_manager= to both, which warns that it does little here
# (test_compat_api checks the warnings); here the snippet runs as users wrote it.
@pytest.mark.filterwarnings("ignore:LLMCompilerAgentWorker\\(callback_manager=:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:AgentRunner\\(callback_manager=:DeprecationWarning")
def test_the_readme_agent_runner_snippet():
    llm = ScriptedLLM([PLAN, FINISH])
    tools = [FunctionTool.from_defaults(fn=multiply), FunctionTool.from_defaults(fn=add)]
    callback_manager = llm.callback_manager

    agent_worker = LLMCompilerAgentWorker.from_tools(
        tools, llm=llm, verbose=True, callback_manager=callback_manager
    )
    agent = AgentRunner(agent_worker, callback_manager=callback_manager)

    response = agent.chat("What is (121 * 3) + 42?")
    assert str(response) == "405"


def test_coa_pack_run(capsys):
    llm = ScriptedLLM(["1245 + 4321 is [FUNC add(1245, 4321) = y1].", "1245 + 4321 = 5566."])
    pack = CoAAgentPack(tools=[add], llm=llm)
    response = pack.run("What is 1245 + 4321?")
    assert str(response) == "1245 + 4321 = 5566."
    assert [s.raw_output for s in response.sources] == [5566]
    assert "1245 + 4321 is [FUNC add(1245, 4321) = 5566]." in llm.calls[1].prompt
    out = capsys.readouterr().out
    assert "==== Available Parsed Functions ====\ndef add(a: int, b: int):" in out
    assert "==== Generated Chain of Abstraction ====\n1245 + 4321 is [FUNC add" in out
    assert "==== Executing add with inputs a=1245, b=4321 ====" in out
    assert set(pack.get_modules()) == {"llm", "callback_manager", "agent_worker", "agent"}


def test_coa_pack_runs_independent_calls_in_parallel():
    async def slow(x: int) -> int:
        """Return x after 0.2 s."""
        await asyncio.sleep(0.2)
        return x

    calls = " ".join(f"[FUNC slow({i}) = y{i}]" for i in range(1, 6))
    pack = CoAAgentPack(tools=[slow], llm=ScriptedLLM([calls, "1 to 5"]))
    started = time.perf_counter()
    response = pack.run("values?")
    elapsed = time.perf_counter() - started
    assert str(response) == "1 to 5"
    spans = [(s.raw_output, s.is_error) for s in response.sources]
    assert sorted(spans) == [(i, False) for i in range(1, 6)]
    assert elapsed < 0.9  # the legacy pack ran them one after another: 1.0 s of tools

"""A two-agent team: a router hands questions to the LLMCompiler researcher.

Shows ``LLMCompilerAgent`` inside llama-index's ``AgentWorkflow``: a handoff into the
compiler, its compiled tasks as the team's ``ToolCall``/``ToolCallResult`` events, and the
answer as the team's output.

Run: ``.venv/bin/python examples/agent_workflow.py "your question"``.

With ``OPENAI_API_KEY`` both agents run on OpenAI: the router is a real ``FunctionAgent``
that decides to hand off. Without it the researcher runs on the embedded local model, and
the router (which needs native function calling that the small local model lacks) is a
``FunctionAgent`` driven by a scripted function-calling LLM that always hands off.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence
from typing import Any

from llama_index.core.agent.workflow import (
    AgentOutput,
    AgentWorkflow,
    FunctionAgent,
    ToolCall,
    ToolCallResult,
)
from llama_index.core.base.llms.types import ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM

from llm_compiler import LLMCompilerAgent, LLMCompilerError
from llm_compiler.demo import tools as demo_tools
from llm_compiler.models.resolve import resolve_llm

QUESTION = "What are the capitals of France and Japan?"


def scripted_router(messages: Sequence[ChatMessage], **kwargs: Any) -> ChatMessage:
    """Stand-in router for offline runs: hand every question to the researcher."""
    return ChatMessage(
        role="assistant",
        blocks=[
            ToolCallBlock(
                tool_call_id="route-1",
                tool_name="handoff",
                tool_kwargs={"to_agent": "researcher", "reason": "it needs factual lookups"},
            )
        ],
    )


async def main(question: str) -> int:
    llm = resolve_llm()
    print(f"model: {llm.description}")
    async with llm:  # stops the embedded model's server at the end
        router_llm = (
            llm
            if llm.metadata.is_function_calling_model
            else MockFunctionCallingLLM(response_generator=scripted_router)
        )
        team = AgentWorkflow(
            agents=[
                FunctionAgent(
                    name="router",
                    description="Talks to the user and routes factual questions.",
                    system_prompt="Hand factual questions to the researcher.",
                    llm=router_llm,
                    can_handoff_to=["researcher"],
                ),
                LLMCompilerAgent(
                    name="researcher",
                    description="Answers factual questions with parallel lookups.",
                    tools=demo_tools.TOOLS,
                    llm=llm,
                    max_replans=1,
                    planner_examples=demo_tools.PLANNER_EXAMPLES,
                    joiner_examples=demo_tools.JOINER_EXAMPLES,
                ),
            ],
            root_agent="router",
            timeout=300,
        )
        handler = team.run(user_msg=question)
        async for ev in handler.stream_events():
            if isinstance(ev, ToolCall):
                print(f"  tool call    {ev.tool_name}({ev.tool_kwargs})")
            elif isinstance(ev, ToolCallResult):
                print(f"  tool result  {ev.tool_name} -> {str(ev.tool_output.content)[:80]}")
            elif isinstance(ev, AgentOutput) and not ev.tool_calls:
                print(f"[{ev.current_agent_name}] {ev.response.content}")
        result = await handler
    print(f"\nanswer ({result.current_agent_name}): {result}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(asyncio.run(main(" ".join(sys.argv[1:]) or QUESTION)))
    except LLMCompilerError as e:
        print(f"error: {e.message}", file=sys.stderr)
        sys.exit(2)

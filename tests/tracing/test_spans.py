"""The span tree of a scripted run, as OpenInference exports it to OpenTelemetry."""

from __future__ import annotations

import asyncio

import pytest

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.engine.cache import MemoryCache
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tracing import ModelPrice

from .conftest import Tree

PLAN_1 = (
    'Thought: both at once\n1. search("a")\n2. search("b")\n3. boom("c")\n'
    "4. search($3)\n5. join()<END_OF_PLAN>"
)
REPLAN = "Thought: task 3 failed\nAction: Replan(try without boom)"
PLAN_2 = '6. search("d")\n7. join()<END_OF_PLAN>'
FINISH = "Thought: I have it.\nAction: Finish(a and b and d)"


def tools() -> list:
    """search (tasks 1 and 2 each wait until both run: they overlap) and boom (fails)."""
    started: set[str] = set()
    both = asyncio.Event()

    async def search(q: str) -> str:
        started.add(q)
        if q in "ab":
            if {"a", "b"} <= started:
                both.set()
            await asyncio.wait_for(both.wait(), 5)
        return f"found {q}"

    async def boom(q: str) -> str:
        raise ValueError(f"no {q}")

    return [search, boom]


async def traced_run(exporter, **options) -> tuple[object, Tree]:
    llm = ScriptedLLM([PLAN_1, REPLAN, PLAN_2, FINISH])
    wf = LLMCompilerWorkflow(tools=tools(), llm=llm, **options)
    result = await wf.run(user_msg="What are a, b and d?")
    return result, Tree(exporter.get_finished_spans())


async def test_span_tree_of_a_two_round_run(exporter):
    result, tree = await traced_run(exporter)
    assert len({s.context.trace_id for s in tree.spans}) == 1  # one trace per run
    run = tree.one("invoke_agent llm_compiler")
    assert tree.parent(run) is None
    assert tree.attr(run, "openinference.span.kind") == "AGENT"
    assert tree.attr(run, "gen_ai.operation.name") == "invoke_agent"
    assert tree.attr(run, "llm_compiler.run_id")
    assert tree.attr(run, "output.value") == "a and b and d"
    # The workflow's own spans nest in the run's.
    assert tree.parent(tree.one("LLMCompilerWorkflow.run")) is run

    rounds = tree.children(run, "llm_compiler.round")
    assert [tree.attr(r, "llm_compiler.round") for r in rounds] == [0, 1]
    assert [tree.attr(r, "llm_compiler.round.decision") for r in rounds] == ["replan", "finish"]
    assert tree.attr(rounds[0], "llm_compiler.round.replan_reason") == "try without boom"
    assert list(tree.attr(rounds[0], "llm_compiler.round.task_ids")) == [1, 2, 3, 4]

    for number, round in enumerate(rounds):
        planner, joiner = (
            tree.children(round, "llm_compiler.planner"),
            tree.children(round, "llm_compiler.joiner"),
        )
        assert len(planner) == len(joiner) == 1
        for span in planner + joiner:
            assert tree.attr(span, "openinference.span.kind") == "LLM"
            assert tree.attr(span, "gen_ai.operation.name") == "chat"
            assert tree.attr(span, "gen_ai.request.model") == "scripted"
            assert tree.attr(span, "llm_compiler.round") == number
            assert tree.attr(span, "llm_compiler.usage.source") == "counted"
            assert tree.attr(span, "gen_ai.usage.input_tokens") > 0
            assert tree.attr(span, "llm.token_count.prompt") == tree.attr(
                span, "gen_ai.usage.input_tokens"
            )
        assert planner[0].start_time < joiner[0].start_time

    tasks = {tree.attr(t, "llm_compiler.task.id"): t for t in tree.named("execute_tool")}
    assert sorted(tasks) == [1, 2, 3, 4, 6]
    for tid, task in tasks.items():
        assert tree.parent(task) is rounds[0 if tid < 5 else 1]
        assert tree.attr(task, "gen_ai.operation.name") == "execute_tool"
        assert tree.attr(task, "gen_ai.tool.call.id").endswith(f":{tid}")
    one, three, four = tasks[1], tasks[3], tasks[4]
    assert tree.attr(one, "gen_ai.tool.name") == "search"
    assert tree.attr(one, "openinference.span.kind") == "TOOL"
    assert tree.attr(one, "gen_ai.tool.call.arguments") == '{"q": "a"}'
    assert tree.attr(one, "gen_ai.tool.call.result") == "found a"
    assert tree.attr(one, "llm_compiler.task.status") == "done"
    assert tree.children(one, "FunctionTool.acall")  # the tool's own span nests in the task's
    assert three.status.status_code.name == "ERROR"
    assert tree.attr(three, "llm_compiler.task.error") == "Error: ValueError: no c"
    assert tree.attr(four, "llm_compiler.task.status") == "skipped"
    assert list(tree.attr(four, "llm_compiler.task.deps")) == [3]
    assert "task 3" in tree.attr(four, "llm_compiler.task.skipped_reason")

    # Tasks 1 and 2 ran at the same time, and their spans say so.
    a, b = tasks[1], tasks[2]
    assert a.start_time < b.end_time and b.start_time < a.end_time
    # Round 1's task ran after round 0's join.
    assert tasks[6].start_time > tree.children(rounds[0], "llm_compiler.joiner")[0].end_time

    # Tokens add up: calls -> rounds -> run -> summary.
    summary = result.summary
    calls = tree.named("llm_compiler.planner") + tree.named("llm_compiler.joiner")
    for key, total in [
        ("gen_ai.usage.input_tokens", summary.usage.prompt_tokens),
        ("gen_ai.usage.output_tokens", summary.usage.completion_tokens),
    ]:
        assert sum(tree.attr(c, key) for c in calls) == total == tree.attr(run, key)
        assert sum(tree.attr(r, key) for r in rounds) == total
    assert summary.usage.calls == 4 and len(summary.llm_calls) == 4
    assert [r.usage.calls for r in summary.rounds] == [2, 2]
    assert summary.usage.cost is None  # no price for "scripted": unknown, not zero
    assert tree.attr(run, "llm_compiler.cost.usd") is None


async def test_supplied_prices_give_a_cost(exporter):
    price = ModelPrice(input=1.0, output=2.0)
    result, tree = await traced_run(exporter, prices={"scripted": price})
    usage = result.summary.usage
    expected = (usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1e6
    assert usage.cost == pytest.approx(expected)
    run = tree.one("invoke_agent")
    assert tree.attr(run, "llm_compiler.cost.usd") == pytest.approx(expected)
    costs = [c.cost for c in result.summary.llm_calls]
    assert sum(costs) == pytest.approx(expected)


async def test_tracing_off_emits_no_spans_but_counts_tokens(exporter):
    result, tree = await traced_run(exporter, tracing=False)
    assert not tree.named("invoke_agent") and not tree.named("llm_compiler.")
    assert not tree.named("execute_tool")
    assert result.summary.usage.prompt_tokens > 0 and result.summary.usage.calls == 4


async def test_a_failed_run_ends_its_spans_with_the_error(exporter):
    llm = ScriptedLLM([PLAN_1, RuntimeError("planner down")])
    wf = LLMCompilerWorkflow(tools=tools(), llm=llm, max_replans=0)
    with pytest.raises(Exception, match="down"):
        await wf.run(user_msg="q")
    tree = Tree(exporter.get_finished_spans())
    run = tree.one("invoke_agent")
    assert run.status.status_code.name == "ERROR"
    (joiner,) = tree.named("llm_compiler.joiner")
    assert joiner.status.status_code.name == "ERROR"
    (round,) = tree.children(run, "llm_compiler.round")
    assert round.end_time is not None


async def test_any_span_handler_gets_the_tree_without_opentelemetry(monkeypatch):
    """llama-index's own SimpleSpanHandler, with opentelemetry-api absent (the core install)."""
    from llama_index.core.instrumentation import get_dispatcher
    from llama_index.core.instrumentation.span_handlers import SimpleSpanHandler

    from llm_compiler.tracing import spans

    monkeypatch.setattr(spans, "otel_trace", None)
    handler = SimpleSpanHandler()
    root = get_dispatcher()
    root.add_span_handler(handler)
    try:
        llm = ScriptedLLM([PLAN_1, FINISH])
        result = await LLMCompilerWorkflow(tools=tools(), llm=llm).run(user_msg="q")
    finally:
        root.span_handlers.remove(handler)
    assert str(result) == "a and b and d"
    done = {s.id_: s for s in handler.completed_spans + handler.dropped_spans}
    ours = [
        s for s in done.values() if s.id_.startswith(("invoke_agent", "llm_compiler", "execute"))
    ]
    (run,) = [s for s in ours if s.id_.startswith("invoke_agent")]
    (round,) = [s for s in ours if s.id_.startswith("llm_compiler.round")]
    assert round.parent_id == run.id_
    tasks = [s for s in ours if s.id_.startswith("execute_tool")]
    assert len(tasks) == 4 and all(t.parent_id == round.id_ for t in tasks)
    assert {s.id_.split("-")[0] for s in ours if s.parent_id == round.id_} == {
        "execute_tool search",
        "execute_tool boom",
        "llm_compiler.planner",
        "llm_compiler.joiner",
    }


async def test_a_cancelled_run_and_a_plan_only_run_close_every_span(exporter):
    started = asyncio.Event()

    async def hang(q: str) -> str:
        started.set()
        await asyncio.Event().wait()
        return q

    llm = ScriptedLLM(['1. hang("x")\n2. join()<END_OF_PLAN>'])
    wf = LLMCompilerWorkflow(tools=[hang], llm=llm)
    handler = wf.run(user_msg="q")
    await asyncio.wait_for(started.wait(), 10)
    await handler.cancel_run()
    with pytest.raises(BaseException):  # noqa: B017 - the cancellation, whatever its type
        await handler
    tree = Tree(exporter.get_finished_spans())
    (task,) = tree.named("execute_tool hang")
    assert tree.attr(task, "llm_compiler.task.status") == "not_run"
    assert tree.one("invoke_agent").status.status_code.name == "ERROR"
    assert tree.one("llm_compiler.round").end_time is not None
    assert not wf._tracer._runs  # nothing kept for a finished run

    exporter.clear()
    llm = ScriptedLLM(['1. hang("x")\n2. join()<END_OF_PLAN>'])
    plan = await LLMCompilerWorkflow(tools=[hang], llm=llm).compile_plan("q")
    assert plan.valid
    tree = Tree(exporter.get_finished_spans())
    run = tree.one("invoke_agent")
    assert tree.children(tree.one("llm_compiler.round")) == tree.named("llm_compiler.planner")
    assert tree.parent(tree.one("llm_compiler.round")) is run and not tree.named("execute_tool")


async def test_a_run_resumed_from_a_snapshot_is_traced_under_its_new_run(exporter):
    import json

    from workflows import Context

    release, started = asyncio.Event(), asyncio.Event()

    async def slow(x: str) -> str:
        started.set()
        await release.wait()
        return x.upper()

    plan = '1. slow("a")\n2. slow($1)\n3. join()'
    wf = LLMCompilerWorkflow(
        tools=[slow], llm=ScriptedLLM([plan, "Action: Finish(resumed)"]), timeout=20
    )
    handler = wf.run(user_msg="q")
    await started.wait()
    snapshot = json.loads(json.dumps(handler.ctx.to_dict()))
    await handler.cancel_run()
    with pytest.raises(BaseException):  # noqa: B017 - the cancellation
        await handler
    release.set()
    exporter.clear()
    assert str(await wf.run(ctx=Context.from_dict(wf, snapshot))) == "resumed"
    tree = Tree(exporter.get_finished_spans())
    run = tree.one("invoke_agent")
    tasks = tree.named("execute_tool slow")
    assert [tree.attr(t, "llm_compiler.task.id") for t in tasks] == [1, 2]
    # The resumed run opens no round of its own: its tasks and joiner hang off the run.
    assert all(tree.parent(t) is run for t in tasks)
    assert tree.parent(tree.one("llm_compiler.joiner")) is run
    assert not wf._tracer._runs


async def test_a_call_served_from_the_result_cache_says_so_on_its_span(exporter):
    async def lookup(q: str) -> str:
        """Look q up."""
        return f"found {q}"

    plan = '1. lookup("a")\n2. lookup(q="a")\n3. join()<END_OF_PLAN>'  # one call, two forms
    wf = LLMCompilerWorkflow(
        tools=[lookup],
        llm=ScriptedLLM([plan, FINISH]),
        tool_policies={"lookup": ToolPolicy(side_effect="pure")},
        result_cache=MemoryCache(),
    )
    await wf.run(user_msg="a twice")
    tree = Tree(exporter.get_finished_spans())
    spans = tree.named("execute_tool")
    cached = [s for s in spans if tree.attr(s, "llm_compiler.task.cached")]
    assert len(spans) == 2 and len(cached) == 1
    assert tree.attr(cached[0], "llm_compiler.task.saved_seconds") >= 0
    assert tree.attr(cached[0], "gen_ai.tool.call.result") == "found a"
    assert not tree.children(cached[0], "FunctionTool.acall")  # the tool was not called


async def test_a_round_planned_from_the_plan_cache_says_so_on_its_span(exporter):
    def subtract(a: int, b: int) -> int:
        """a - b."""
        return a - b

    plan = "1. subtract(a=5, b=3)\n2. join()<END_OF_PLAN>"
    wf = LLMCompilerWorkflow(tools=[subtract], llm=ScriptedLLM([plan, FINISH, FINISH]))
    pure = {"subtract": ToolPolicy(side_effect="pure")}
    wf.config = wf.config.model_copy(update={"cache_plans": True, "tool_policies": pure})
    await wf.run(user_msg="What is 5 minus 3?")
    exporter.clear()
    out = await wf.run(user_msg="What is 9 minus 4?")
    assert out.summary.rounds[0].cached_plan and out.summary.planner_calls_saved == 1
    tree = Tree(exporter.get_finished_spans())
    (round,) = tree.named("llm_compiler.round")
    assert tree.attr(round, "llm_compiler.round.cached_plan") is True
    assert not tree.children(round, "llm_compiler.planner")  # no planner call
    assert tree.children(round, "llm_compiler.joiner")

"""Speculation: while the planner writes, the pure calls a kept template predicts start; the
real plan's equal calls take their results, other predictions are dropped, and only
``pure`` calls without limits are ever started early."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from llm_compiler import LLMCompilerWorkflow, ToolPolicy
from llm_compiler.engine.policy import RunPolicies
from llm_compiler.engine.speculation import predicted, speculable
from llm_compiler.events import PlanEvent
from llm_compiler.plan import PlanTask, ref
from llm_compiler.testing import LLMCall, ScriptedLLM
from llm_compiler.tools import ToolSet, tool_map

pytestmark = pytest.mark.timeout(30)

FINISH = "Thought: done.\nAction: Finish(ok)"


class Gated(ScriptedLLM):
    """A planner that, for the questions in `gated`, starts writing only once `seen` is
    set (the test sets it when the speculative call reaches the tool)."""

    gated: set[str] = set()
    seen: asyncio.Event | None = None

    async def on_chunk(self, index: int, chunk: str) -> None:
        prompt = (self.calls[-1].prompt or "").rstrip()
        planner = any(prompt.endswith(f"Question: {q}") for q in self.gated)
        if index == 0 and self.seen is not None and planner:
            await asyncio.wait_for(self.seen.wait(), 10)


def setup(plans: dict[str, str], **config: Any) -> tuple[LLMCompilerWorkflow, Counter[str], Gated]:
    calls: Counter[str] = Counter()
    llm = Gated(lambda c: reply(c, plans))

    async def lookup(query: str) -> str:
        """The population of a city."""
        calls[query] += 1
        if llm.seen is not None and query == "Lima":
            llm.seen.set()
        return f"{query}: {len(query)} million"

    wf = LLMCompilerWorkflow(
        tools=[lookup],
        llm=llm,
        tool_policies={"lookup": ToolPolicy(side_effect="pure")},
        **config,
    )
    return wf, calls, llm


def reply(call: LLMCall, plans: dict[str, str]) -> str:
    prompt = (call.prompt or "").rstrip()
    for question, plan in plans.items():
        if prompt.endswith(f"Question: {question}"):  # the planner's prompt
            return plan
    return FINISH


def plan(city: str) -> str:
    return f'1. lookup(query="{city}")\n2. join()<END_OF_PLAN>'


async def test_a_predicted_call_starts_before_the_plan_and_serves_its_task():
    q1, q2 = "What is the population of Paris?", "What is the population of Lima?"
    wf, calls, llm = setup({q1: plan("Paris"), q2: plan("Lima")}, speculate=True)
    await wf.run(user_msg=q1)  # answered: its plan is kept as a template
    llm.gated, llm.seen = {q2}, asyncio.Event()
    out = await wf.run(user_msg=q2)  # the planner waits until the tool saw "Lima"
    assert calls == {"Paris": 1, "Lima": 1}
    assert out.summary.cached_calls == 1 and out.summary.tasks[0].cached
    assert out.summary.planner_calls_saved == 0  # the planner still planned
    assert str(out) == "ok"


async def test_a_prediction_the_plan_does_not_ask_for_is_dropped():
    q1, q2 = "What is the population of Paris?", "What is the population of Lima?"
    wf, calls, llm = setup({q1: plan("Paris"), q2: plan("Oslo")}, speculate=True)
    await wf.run(user_msg=q1)
    llm.gated, llm.seen = {q2}, asyncio.Event()
    out = await wf.run(user_msg=q2)
    assert calls == {"Paris": 1, "Lima": 1, "Oslo": 1}  # Lima ran, for nothing
    assert out.summary.cached_calls == 0 and [t.args for t in out.summary.tasks] == [
        {"query": "Oslo"}
    ]


async def test_without_speculate_nothing_starts_early():
    q1, q2 = "What is the population of Paris?", "What is the population of Lima?"
    wf, calls, _ = setup({q1: plan("Paris"), q2: plan("Lima")})
    await wf.run(user_msg=q1)
    out = await wf.run(user_msg=q2)
    assert calls == {"Paris": 1, "Lima": 1} and out.summary.cached_calls == 0


def test_only_pure_calls_without_limits_and_with_literal_arguments_are_predicted():
    assert speculable(ToolPolicy(side_effect="pure"))
    for policy in (
        ToolPolicy(side_effect="pure", cache=False),
        ToolPolicy(side_effect="idempotent", cache=True, cache_ttl=60),
        ToolPolicy(side_effect="idempotent"),
        ToolPolicy(side_effect="at_most_once"),
        ToolPolicy(side_effect="pure", max_concurrency=1),
        ToolPolicy(side_effect="pure", requires_approval=True),
        ToolPolicy(side_effect="pure", resource_keys=("city:{query}",)),
        ToolPolicy(side_effect="pure", limits={"api": 2}),
    ):
        assert not speculable(policy), policy

    async def lookup(query: str) -> str:
        """The population of a city."""
        return query

    async def book(query: str) -> str:
        """Book a trip."""
        return query

    tools = ToolSet(tool_map([lookup, book]))
    tasks = [
        PlanTask(id=1, tool="lookup", kwargs={"query": "Lima"}),
        PlanTask(id=2, tool="lookup", kwargs={"query": ref(1)}, deps=[1]),
        PlanTask(id=3, tool="book", kwargs={"query": "Lima"}),
        PlanTask(id=4, tool="lookup", kwargs={"wrong": 1}),
        PlanTask(id=5, tool="missing", kwargs={"query": "x"}),
    ]
    rules = RunPolicies(None, {"lookup": ToolPolicy(side_effect="pure")})
    found = predicted(PlanEvent(round=0, tasks=tasks), "r", tools, rules)
    assert [(r.task_id, r.args) for r, _, _ in found] == [(1, {"query": "Lima"})]


def test_serve_speculate_turns_it_on_for_each_compiler():
    from llm_compiler.cli import apply_tool_policies, parse

    assert parse(["serve", "--speculate"]).speculate is True
    assert parse(["serve"], environ={}).speculate is False
    wf, _, _ = setup({})
    apply_tool_policies({"compiler": wf}, {}, speculate=True)
    assert wf.config.speculate


async def test_a_run_that_never_finishes_leaves_no_speculation_behind():
    """A failed run never reaches the step that forgets its speculative calls: each call
    takes its run's entry along once it ends."""
    from llm_compiler.engine.speculation import Speculation

    speculation, release = Speculation(), asyncio.Event()

    async def call(*_: Any) -> Any:
        await release.wait()

    started = speculation.start("failed-run", [(None, None, None)] * 2, call)  # type: ignore[list-item]
    assert started == 2 and "failed-run" in speculation._runs
    release.set()
    for _ in range(3):
        await asyncio.sleep(0)
    assert speculation._runs == {}

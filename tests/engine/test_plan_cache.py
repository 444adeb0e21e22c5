"""The plan cache: a question of an answered shape gets its plan filled by position (never
swapped), other questions plan with the model; a replan plans afresh; a changed policy
finds no template; the summary counts the planner calls saved."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from llm_compiler import LLMCompilerWorkflow, TaskResult, ToolPolicy
from llm_compiler.engine.plan_cache import learn
from llm_compiler.plan import PlanTask
from llm_compiler.testing import ScriptedLLM

FINISH = "Thought: done.\nAction: Finish(ok)"


def task(id: int, tool: str, **kwargs: Any) -> PlanTask:
    return PlanTask(id=id, tool=tool, kwargs=kwargs)


def test_numbers_fill_by_position_and_other_words_must_match():
    plan = "1. subtract(a=5, b=3)\n2. join()"
    template = learn("What is 5 minus 3?", plan, [task(1, "subtract", a=5, b=3)])
    assert template is not None
    assert template.fill("What is 3 minus 5?") == "1. subtract(a=3, b=5)\n2. join()"
    assert template.fill("What is  12 minus 40 ?".replace(" ?", "?")) == (
        "1. subtract(a=12, b=40)\n2. join()"
    )
    assert template.fill("What is 5 plus 3?") is None
    assert template.fill("What is 3 minus five?") is None  # a number slot takes a number
    assert template.fill("What is 5 minus 3? And 4?") is None


def test_names_fill_with_as_many_words_and_constants_stay():
    plan = '1. search(query="France", what="capital")\n2. join()'
    tasks = [task(1, "search", query="France", what="capital")]
    template = learn("Which city is the capital of France?", plan, tasks)
    assert template is not None
    filled = template.fill("Which city is the capital of Peru?")
    assert filled == '1. search(query="Peru", what="capital")\n2. join()'
    assert template.fill("Which city is the capital of New Zealand?") is None
    assert template.fill('Which city is the capital of Pe"ru?') is None


def test_a_literal_stated_twice_or_missing_from_the_plan_text_learns_nothing():
    tasks = [task(1, "add", a=2, b=2)]
    assert learn("What is 2 plus 2?", "1. add(a=2, b=2)\n2. join()", tasks) is None
    assert learn("Capital of France?", "1. search($0)", [task(1, "search", q="France")]) is None
    assert learn("Hello there", "1. search('x')", [task(1, "search", q="x")]) is None  # no slot


@given(st.integers(-999, 999), st.integers(-999, 999), st.integers(0, 999), st.integers(0, 999))
def test_property_a_filled_plan_never_swaps_operands(a, b, c, d):
    if a == b or str(a) in str(b) or str(b) in str(a):
        return  # a value stated twice: no template (tested above)
    plan = f"1. subtract(x={a}, y={b})\n2. join()"
    template = learn(f"Compute {a} minus {b} now", plan, [task(1, "subtract", x=a, y=b)])
    assert template is not None
    assert template.fill(f"Compute {c} minus {d} now") == f"1. subtract(x={c}, y={d})\n2. join()"
    assert template.fill(f"Compute {c} plus {d} now") is None


class Calc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def tools(self) -> list[Any]:
        def subtract(a: int, b: int) -> int:
            """a - b."""
            self.calls.append((a, b))
            return a - b

        return [subtract]


PLAN = "1. subtract(a=5, b=3)\n2. join()<END_OF_PLAN>"
PURE = {"subtract": ToolPolicy(side_effect="pure")}


async def test_a_seen_shape_skips_the_planner_and_the_joiner_still_judges():
    calc = Calc()
    llm = ScriptedLLM(
        [PLAN, FINISH, FINISH, "1. subtract(a=1, b=1)\n2. join()<END_OF_PLAN>", FINISH]
    )
    wf = LLMCompilerWorkflow(tools=calc.tools(), llm=llm, cache_plans=True, tool_policies=PURE)
    first = await wf.run(user_msg="What is 5 minus 3?")
    assert first.summary.planner_calls_saved == 0 and len(llm.calls) == 2
    handler = wf.run(user_msg="What is 3 minus 40?")
    results = [e async for e in handler.stream_events() if isinstance(e, TaskResult)]
    second = await handler
    assert calc.calls == [(5, 3), (3, 40)] and results[0].output == -37
    assert len(llm.calls) == 3  # the joiner only
    assert second.summary.planner_calls_saved == 1 and second.summary.tasks[0].args == {
        "a": 3,
        "b": 40,
    }
    third = await wf.run(user_msg="What is 3 plus 40?")  # another shape: planned
    assert third.summary.planner_calls_saved == 0 and len(llm.calls) == 5


async def test_a_replan_plans_afresh_and_a_changed_policy_finds_no_template():
    calc = Calc()
    replan = "Thought: check again.\nAction: Replan(again)"
    again = "3. subtract(a=9, b=9)\n4. join()<END_OF_PLAN>"
    llm = ScriptedLLM([PLAN, FINISH, replan, again, FINISH, PLAN, FINISH])
    wf = LLMCompilerWorkflow(tools=calc.tools(), llm=llm, cache_plans=True, tool_policies=PURE)
    await wf.run(user_msg="What is 5 minus 3?")
    out = await wf.run(user_msg="What is 7 minus 2?")
    assert out.summary.planner_calls_saved == 1 and len(llm.calls) == 5  # round 1 planned
    assert calc.calls == [(5, 3), (7, 2), (9, 9)]
    pure = {"subtract": ToolPolicy(side_effect="pure", version="2")}
    wf.config = wf.config.model_copy(update={"tool_policies": pure})
    out = await wf.run(user_msg="What is 5 minus 3?")
    assert out.summary.planner_calls_saved == 0 and len(llm.calls) == 7


async def test_off_by_default():
    calc = Calc()
    llm = ScriptedLLM([PLAN, FINISH, PLAN, FINISH])
    wf = LLMCompilerWorkflow(tools=calc.tools(), llm=llm)
    await wf.run(user_msg="What is 5 minus 3?")
    out = await wf.run(user_msg="What is 5 minus 3?")
    assert out.summary.planner_calls_saved == 0 and len(llm.calls) == 4


def test_serve_plan_cache_turns_it_on_for_each_compiler():
    from llm_compiler.cli import apply_tool_policies, parser

    assert parser().parse_args(["serve", "--plan-cache"]).plan_cache
    wf = LLMCompilerWorkflow(tools=Calc().tools(), llm=ScriptedLLM([]))
    apply_tool_policies({"compiler": wf}, {}, cache_plans=True)
    assert wf.config.cache_plans

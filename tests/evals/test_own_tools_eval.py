"""The own-tools eval: its tool sets, the plan checker, and the prompts it measures."""

from __future__ import annotations

import pytest

from evals.own_tools import CASES, TOOL_SETS, markdown, run_case
from llm_compiler import LLMCompilerWorkflow
from llm_compiler.dialects.llmcompiler.prompts import PLANNER_EXAMPLES
from llm_compiler.testing import ScriptedLLM

SCENARIO = CASES[0]  # the weather question: two lookups and a conversion


def test_every_case_names_tools_of_its_set():
    for case in CASES:
        names = {f.__name__ for f in TOOL_SETS[case.tools]}
        assert {name for name, _ in case.expect} <= names, case.question
    assert len({c.tools for c in CASES}) >= 4


async def test_a_right_plan_with_a_reference_is_right():
    llm = ScriptedLLM(
        [
            '1. get_weather(city="Oslo")\n2. get_weather(city="madrid")\n'
            "3. convert_c_to_f(celsius=$1)\n4. join()<END_OF_PLAN>"
        ],
        chat=False,
    )
    outcome = await run_case(SCENARIO, llm)
    assert outcome.right and outcome.calls_right == 3 and outcome.errors == []


@pytest.mark.parametrize(
    "plan, calls_right",
    [
        # the conversion of a literal, not of a lookup's result
        ('1. get_weather(city="Oslo")\n2. get_weather(city="Madrid")\n'
         "3. convert_c_to_f(celsius=273)\n4. join()", 2),
        # a reference to the wrong kind of task
        ('1. get_weather(city="Oslo")\n2. convert_c_to_f(celsius=$1)\n'
         "3. convert_c_to_f(celsius=$2)\n4. join()", 2),
        # what the issue saw: the lookups never planned
        ("1. convert_c_to_f(celsius=273)\n2. join()", 0),
    ],
)  # fmt: skip
async def test_wrong_plans_are_wrong(plan, calls_right):
    outcome = await run_case(SCENARIO, ScriptedLLM([plan + "<END_OF_PLAN>"], chat=False))
    assert not outcome.right and outcome.calls_right == calls_right
    summary = markdown([outcome], "t").splitlines()[0]
    assert summary == f"t: **0/1** plans right, {calls_right}/3 calls."


async def test_an_extra_call_makes_a_plan_wrong():
    plan = '1. day_of_week(day="2025-12-25")\n2. day_of_week(day="2025-12-26")\n3. join()'
    dates = next(c for c in CASES if c.question.startswith("What day of the week"))
    outcome = await run_case(dates, ScriptedLLM([plan + "<END_OF_PLAN>"], chat=False))
    assert outcome.calls_right == 1 and not outcome.right


@pytest.mark.parametrize("examples", ["own", "mixed", "builtin"])
async def test_constrained_prompts_show_the_chosen_examples(examples):
    llm = ScriptedLLM(["1. join()<END_OF_PLAN>"], chat=False)
    await run_case(SCENARIO, llm, examples, constrained=True)
    prompt = llm.calls[0].prompt
    own = '1. get_weather(city="city 1")\n2. get_weather(city="city 2")\n'
    own += "3. convert_c_to_f(celsius=$1)"
    assert (own in prompt) == (examples != "builtin")
    assert (PLANNER_EXAMPLES.splitlines()[0] in prompt) == (examples != "own")


async def test_the_scenario_runs_end_to_end_on_its_tools():
    llm = ScriptedLLM(
        [
            '1. get_weather(city="Oslo")\n2. convert_c_to_f(celsius=$1)\n3. join()<END_OF_PLAN>',
            "Thought: 4 C is 39.2 F.\nAction: Finish(39.2 F)",
        ],
        chat=False,
    )
    out = await LLMCompilerWorkflow(tools=TOOL_SETS["weather"], llm=llm).run(user_msg="Oslo in F?")
    assert [t.output for t in out.summary.tasks] == [4.0, 39.2]

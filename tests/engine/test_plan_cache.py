"""The plan cache: a question of an answered shape gets its plan filled by position (never
swapped), other questions plan with the model; a value the plan derived is no slot, so a
look-alike question gets its right plan or none; another tool set finds no template; a
plan with side effects is reused only when opted in; a replan plans afresh; a changed
policy finds no template; the summary counts the planner calls saved."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from llm_compiler import LLMCompilerWorkflow, TaskResult, ToolPolicy
from llm_compiler.engine.plan_cache import learn
from llm_compiler.plan import PlanTask
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tools import tool_map

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


def test_a_literal_stated_twice_or_missing_from_the_plan_text_fills_only_its_question():
    for question, plan, tasks in [
        ("What is 2 plus 2?", "1. add(a=2, b=2)\n2. join()", [task(1, "add", a=2, b=2)]),
        ("Capital of France?", "1. search($0)", [task(1, "search", q="France")]),
        ("Hello there", "1. search('x')", [task(1, "search", q="x")]),
    ]:
        template = learn(question, plan, tasks)
        assert template is not None and not template.slots
        assert template.fill(question) == plan and template.fill(question + "!") is None
    assert learn("Hello there", "1. join()", []) is None


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


# Questions that look like an answered one: the filled plan is the right plan, or none.

Shape = tuple[str, str, Any]  # question, tool, the right arguments of its values
SHAPES: list[Shape] = [
    ("How many seconds are in {0} minutes?", "multiply", lambda v: {"a": v[0], "b": 60}),
    ("How many days are in {0} weeks?", "multiply", lambda v: {"a": v[0], "b": 7}),
    ("What is {0} minus {1}?", "subtract", lambda v: {"a": v[0], "b": v[1]}),
    ("Subtract {1} from {0}.", "subtract", lambda v: {"a": v[0], "b": v[1]}),
    (
        "A sauce for {0} servings needs {1} g of butter; how many grams for twice as many?",
        "scale_quantity",
        lambda v: {"amount": v[1], "servings": v[0], "target": 2 * v[0]},
    ),
    ("What is {0} minus {1}, not {1} minus {0}?", "subtract", lambda v: {"a": v[0], "b": v[1]}),
]
NEGATED = [
    ("What is ", "What is not "),
    ("How many", "Not how many"),
    ("Subtract", "Never subtract"),
    ("A sauce", "Not a sauce"),
]


def right_plan(shape: Shape, values: tuple[int, int]) -> tuple[str, str, list[PlanTask]]:
    """The question of `shape` with `values`, its right plan text and tasks."""
    question, tool, args = shape
    kwargs = args(values)
    call = ", ".join(f"{k}={v}" for k, v in kwargs.items())
    return question.format(*values), f"1. {tool}({call})\n2. join()", [task(1, tool, **kwargs)]


values_st = st.tuples(*[st.sampled_from([2, 3, 5, 7, 8, 14, 60, 120, 150, -4])] * 2)


@example(SHAPES[0], (60, 0), (5, 0), "fill")
@example(SHAPES[4], (4, 150), (5, 150), "fill")
@given(st.sampled_from(SHAPES), values_st, values_st, st.sampled_from(["fill", "swap", "negate"]))
def test_property_a_look_alike_question_gets_its_right_plan_or_none(shape, seed, new, change):
    """Metamorphic: after a seed question, a look-alike (other values, the derived value
    changed with its source, operands swapped, a negation) fills the plan the question
    needs, or fills nothing (the planner is asked)."""
    template = learn(*right_plan(shape, seed))
    if template is None:
        return
    if change == "swap":
        new = (new[1], new[0])
    question, plan, _ = right_plan(shape, new)
    if change == "negate":
        asked = question
        for plain, negated in NEGATED:
            question = question.replace(plain, negated)
        assert question != asked
        plan = "1. join()"  # whatever a negated question needs, not the seed's call
    assert template.fill(question) in (None, plan)


def no_slot(template: Any) -> bool:
    return template is not None and not template.slots


def test_a_value_the_plan_derived_or_used_twice_is_no_slot():
    seconds = learn(*right_plan(SHAPES[0], (60, 0)))  # multiply(60, 60): one 60 is derived
    assert no_slot(seconds) and seconds.fill("How many seconds are in 5 minutes?") is None
    weeks = learn(*right_plan(SHAPES[1], (3, 0)))  # multiply(3, 7): 7 is a constant
    assert no_slot(weeks)
    sauce = learn(*right_plan(SHAPES[4], (4, 150)))  # scale(150, 4, 8): 8 derived from 4
    assert no_slot(sauce)
    minus = learn(
        "What is 10 minus -4?", "1. subtract(a=10, b=4)", [task(1, "subtract", a=10, b=4)]
    )
    assert no_slot(minus)  # 4 is not written as the question writes it
    flag = learn("Is 7 prime?", "1. check(n=7, prime=True)", [task(1, "check", n=7, prime=True)])
    assert no_slot(flag)  # a boolean is never a slot


class Kitchen:
    """Pure arithmetic tools, a lookup per kind of organisation, and an email sender."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def tools(self, *names: str) -> list[Any]:
        def multiply(a: float, b: float) -> float:
            """a * b."""
            self.calls.append(("multiply", (a, b)))
            return a * b

        def scale_quantity(amount: float, servings: float, target: float) -> float:
            """The amount of an ingredient for `target` servings, given `amount` for `servings`."""
            self.calls.append(("scale_quantity", (amount, servings, target)))
            return amount * target / servings

        def club_info(name: str) -> str:
            """Facts about a football club."""
            self.calls.append(("club_info", (name,)))
            return f"club {name}"

        def bank_info(name: str) -> str:
            """Facts about a bank."""
            self.calls.append(("bank_info", (name,)))
            return f"bank {name}"

        def send_email(to: str) -> str:
            """Send a reminder email to a person."""
            self.calls.append(("send_email", (to,)))
            return f"sent to {to}"

        fns = [multiply, scale_quantity, club_info, bank_info, send_email]
        return [f for f in fns if f.__name__ in names]


KITCHEN_PURE = {
    n: ToolPolicy(side_effect="pure")
    for n in ("multiply", "scale_quantity", "club_info", "bank_info")
}


def kitchen(plans: dict[str, str], *names: str, **config: Any) -> tuple[Kitchen, Any, Any]:
    """A cached workflow on `names` whose planner writes `plans[question]`."""

    def reply(call: Any) -> str:
        for question, plan in plans.items():
            if call.prompt.rstrip().endswith(question):
                return plan
        return FINISH

    k = Kitchen()
    llm = ScriptedLLM(reply)
    wf = LLMCompilerWorkflow(
        tools=k.tools(*names), llm=llm, cache_plans=True, tool_policies=KITCHEN_PURE, **config
    )
    return k, llm, wf


async def test_seconds_in_5_minutes_are_not_multiplied_by_5():
    plans = {
        "How many seconds are in 60 minutes?": "1. multiply(a=60, b=60)\n2. join()<END_OF_PLAN>",
        "How many seconds are in 5 minutes?": "1. multiply(a=5, b=60)\n2. join()<END_OF_PLAN>",
    }
    k, _, wf = kitchen(plans, "multiply")
    for question in plans:
        await wf.run(user_msg=question)
    assert k.calls == [("multiply", (60, 60)), ("multiply", (5, 60))]


async def test_twice_as_many_servings_follows_the_servings():
    sauce = "A sauce for {} servings needs 150 g of butter; how many grams for twice as many?"
    plans = {
        sauce.format(4): "1. scale_quantity(amount=150, servings=4, target=8)\n2. join()",
        sauce.format(5): "1. scale_quantity(amount=150, servings=5, target=10)\n2. join()",
    }
    k, _, wf = kitchen(plans, "scale_quantity")
    for question in plans:
        out = await wf.run(user_msg=question)
    assert k.calls[1] == ("scale_quantity", (150, 5, 10)) and out.summary.tasks[0].output == 300
    assert out.summary.planner_calls_saved == 0


async def test_look_up_santander_is_not_answered_with_the_club_tool_of_liverpool():
    plans = {
        "Look up Liverpool.": '1. club_info(name="Liverpool")\n2. join()',
        "Look up Santander.": '1. bank_info(name="Santander")\n2. join()',
    }
    k, _, wf = kitchen(plans, "club_info", "bank_info", max_replans=0)
    for question in plans:
        await wf.run(user_msg=question)
    assert k.calls == [("club_info", ("Liverpool",)), ("bank_info", ("Santander",))]


async def test_another_tool_set_finds_no_template():
    plans = {"Look up Liverpool.": '1. club_info(name="Liverpool")\n2. join()'}
    k, llm, wf = kitchen(plans, "club_info")
    await wf.run(user_msg="Look up Liverpool.")
    wf.tools = tool_map(k.tools("club_info", "multiply"))
    out = await wf.run(user_msg="Look up Liverpool.")
    assert out.summary.planner_calls_saved == 0 and len(llm.calls) == 4


async def test_a_plan_with_side_effects_is_reused_only_when_opted_in():
    plans = {
        "Send a reminder to Alice.": '1. send_email(to="Alice")\n2. join()',
        "Send a reminder to nobody.": "Thought: nobody to send to.\n1. join()",
    }
    k, _, wf = kitchen(plans, "send_email")
    for question in plans:
        await wf.run(user_msg=question)
    assert k.calls == [("send_email", ("Alice",))]
    k, _, wf = kitchen(plans, "send_email", cache_plans_with_effects=True)
    await wf.run(user_msg="Send a reminder to Alice.")
    out = await wf.run(user_msg="Send a reminder to Bob.")
    assert k.calls[-1] == ("send_email", ("Bob",)) and out.summary.planner_calls_saved == 1

"""Constrained runs on a new user's own tools (scripted model): plans write only what the
question holds, replans follow facts (a task raised, returned nothing, or its tool said
it found nothing), and answers say what each value is and what is missing."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from llm_compiler import LLMCompilerWorkflow, TaskApprovalRequest
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tools import Expression, NotFound
from llm_compiler.tools.adapt import to_tool
from llm_compiler.tools.policy import policy

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "dialects"))
from gbnf_check import accepts  # noqa: E402


def flight_price(city: str) -> float:
    """The price of a return flight to a city, in US dollars."""
    if city == "Atlantis":
        raise NotFound(f"No flights to {city!r}.")
    return {"Rome": 180.0, "Lisbon": 150.0}.get(city, 200.0)


def hotel_price(city: str, nights: int) -> float:
    """The price of a hotel in a city for some nights, in US dollars."""
    return 95.0 * nights


def convert_currency(amount: float, currency: str) -> float:
    """Convert an amount of US dollars into another currency (EUR, GBP, JPY)."""
    return round(amount * 0.92, 2)


def calculator(expression: Expression) -> float:
    """Evaluate an arithmetic expression such as "8 + 3 * 10"."""
    left, op, right = expression.split()
    a, b = float(left), float(right)
    return {"+": a + b, "-": a - b, "*": a * b}[op]


TRAVEL = [flight_price, hotel_price, convert_currency, calculator]


def get_weather(city: str) -> float:
    """The temperature in a city, in degrees Celsius."""
    if city == "Berlin":
        raise ConnectionError("HTTP 503")
    return {"Oslo": 4.0}.get(city, 15.0)


def convert_c_to_f(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit."""
    return celsius * 9 / 5 + 32


def diameter(planet: str) -> float:
    """A planet's diameter, in km."""
    return {"Mars": 6779.0, "Venus": 12104.0}[planet]


def capital(country: str) -> str:
    """The capital city of a country."""
    return {"Norway": "Oslo"}.get(country, country)


def read_file(path: str) -> str:
    """The text of a file."""
    return "File does not exist"


def plan(*lines: str, start: int = 1) -> str:
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, start))
    return f"{body}{len(lines) + start}. join()\n{END_OF_PLAN}"


def workflow(tools: list[Any], *replies: str, replans: int = 1) -> tuple[Any, ScriptedLLM]:
    llm = ScriptedLLM(list(replies), chat=False)
    wf = LLMCompilerWorkflow(
        tools=tools,
        llm=llm,
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        max_replans=replans,
        timeout=30,
    )
    return wf, llm


def grammar(question: str, tools: list[Any]) -> str:
    """The first plan's grammar for `question` (generated examples, default dialect)."""
    tools = [to_tool(t) for t in tools]
    prompt = PromptContext(question, tools=tools, constrained=True, chat=False)
    context = PlannerContext(prompt=prompt, tools=tools, constrained=True)
    return str(LLMCompilerDialect().planner_request(context).extras["grammar"])


# ------------------------------------------------------------ what a plan may write


def test_a_plan_cannot_copy_values_the_question_never_wrote():
    g = grammar("How much is a flight to Rome, in euros?", TRAVEL)
    assert accepts(g, plan('flight_price("Rome")', 'convert_currency($1, "EUR")'))
    assert not accepts(g, plan('flight_price("Paris")'))  # a generated example's city
    assert not accepts(g, plan('convert_currency(amount=20.0, currency="USD")'))
    assert not accepts(g, plan('calculator("8 + 3 * 10")'))  # the docstring's expression
    weather = grammar("Will it freeze in Oslo tomorrow?", [get_weather, convert_c_to_f])
    assert not accepts(weather, plan("convert_c_to_f(32.0)"))


def test_no_tool_and_no_operator_is_barred_by_the_question_s_words():
    g = grammar("How much more does the flight to Rome cost than 3 nights at the hotel?", TRAVEL)
    lines = ('flight_price("Rome")', 'hotel_price("Rome", 3)', 'calculator("$1 + $2")')
    assert accepts(g, plan(*lines))
    assert accepts(g, plan(*lines[:2], 'calculator("$1 - $2")'))


# ------------------------------------------------------------ replans on facts


@pytest.mark.parametrize(
    ("tool", "line", "question", "said"),
    [
        # a sentence's first word is no name to plan for
        (capital, 'capital("Norway")', "What's the capital of Norway?", "Oslo"),
        # nor are the capitalized nouns of another language
        (
            flight_price,
            'flight_price("Rom")',
            "Was kostet ein Flug nach Rom? Gib den Preis.",
            "200",
        ),
        # a text result is a finding whatever it says
        (read_file, 'read_file("notes.txt")', "What is in notes.txt?", "File does not exist"),
    ],
)
async def test_words_force_no_replan(tool: Any, line: str, question: str, said: str):
    wf, llm = workflow([tool], plan(line))
    output = await wf.run(user_msg=question)
    assert len(llm.calls) == 1  # the plan; the answer is rendered
    assert said in str(output) and "could not find" not in str(output)


async def test_a_transport_error_is_a_failure_not_a_missing_name():
    again = plan('get_weather(city="Berlin")', start=2)
    wf, llm = workflow([get_weather], plan('get_weather("Berlin")'), again)
    output = await wf.run(user_msg="What is the weather in Berlin?")
    assert "HTTP 503" in str(output) and "failed" in str(output)
    assert 'could not find "Berlin"' not in str(output)


async def test_a_declared_not_found_is_planned_again_once():
    again = plan('flight_price("Rome")', start=2)
    wf, llm = workflow(TRAVEL, plan('flight_price("Atlantis")'), again)
    output = await wf.run(user_msg="What does a flight to Atlantis or Rome cost?")
    assert len(llm.calls) == 2
    assert "These actions failed or found nothing" in str(llm.calls[1].prompt)
    assert "180" in str(output)


async def test_a_rejected_call_is_not_planned_again():
    @policy(requires_approval=True)
    def book_flight(city: str) -> str:
        """Book a return flight to a city."""
        return f"booked {city}"

    wf, llm = workflow([book_flight], plan('book_flight("Rome")'), plan('book_flight("Rome")'))
    handler = wf.run(user_msg="Book a flight to Rome.")
    held = 0
    async for ev in handler.stream_events():
        if isinstance(ev, TaskApprovalRequest):
            held += 1
            handler.ctx.send_event(ev.respond(action="reject", reason="too expensive"))
    output = await handler
    assert held == 1 and len(llm.calls) == 1
    assert "rejected" in str(output)


# ------------------------------------------------------------ answers


async def test_a_which_question_names_the_larger_and_by_how_much():
    wf, _ = workflow([diameter], plan('diameter("Mars")', 'diameter("Venus")'))
    output = await wf.run(user_msg="Which planet is bigger, Mars or Venus?")
    assert "Venus (12,104) is 5325 more than Mars (6779)" in str(output)


def people(country: str) -> int:
    """How many people live in a country."""
    return {"Nigeria": 203_000_000, "Brazil": 223_000_000}[country]


async def test_a_difference_keeps_its_sign_and_the_comparison_says_which_is_larger():
    lines = ('people("Nigeria")', 'people("Brazil")', 'calculator("$1 - $2")')
    wf, _ = workflow([people, calculator], plan(*lines))
    output = str(await wf.run(user_msg="Which has more people, Nigeria or Brazil?"))
    assert "203,000,000 (Nigeria) - 223,000,000 (Brazil) = -20,000,000" in output
    assert "Brazil (223,000,000) is 20,000,000 more than Nigeria (203,000,000)" in output


async def test_each_value_says_which_call_it_came_from():
    tools = [get_weather, convert_c_to_f]
    wf, _ = workflow(tools, plan('get_weather("Oslo")', "convert_c_to_f($1)"))
    output = await wf.run(user_msg="How warm is it in Oslo, in Fahrenheit?")
    assert str(output) == "get weather (Oslo): 4; convert c to f (celsius 4): 39.2."


async def test_a_failed_part_of_the_question_is_named():
    lines = ('flight_price("Lisbon")', 'get_weather("Berlin")')
    wf, _ = workflow([flight_price, get_weather], plan(*lines), replans=0)
    output = await wf.run(user_msg="What does a flight to Lisbon cost, and how warm is Berlin?")
    assert str(output).startswith("flight price (Lisbon): 150.")
    assert 'Get weather ("Berlin") failed (ConnectionError: HTTP 503).' in str(output)


async def test_an_identical_pure_call_runs_once_in_a_plan():
    @policy(side_effect="pure")
    def capital(country: str) -> str:
        """The capital city of a country."""
        return "Oslo"

    lines = ['capital("Norway")'] * 6 + ["capital($6)"]
    wf, _ = workflow([capital], plan(*lines))
    output = await wf.run(user_msg="What is the capital of Norway?")
    assert [(t.id, t.tool) for t in output.summary.tasks] == [(1, "capital"), (7, "capital")]
    assert output.summary.tasks[1].args == {"country": {"$ref": 1}}  # $6 is task 1


async def test_a_rejected_call_planned_again_by_any_model_is_not_asked_again():
    @policy(requires_approval=True)
    def book_flight(city: str) -> str:
        """Book a return flight to a city."""
        return f"booked {city}"

    replan = "Thought: try again.\nAction: Replan(book it)"
    finish = "Thought: no.\nAction: Finish(Not booked.)"
    again = '2. book_flight("Rome")\n3. join()'
    llm = ScriptedLLM(['1. book_flight("Rome")\n2. join()', replan, again, finish])
    wf = LLMCompilerWorkflow(tools=[book_flight], llm=llm, max_replans=1, timeout=30)
    handler = wf.run(user_msg="Book a flight to Rome.")
    held = 0
    async for ev in handler.stream_events():
        if isinstance(ev, TaskApprovalRequest):
            held += 1
            handler.ctx.send_event(ev.respond(action="reject"))
    output = await handler
    assert held == 1 and str(output) == "Not booked."
    second = output.summary.tasks[-1]
    assert second.status == "error" and "not asked again" in str(second.output)

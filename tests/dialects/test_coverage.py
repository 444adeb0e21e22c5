"""A first plan gets the calls for names the question writes in the same place as one of
its calls' arguments, read from the question's shape (no word of any language)."""

from __future__ import annotations

import pytest

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.coverage import CoveringPlanParser, parallel_calls
from llm_compiler.dialects.plan_lines import parse_task_line
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.testing import ScriptedLLM


def tasks(*lines: str) -> list:
    return [parse_task_line(i, line, earlier=set(range(1, i))) for i, line in enumerate(lines, 1)]


@pytest.mark.parametrize(
    ("question", "lines", "added"),
    [
        ("What is the weather in Oslo and in Madrid?", ['w("Oslo")'], ["w('Madrid')"]),
        ("Ist es in Berlin wärmer als in Rom?", ['w("Berlin")'], ["w('Rom')"]),
        ("Which planet is bigger, Saturn or Uranus?", ['size("Saturn")'], ["size('Uranus')"]),
        ("¿Qué es más caro, Dune o Emma?", ['precio("Dune")'], ["precio('Emma')"]),
        (
            "Which is cheaper, a flight from Berlin to Paris or a flight from Amsterdam to Porto?",
            ['fly("Berlin", "Paris")'],
            ["fly('Amsterdam', 'Porto')"],
        ),
        (
            "Flights from Berlin to Paris and from Berlin to Oslo?",
            ['fly(origin="Berlin", destination="Paris")'],
            ["fly(origin='Berlin', destination='Oslo')"],
        ),
        # nothing in the same place: a modifier, another sentence, a noun before a name
        ("What is the weather in Oslo in Fahrenheit?", ['w("Oslo")'], []),
        ("How warm is it in Oslo, in Fahrenheit?", ['w("Oslo")'], []),
        ("Weather in Oslo? Give it in Fahrenheit.", ['w("Oslo")'], []),
        ("Wie viele Exemplare von Emma kann ich ausleihen?", ['copies("Emma")'], []),
        ("Was kostet ein Flug nach Rom?", ['fly("Rom")'], []),
        # a name a call already takes, and a call on a result, get nothing
        ("A flight from Berlin to Madrid, in USD?", ['fly("Berlin", "Madrid")', "usd($1)"], []),
    ],
)
def test_names_in_the_same_place_get_the_same_call(question, lines, added):
    assert parallel_calls(question, tasks(*lines)) == added


def test_the_calls_come_before_the_join_of_the_first_round_only():
    question = "What is the weather in Oslo and in Madrid?"
    parser = CoveringPlanParser(question=question)
    got = parser.feed('1. w("Oslo")\n2. jo') + parser.feed("in()\n" + END_OF_PLAN)
    assert [(t.id, t.tool, t.args) for t in got] == [(1, "w", ["Oslo"]), (2, "w", ["Madrid"])]
    assert parser.join_id == 3 and parser.joined
    later = CoveringPlanParser(question=question, round=1, known_ids=[1, 2, 3])
    assert [t.args for t in later.feed('4. w("Oslo")\n5. join()\n')] == [["Oslo"]]


async def test_a_constrained_first_round_calls_for_both_cities():
    def get_weather(city: str) -> float:
        """The temperature in a city, in degrees Celsius."""
        return {"Oslo": 4.0, "Madrid": 24.0}[city]

    llm = ScriptedLLM([f'1. get_weather("Oslo")\n2. join()\n{END_OF_PLAN}'], chat=False)
    wf = LLMCompilerWorkflow(
        tools=[get_weather],
        llm=llm,
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        timeout=30,
    )
    output = await wf.run(user_msg="What is the weather in Oslo and in Madrid?")
    assert [(t.round, t.args) for t in output.summary.tasks] == [
        (0, {"city": "Oslo"}),
        (0, {"city": "Madrid"}),
    ]
    assert "Madrid" in str(output) and "24" in str(output)

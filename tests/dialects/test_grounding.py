"""Grounded constrained decoding: plans write only what the question, the observations and
the tools' declarations hold; answers write observed values; failures are facts.

Acceptance is checked with the tests' GBNF recognizer (gbnf_check.py); the tests marked
``llm`` check the same grammars with llama.cpp's own parser.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import LLMCompilerDialect
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.dialects.grammar import joiner_grammar, plan_grammar
from llm_compiler.dialects.grounding import (
    MAX_NAME_WORDS,
    answer_values,
    compute_tool,
    declared_values,
    failed_calls,
    names,
    number_forms,
    plan_writable,
)
from llm_compiler.dialects.prompting import (
    PromptContext,
    RoundRecord,
    TaskRecord,
    declared_not_found,
    found_nothing,
)
from llm_compiler.engine.replan import failed_tasks, replan_reason
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools import Expression
from llm_compiler.tools.adapt import to_tool
from llm_compiler.tools.schema import tools_from_schemas

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gbnf_check import accepts  # noqa: E402

QUESTION = "Which is longer, the Danube or the Rhine, and by how much?"


def plan(*lines: str, start: int = 1) -> str:
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, start))
    return f"{body}{len(lines) + start}. join()\n{END_OF_PLAN}"


def grammar_for(question: str, tools: list, *tasks: TaskRecord) -> str:
    """The grammar the LLMCompiler dialect sends for `question` (after `tasks`)."""
    tools = [to_tool(t) for t in tools]
    rounds = [RoundRecord(tasks=list(tasks))] if tasks else []
    prompt = PromptContext(question, rounds=rounds, tools=tools, constrained=True, chat=False)
    known = {t.id for t in tasks}
    context = PlannerContext(
        prompt=prompt,
        tools=tools,
        constrained=True,
        next_id=max(known, default=0) + 1,
        known_ids=known,
        taken_ids=known,
    )
    request = LLMCompilerDialect().planner_request(context)
    return str(request.extras["grammar"])


# ------------------------------------------------------------ a new user's own tools


def flight_price(city: str) -> float:
    """The price of a return flight to a city, in US dollars."""
    return 180.0


def hotel_price(city: str, nights: int) -> float:
    """The price of a hotel in a city for some nights, in US dollars."""
    return 95.0 * nights


def convert_currency(amount: float, currency: str) -> float:
    """Convert an amount of US dollars into another currency (EUR, GBP, JPY)."""
    return amount * 0.92


def calculator(expression: Expression) -> float:
    """Evaluate an arithmetic expression."""
    return 0.0


def get_forecast(city: str) -> float:
    """Tomorrow's temperature in a city, in degrees Celsius."""
    return 4.0


def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert degrees Celsius to Fahrenheit."""
    return celsius * 9 / 5 + 32


TRAVEL = [flight_price, hotel_price, convert_currency, calculator]
WEATHER = [get_forecast, celsius_to_fahrenheit]


def test_a_plan_writes_the_question_s_values_not_the_examples():
    grammar = grammar_for("How much is a flight to Rome, in euros?", TRAVEL)
    assert accepts(grammar, plan('flight_price("Rome")', 'convert_currency($1, "EUR")'))
    # values of generated examples, or of nowhere
    assert not accepts(grammar, plan('flight_price("Paris")'))
    assert not accepts(grammar, plan('convert_currency(amount=20.0, currency="USD")'))
    assert not accepts(grammar, plan('calculator("8 + 3 * 10")'))


def test_a_number_comes_from_the_question_or_a_finding():
    grammar = grammar_for("How much do 3 nights at the hotel in Rome cost?", TRAVEL)
    assert accepts(grammar, plan('hotel_price("Rome", 3)'))
    assert not accepts(grammar, plan('hotel_price("Rome", 7)'))
    assert accepts(grammar, plan('hotel_price("Rome", 3)', 'calculator("$1 * 3")'))
    assert not accepts(grammar, plan('hotel_price("Rome", 3)', 'calculator("$1 * 100")'))


def test_a_tool_that_needs_a_number_nothing_wrote_is_called_only_on_a_result():
    grammar = grammar_for("Is it cold in Oslo tomorrow?", WEATHER)
    assert not accepts(grammar, plan("celsius_to_fahrenheit(32.0)"))
    assert accepts(grammar, plan('get_forecast("Oslo")', "celsius_to_fahrenheit($1)"))


def test_no_operator_and_no_tool_is_barred_by_the_question_s_words():
    question = "How much more does the flight to Rome cost than 3 nights at the hotel?"
    grammar = grammar_for(question, TRAVEL)
    lines = ('flight_price("Rome")', 'hotel_price("Rome", 3)', 'calculator("$1 + $2")')
    assert accepts(grammar, plan(*lines))
    assert accepts(grammar, plan(*lines[:2], 'calculator("$2 - $1")'))


def test_a_tool_the_question_names_is_allowed_never_required():
    question = "What is the weather in Oslo? Give it in Fahrenheit."
    grammar = grammar_for(question, WEATHER_NAMED)
    assert accepts(grammar, plan('get_weather("Oslo")', "convert_c_to_f($1)"))
    assert accepts(grammar, plan('get_weather("Oslo")'))


def get_weather(city: str) -> float:
    """The current temperature in a city, in degrees Celsius."""
    return 4.0


def convert_c_to_f(celsius: float) -> float:
    """Convert a temperature from degrees Celsius to degrees Fahrenheit."""
    return celsius * 9 / 5 + 32


WEATHER_NAMED = [get_weather, convert_c_to_f]


def test_strings_are_spans_of_the_question_in_any_language():
    grammar = grammar_for("Wie viel kostet ein Flug nach München?", TRAVEL)
    assert accepts(grammar, plan('flight_price("München")'))
    assert accepts(grammar, plan('flight_price("nach München")'))
    assert not accepts(grammar, plan('flight_price("Munich")'))
    assert not accepts(grammar, plan('flight_price("Mün")'))  # whole words only


def test_a_plan_may_copy_what_an_earlier_round_found():
    found = TaskRecord(1, "search", '1. search("Canberra")', "Canberra: capital of Australia.")
    failed = TaskRecord(
        2, "search", '2. search("Atlantis")', "Error: NotFound: No entry; try 'Nile'.", True
    )
    question = "What is the population of the country whose capital is Canberra?"
    grammar = grammar_for(question, demo_tools.TOOLS, found, failed)
    assert accepts(grammar, plan('lookup("Australia", "population")', start=3))
    assert not accepts(grammar, plan('search("Nile")', start=3))  # of a failed lookup
    assert not accepts(grammar, plan('search("Atlantis")', start=3))


def test_a_plan_may_copy_codes_its_tools_list():
    assert declared_values(TRAVEL) == {"convert_currency": ["EUR", "GBP", "JPY"]}
    grammar = grammar_for("What does a flight to Rome cost in euros?", TRAVEL)
    assert accepts(grammar, plan('flight_price("Rome")', 'convert_currency($1, "EUR")'))
    assert not accepts(grammar, plan('flight_price("Rome")', 'convert_currency($1, "Euro")'))
    assert not accepts(grammar, plan('flight_price("EUR")'))  # another tool's value
    assert declared_values(demo_tools.TOOLS) == {}  # "K2" of an example is no list


def test_a_replan_cannot_write_a_failed_call_of_one_argument_again():
    failed = TaskRecord(
        1, "flight_price", '1. flight_price("Rome")', "Error: NotFound: no flights", True
    )
    grammar = grammar_for("What does a flight to Rome or Milan cost?", TRAVEL, failed)
    assert not accepts(grammar, plan('flight_price("Rome")', start=2))
    assert accepts(grammar, plan('flight_price("Milan")', start=2))
    assert accepts(grammar, plan('flight_price("Rome or Milan")', start=2))


def test_a_rejected_call_is_not_planned_again_unchanged():
    rejected = TaskRecord(
        1, "flight_price", '1. flight_price("Rome")', "Error: a human rejected this call.", True
    )
    prompt = PromptContext("Flight to Rome?", rounds=[RoundRecord(tasks=[rejected])])
    assert failed_calls(prompt, TRAVEL) == {"flight_price": [("Rome",)]}
    assert failed_tasks(prompt.rounds[0]) == []  # no reason to plan it again
    grammar = grammar_for("Flight to Rome?", TRAVEL, rejected)
    assert not accepts(grammar, plan('flight_price("Rome")', start=2))


# ------------------------------------------------------------ facts, not words


@pytest.mark.parametrize(
    ("text", "is_error", "nothing"),
    [
        ("File does not exist", False, False),  # a result: what it says is the tool's
        ("No flights found", False, False),
        ("Error: NotFound: no flights to Atlantis", True, True),
        ("Error: ConnectionError: HTTP 503", True, True),
        ("", False, True),
        ("[]", False, True),
        ("None", False, True),
    ],
)
def test_found_nothing_is_a_fact_of_the_outcome(text, is_error, nothing):
    assert found_nothing(TaskRecord(1, "t", '1. t("x")', text, is_error)) is nothing


def test_a_transport_error_is_a_failure_not_a_declared_not_found():
    failed = TaskRecord(1, "t", '1. t("Berlin")', "Error: ConnectionError: HTTP 503", True)
    missing = TaskRecord(2, "t", '2. t("Atlantis")', "Error: NotFound: no such city", True)
    assert not declared_not_found(failed) and declared_not_found(missing)
    reason = replan_reason([failed])
    assert "failed" in reason and "HTTP 503" in reason


def test_failed_and_not_found_lookups_are_told_apart_from_findings():
    records = [
        TaskRecord(1, "search", '1. search("Dauphin")', "Error: NotFound: 'Dauphin'.", True),
        TaskRecord(2, "lookup", '2. lookup("X", "a")', "Error: LookupError: 'X'.", True),
        TaskRecord(3, "calculator", '3. calculator("$1 - $2")', None, skipped=True),
        TaskRecord(4, "search", '4. search("Rhine")', "Rhine: River. Length: about 1,230 km."),
    ]
    assert [found_nothing(t) for t in records] == [True, True, True, False]
    failed = failed_tasks(RoundRecord(tasks=records))
    reason = replan_reason(failed)
    assert [t.id for t in failed] == [1, 2]  # the skipped one follows from them
    assert 'search("Dauphin")' in reason and "Rhine" not in reason


def test_a_failure_about_a_name_found_by_another_task_is_no_reason_to_replan():
    records = [
        TaskRecord(1, "search", '1. search("Ada Lovelace")', "Ada Lovelace: Born 1815, died 1852."),
        TaskRecord(2, "lookup", '2. lookup("Ada Lovelace", "age")', "Error: no field 'age'", True),
    ]
    assert failed_tasks(RoundRecord(tasks=records)) == []
    records[0] = TaskRecord(1, "search", '1. search("Ada")', "Error: NotFound: 'Ada'.", True)
    assert [t.id for t in failed_tasks(RoundRecord(tasks=records))] == [1, 2]


#: A list of words in code: ``("calc", "math", "expr")``, ``"city town place".split()``,
#: ``frozenset("to end max".split())``, ``frozenset("""...""")``.
_WORD_LIST = re.compile(
    r'\(\s*"[a-z]+",\s*"[a-z]+",\s*"[a-z]+"|"(?:[a-z]+ ){2,}[a-z]+"\.split\(|frozenset\(\s*"""'
)

_JSON_TYPES = {"string", "number", "integer", "boolean", "array", "object", "null"}


def test_grounding_holds_no_list_of_words():
    """The rule is grep-able: no module that reads questions or makes plans' examples
    lists words of a language or of the demo's world."""
    root = Path(__file__).resolve().parents[2] / "src" / "llm_compiler"
    sources = [
        root / "dialects" / "grounding.py",
        root / "dialects" / "prompting.py",
        root / "engine" / "replan.py",
        root / "dialects" / "grammar.py",
        root / "dialects" / "selected_answer.py",
        root / "dialects" / "llmcompiler" / "examples.py",
        root / "engine" / "workflow.py",
    ]
    vocabulary = re.compile(r"\b(capital|population|river|mountain|planet|born|taller|city)\b")
    for source in sources:
        code = "\n".join(
            line for line in source.read_text().splitlines() if not line.lstrip().startswith("#")
        )
        outside = "".join(code.split('"""')[0::2]).lower()  # outside docstrings
        assert not vocabulary.findall(outside), source.name
        lists = [m.group() for m in _WORD_LIST.finditer(code)]
        assert not [w for w in lists if set(re.findall(r"[a-z]+", w)) - _JSON_TYPES], source.name


# ------------------------------------------------------------ answers and numbers


def test_numbers_are_offered_as_an_answer_writes_them():
    forms = number_forms(["Height: 4806.0", "Population: 38000000", "ratio 0.4286"])
    assert {"4806.0", "4806", "4,806", "38000000", "38", "0.43", "0.4"} <= set(forms)
    assert "0" not in forms


GROUNDED = joiner_grammar(numbers=["4806", "4,806", "4478", "328"], anchors=["328", "Mont Blanc"])


@pytest.mark.parametrize(
    ("answer", "ok"),
    [
        ("Mont Blanc is 328 m higher than the Matterhorn.", True),
        ("Mont Blanc (4,806 m) is 328 m higher.", True),
        ("I could not find the height of the Matterhorn.", True),
        ("Mont Blanc is 3280 m higher.", False),  # 328 and a digit more
        ("It is 4000 m higher.", False),  # a number nothing observed
        ("The answer is when it was measured.", False),  # states nothing found
    ],
)
def test_a_grounded_answer_writes_observed_numbers_and_states_a_finding(answer, ok):
    text = f"Thought: compare.\nAction: Finish({answer})"
    assert accepts(GROUNDED, text) is ok


def test_answer_values_come_from_the_question_and_what_was_found():
    rounds = [
        RoundRecord(
            tasks=[
                TaskRecord(1, "lookup", '1. lookup("K2", "height_m")', "8611.0"),
                TaskRecord(2, "search", '2. search("Peru")', "Error: NotFound: 'Peru' (2)", True),
            ]
        )
    ]
    numbers, anchors = answer_values(PromptContext("Is K2 higher than 8000 m?", rounds=rounds))
    assert {"8611", "8,611", "8000"} <= set(numbers)
    assert "8611" in anchors and "8000" not in anchors and "Peru" not in anchors


def test_names_leave_out_the_word_that_starts_a_sentence():
    texts = ["What's the capital of Norway? Give Oslo's size.", "The Statue of Liberty"]
    assert "Give" in names(texts)
    found = names(texts, starts=False)
    assert "Norway" in found and "Oslo" in found
    assert not {"What", "What's", "Give", "The"} & set(found)


def test_only_a_tool_that_declares_an_expression_is_the_calculator():
    def distance_calculate(point_a: list[float], point_b: list[float]) -> float:
        """Distance."""
        return 0.0

    def math(expr: str) -> float:
        """Evaluate an arithmetic expression."""
        return 0.0

    def rechner(ausdruck: Expression) -> float:
        """Rechnet."""
        return 0.0

    assert compute_tool([distance_calculate, demo_tools.search]) is None
    assert compute_tool([distance_calculate, math]) is None  # its words make no calculator
    assert compute_tool([math, rechner]) == "rechner"
    assert compute_tool(demo_tools.TOOLS) == "calculator"
    params = {"type": "object", "properties": {"e": {"type": "string", "format": "arithmetic"}},
              "required": ["e"]}  # fmt: skip
    (evaluate,) = tools_from_schemas([{"name": "evaluate", "parameters": params}], lambda *a: 0)
    assert compute_tool([evaluate]) == "evaluate"


def test_a_calculators_expression_computes_and_never_names():
    grammar = grammar_for("Is MSFT more than 2 times AAPL?", demo_tools.TOOLS)
    assert accepts(grammar, plan('lookup("MSFT", "population")', 'calculator("$1 - 2")'))
    assert not accepts(grammar, plan('calculator("MSFT - AAPL")'))  # names, not numbers
    assert accepts(plan_grammar(demo_tools.TOOLS), plan('calculator("MSFT - AAPL")'))


def test_the_demo_lookup_declares_its_fields_so_a_plan_names_one():
    grammar = plan_grammar(demo_tools.TOOLS)
    assert accepts(grammar, plan('lookup("Alan Turing", "death_year")'))
    assert not accepts(grammar, plan('lookup("Alan Turing", "age_of_death")'))


def test_a_long_question_gives_a_grammar_in_linear_time():
    question = " ".join(f"Name{i} and x." for i in range(20_000))
    start = time.perf_counter()
    writable = plan_writable(PromptContext(question), demo_tools.TOOLS)
    grammar = plan_grammar(demo_tools.TOOLS, max_tasks=2, writable=writable)
    run = names(["Ab " * 40_000])
    assert run[0] == " ".join(["Ab"] * MAX_NAME_WORDS) and len(run) == MAX_NAME_WORDS
    assert len(grammar) < 400_000
    assert time.perf_counter() - start < 5.0

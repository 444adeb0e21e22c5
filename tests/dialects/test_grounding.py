"""Grounded constrained decoding: names copied into plans, answers from observed values.

Acceptance is checked with the tests' GBNF recognizer (tests/unit/gbnf_check.py); the
tests marked ``llm`` check the same grammars with llama.cpp's own parser.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects.grammar import joiner_grammar, plan_grammar
from llm_compiler.dialects.grounding import (
    MAX_NAME_WORDS,
    answer_values,
    compares,
    compute_tool,
    excluded_operators,
    expression_numbers,
    failed_tasks,
    found_calls,
    found_nothing,
    later_tools,
    named_values,
    names,
    number_forms,
    operands,
    operands_found,
    plan_names,
    question_names,
    question_words,
    replan_reason,
    required_tool,
    text_result_ids,
)
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.plan import END_OF_PLAN

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from gbnf_check import accepts  # noqa: E402

QUESTION = "Which is longer, the Danube or the Rhine, and by how much?"


def plan(*lines: str) -> str:
    body = "".join(f"{i}. {line}\n" for i, line in enumerate(lines, 1))
    return f"{body}{len(lines) + 1}. join()\n{END_OF_PLAN}"


def test_names_are_capitalized_runs_and_their_parts():
    found = names(["How much higher is Mount Everest than K2?", "The Statue of Liberty"])
    assert found[:3] == ["The Statue of Liberty", "Statue of Liberty", "Mount Everest"]
    assert {"Everest", "Mount", "K2", "Liberty", "Statue", "How"} <= set(found)
    assert "of Liberty" not in found


def test_a_plan_string_that_starts_like_a_name_copies_one():
    grammar = plan_grammar(demo_tools.TOOLS, names=names([QUESTION]))
    assert accepts(grammar, plan('search("Danube")', 'search("Rhine")'))
    assert accepts(grammar, plan('lookup("Danube", "length_km")', 'calculator("$1 - 2")'))
    assert accepts(grammar, plan('search("the Rhine river")', 'search("2024-03-01")'))
    assert accepts(grammar, plan('search("Danube River")'))  # a name, then free text
    assert not accepts(grammar, plan('search("Dauphin")'))
    assert not accepts(grammar, plan('search("Reich")'))
    assert not accepts(grammar, plan('search("DNR")'))  # denied Dauphin, it wrote this
    assert not accepts(grammar, plan('search("Rhineland")'))  # a name runs on


def test_without_names_every_string_is_free():
    assert accepts(plan_grammar(demo_tools.TOOLS), plan('search("Dauphin")'))


def test_a_replan_may_copy_what_an_earlier_round_found():
    found = TaskRecord(1, "search", '1. search("Canberra")', "Canberra: capital of Australia.")
    failed = TaskRecord(
        2, "search", '2. search("Atlantis")', "No entry for 'Atlantis'. Try 'Nile'."
    )
    context = PromptContext("What is the population of the country whose capital is Canberra?")
    context = PromptContext(context.question, rounds=[RoundRecord(tasks=[found, failed])])
    allowed = plan_names(context)
    assert "Australia" in allowed and "Canberra" in allowed
    assert "Nile" not in allowed and "Atlantis" not in allowed  # from a lookup that failed


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
        ("It is 328 m higher", True),
        ("I could not find the height of the Matterhorn.", True),
        ("Mont Blanc is 4478 m higher.", True),  # observed, though not the difference
        ("Mont Blanc is 3280 m higher.", False),  # 328 and a digit more
        ("It is 4000 m higher.", False),  # a number nothing observed
        ("The answer is when it was measured.", False),  # states nothing found
    ],
)
def test_a_grounded_answer_writes_observed_numbers_and_states_a_finding(answer, ok):
    text = f"Thought: compare.\nAction: Finish({answer})"
    assert accepts(GROUNDED, text) is ok


def test_an_answer_from_nothing_found_says_so_and_every_answer_ends():
    nothing = joiner_grammar(numbers=["2"], anchors=[])
    assert accepts(nothing, "Thought: no.\nAction: Finish(I could not find the 2 rivers.)")
    assert not accepts(nothing, "Thought: no.\nAction: Finish(The Danube is longer.)")
    rambling = "The Danube is a long river in Europe and " * 4
    assert not accepts(GROUNDED, f"Thought: t\nAction: Finish({rambling} 328 m.)")
    assert not accepts(GROUNDED, f"Thought: t\nAction: Finish(328 m. {rambling * 2})")


def test_a_replan_reason_is_free_text():
    assert accepts(GROUNDED, "Thought: no.\nAction: Replan(look up 2 heights (in m))")


def test_answer_values_come_from_the_question_and_what_was_found():
    rounds = [
        RoundRecord(
            tasks=[
                TaskRecord(1, "lookup", '1. lookup("K2", "height_m")', "8611.0"),
                TaskRecord(2, "search", '2. search("Peru")', "No entry for 'Peru' (try 2 words)."),
            ]
        )
    ]
    numbers, anchors = answer_values(PromptContext("Is K2 higher than 8000 m?", rounds=rounds))
    assert {"8611", "8,611", "8000", "2"} <= set(numbers)
    assert "8611" in anchors and "8000" not in anchors and "Peru" not in anchors


def test_failed_and_not_found_lookups_are_told_apart_from_findings():
    records = [
        TaskRecord(1, "search", '1. search("Dauphin")', "No entry for 'Dauphin'."),
        TaskRecord(2, "lookup", '2. lookup("X", "a")', "LookupError: No entry for 'X'.", True),
        TaskRecord(3, "calculator", '3. calculator("$1 - $2")', None, skipped=True),
        TaskRecord(4, "search", '4. search("Rhine")', "Rhine: River. Length: about 1,230 km."),
    ]
    assert [found_nothing(t) for t in records] == [True, True, True, False]
    failed = failed_tasks(RoundRecord(tasks=records))
    reason = replan_reason(failed)
    assert [t.id for t in failed] == [1, 2]  # the skipped one follows from them
    assert 'search("Dauphin")' in reason and "No entry for 'Dauphin'." in reason
    assert "Rhine" not in reason


def test_tools_say_they_found_nothing_in_several_ways():
    for text in ("No company named 'Initech'.", "Unknown symbol 'X'.", "Item not found"):
        assert found_nothing(TaskRecord(1, "t", '1. t("x")', text))


def test_a_long_text_that_mentions_not_found_is_a_finding():
    text = "Rhine: River. " + "x " * 200 + "The source was not found until 1900."
    assert not found_nothing(TaskRecord(1, "search", '1. search("Rhine")', text))


def test_a_plan_that_must_compute_calls_the_calculator_before_join():
    grammar = plan_grammar(demo_tools.TOOLS, max_tasks=3, require="calculator")
    assert not accepts(grammar, plan('search("Danube")', 'search("Rhine")'))
    assert accepts(grammar, plan('search("Danube")', 'search("Rhine")', 'calculator("$1 - $2")'))
    assert accepts(grammar, plan('calculator("2 + 2")', 'search("Rhine")'))
    assert not accepts(grammar, plan('search("a")', 'search("b")', 'search("c")'))
    assert accepts(plan_grammar(demo_tools.TOOLS, require="missing"), plan('search("a")'))


def test_questions_that_compare_require_the_calculator_until_it_has_a_result():
    tools = demo_tools.TOOLS
    compare = PromptContext("How much higher is Mont Blanc than the Matterhorn?")
    assert required_tool(compare, tools) == "calculator"
    assert required_tool(PromptContext("What are the capitals of Italy and Spain?"), tools) is None
    assert required_tool(compare, [demo_tools.search]) is None  # nothing computes
    computed = TaskRecord(3, "calculator", '3. calculator("$1 - $2")', "328.0")
    done = PromptContext(compare.question, rounds=[RoundRecord(tasks=[computed])])
    assert required_tool(done, tools) is None
    failed = TaskRecord(3, "calculator", '3. calculator("$1 - $2")', None, skipped=True)
    again = PromptContext(compare.question, rounds=[RoundRecord(tasks=[failed])])
    assert required_tool(again, tools) == "calculator"
    assert compares("Which is longer, the Danube or the Rhine, and by how much?")
    assert compares("What is the combined population of Spain and Italy?")
    assert not compares("When was Ada Lovelace born and when did she die?")


def test_an_answer_to_a_quantity_states_a_number_found():
    found = TaskRecord(
        1, "search", '1. search("Canada")', "Canada: Population: about 40.1 million."
    )
    rounds = [RoundRecord(tasks=[found])]
    _, anchors = answer_values(PromptContext("What is the population of Canada?", rounds=rounds))
    assert "40.1" in anchors and "Canada" not in anchors
    _, anchors = answer_values(PromptContext("Tell me about Canada.", rounds=rounds))
    assert "Canada" in anchors


def test_a_failure_about_a_name_found_by_another_task_is_no_reason_to_replan():
    records = [
        TaskRecord(1, "search", '1. search("Ada Lovelace")', "Ada Lovelace: Born 1815, died 1852."),
        TaskRecord(2, "lookup", '2. lookup("Ada Lovelace", "age")', "Error: no field 'age'", True),
    ]
    assert failed_tasks(RoundRecord(tasks=records)) == []
    records[0] = TaskRecord(1, "search", '1. search("Ada")', "No entry for 'Ada'.")
    assert [t.id for t in failed_tasks(RoundRecord(tasks=records))] == [1, 2]


def test_only_a_tool_of_one_expression_is_the_calculator():
    def distance_calculate(point_a: list[float], point_b: list[float]) -> float:
        """Distance."""
        return 0.0

    def sales_calculate(company: str, years: int) -> float:
        """Growth."""
        return 0.0

    def math(expr: str) -> float:
        """Evaluate."""
        return 0.0

    assert compute_tool([distance_calculate, sales_calculate, demo_tools.search]) is None
    assert compute_tool([sales_calculate, math]) == "math"
    assert compute_tool(demo_tools.TOOLS) == "calculator"


def test_a_plan_that_computes_leaves_out_tools_of_text_results():
    assert later_tools(demo_tools.TOOLS) == ["search"]  # lookup gives numbers
    assert later_tools([demo_tools.search, demo_tools.calculator]) == []  # nothing else would
    grammar = plan_grammar(demo_tools.TOOLS, require="calculator", avoid=["search"])
    assert not accepts(grammar, plan('search("Danube")', 'calculator("$1 - 2")'))
    assert accepts(grammar, plan('lookup("Danube", "length_km")', 'calculator("$1 - 2")'))
    assert accepts(grammar, plan('calculator("2 - 1")', 'search("Danube")'))  # after it: any


def test_the_answer_to_a_comparison_quotes_the_calculation():
    rounds = [
        RoundRecord(
            tasks=[
                TaskRecord(1, "lookup", '1. lookup("Danube", "length_km")', "2850.0"),
                TaskRecord(2, "lookup", '2. lookup("Rhine", "length_km")', "1230.0"),
                TaskRecord(3, "calculator", '3. calculator("$1 - $2")', "1620.0"),
            ]
        )
    ]
    question = "How much longer is the Danube than the Rhine?"
    context = PromptContext(question, rounds=rounds, tools=demo_tools.TOOLS)
    numbers, anchors = answer_values(context)
    assert "1620" in anchors and "2850" not in anchors and "2850" in numbers


def test_a_calculators_expression_computes_and_never_names():
    grammar = plan_grammar(demo_tools.TOOLS, names=["MSFT", "AAPL", "K2"], compute="calculator")
    assert accepts(grammar, plan('lookup("K2", "height_m")', 'calculator("$1 - 2")'))
    assert accepts(grammar, plan('calculator("sqrt(16) * (3 - 1)")'))
    assert accepts(grammar, plan('calculator(expression="8849 - 8611")'))
    assert not accepts(grammar, plan('calculator("MSFT - AAPL")'))  # names, not numbers
    assert not accepts(grammar, plan('calculator(expression="Apple - Tesla")'))
    assert accepts(plan_grammar(demo_tools.TOOLS), plan('calculator("MSFT - AAPL")'))


def test_a_plan_may_copy_codes_its_tools_list():
    def convert_currency(amount: float, to_currency: str) -> float:
        """Convert US dollars into another currency (EUR, JPY, GBP)."""
        return amount

    question = PromptContext("What does one share of AAPL cost in euros?")
    allowed = plan_names(question, [convert_currency])
    assert {"AAPL", "EUR", "JPY", "GBP", "US"} <= set(allowed)
    assert "Convert" not in allowed  # a word of the description, not a code
    grammar = plan_grammar([convert_currency], names=allowed)
    assert accepts(grammar, plan('convert_currency(1.0, "EUR")'))
    assert not accepts(grammar, plan('convert_currency(1.0, "Euro")'))
    assert not accepts(plan_grammar([convert_currency], names=plan_names(question)),
                       plan('convert_currency(1.0, "EUR")'))  # fmt: skip


def test_the_demo_lookup_declares_its_fields_so_a_plan_names_one():
    grammar = plan_grammar(demo_tools.TOOLS)
    assert accepts(grammar, plan('lookup("Alan Turing", "death_year")'))
    assert not accepts(grammar, plan('lookup("Alan Turing", "age_of_death")'))
    assert not accepts(grammar, plan('lookup("Nile", "length")'))


@pytest.mark.parametrize(
    ("question", "without"),
    [
        ("What is the combined population of Spain and Italy?", "-"),
        ("What is the total length of the Nile and the Amazon in km?", "-"),
        ("How much longer is the Danube than the Rhine?", "+"),
        ("How old was Alan Turing when he died?", "+"),
        ("What is the difference between the total areas?", ""),  # both: either
        ("What is the capital of France?", ""),
    ],
)
def test_a_calculation_adds_up_or_takes_a_difference_as_the_question_asks(question, without):
    assert excluded_operators(question) == without


def test_an_expression_leaves_out_the_operators_the_question_does_not_ask_for():
    grammar = plan_grammar(demo_tools.TOOLS, compute="calculator", compute_without="-")
    assert accepts(grammar, plan('lookup("Nile", "length_km")', 'calculator("$1 + 2")'))
    assert not accepts(grammar, plan('lookup("Nile", "length_km")', 'calculator("$1 - 2")'))
    grammar = plan_grammar(demo_tools.TOOLS, compute="calculator", compute_without="+")
    assert accepts(grammar, plan('calculator("3 - 2")'))
    assert not accepts(grammar, plan('calculator("3 + 2")'))


def test_names_are_read_in_time_linear_in_the_question():
    """One name-like run of 400,000 short words, all of them labels to trim (trimmed word
    by word from the front of a list, ~13 s on a 2-core VM; linear, ~0.4 s); and the
    parts of a run of 40,000 capitalized words (every part of every length: cubic, 0.3 s
    for 400 words; parts of at most eight words: ~0.2 s)."""
    start = time.perf_counter()
    assert question_names("A " * 400_000) == []
    assert question_names(" ".join(f"Name{i} x." for i in range(50_000)))[-1] == "Name49999"
    run = names(["Ab " * 40_000])
    assert run[0] == " ".join(["Ab"] * MAX_NAME_WORDS) and len(run) == MAX_NAME_WORDS
    assert time.perf_counter() - start < 3.0


# ---------------------------------------------------------------- numbers in texts

EMPLOYEES = "How many employees do NVIDIA and Alphabet have together?"
PROFILES = [
    TaskRecord(
        1,
        "company_profile",
        '1. company_profile("NVIDIA")',
        "NVIDIA: ticker NVDA; CEO Jensen Huang; founded 1993; 36,000 employees.",
    ),
    TaskRecord(
        2,
        "company_profile",
        '2. company_profile("Alphabet")',
        "Alphabet: ticker GOOGL; CEO Sundar Pichai; founded 2015; 183,000 employees.",
    ),
]


def test_question_words_are_its_lower_case_words_with_the_nouns_they_name():
    words = question_words("How many years after Ada Lovelace was Albert Einstein born?")
    assert {"year", "born", "birth"} <= words
    assert not words & {"how", "many", "after", "ada", "lovelace"}  # asking words, names


def test_a_comparison_of_numbers_only_a_text_tool_describes_may_call_it():
    from evals import stocks

    assert later_tools(stocks.TOOLS, EMPLOYEES) == ["stock_price", "convert_currency"]
    prices = "How much more does a share of AAPL cost than a share of NVDA?"
    assert later_tools(stocks.TOOLS, prices) == ["company_profile", "convert_currency"]
    # The demo's search shares no word of a question with lookup's fields only.
    assert later_tools(demo_tools.TOOLS, "What is the combined population of Peru?") == ["search"]


def test_a_comparison_of_several_names_reads_the_field_its_words_name_most():
    born = "How many years after Marie Curie was Alan Turing born?"
    assert named_values(born, demo_tools.TOOLS) == {"lookup": {"field": ["birth_year"]}}
    one_person = "How old was Alan Turing when he died?"  # two fields of one person
    assert named_values(one_person, demo_tools.TOOLS) == {}
    assert named_values("What are the capitals of Peru and Chile?", demo_tools.TOOLS) == {}
    grammar = plan_grammar(demo_tools.TOOLS, narrow=named_values(born, demo_tools.TOOLS))
    ok = plan('lookup("Marie Curie", "birth_year")', 'lookup("Alan Turing", "birth_year")')
    assert accepts(grammar, ok)
    assert not accepts(grammar, plan('lookup("Alan Turing", "death_year")'))


def test_a_calculation_after_texts_writes_the_numbers_the_question_names():
    context = PromptContext(EMPLOYEES, rounds=[RoundRecord(tasks=PROFILES)], tools=[])
    numbers = expression_numbers(context)
    assert "36000" in numbers and "183000" in numbers
    assert "1993" not in numbers and "2015" not in numbers  # founding years: not asked
    assert text_result_ids(context) == {1, 2}
    assert operands_found(context)
    assert operands(context) == (["36000", "183000"], 2)
    grammar = plan_grammar(
        demo_tools.TOOLS,
        first_id=3,
        known_ids=[1, 2],
        compute="calculator",
        compute_texts=text_result_ids(context),
        compute_operands=operands(context),
        require="calculator",
        avoid=["search", "lookup"],
    )
    assert accepts(grammar, '3. calculator("36000 + 183000")\n4. join()\n' + END_OF_PLAN)
    assert not accepts(grammar, '3. calculator("183000 + 183000")\n4. join()\n' + END_OF_PLAN)
    assert not accepts(grammar, '3. calculator("$1 + $2")\n4. join()\n' + END_OF_PLAN)
    assert not accepts(grammar, '3. search("NVIDIA")\n4. calculator("36000 + 183000")\n5. join()\n'
                       + END_OF_PLAN)  # fmt: skip


def test_numbers_of_a_text_with_no_question_word_beside_them_all_stay():
    population = "Population: about 1.41 billion (2023 estimate). Area: 9,596,961 km²."
    china = TaskRecord(1, "search", '1. search("China")', f"China: {population}")
    asked = PromptContext("What is the combined population of China and India?",
                          rounds=[RoundRecord(tasks=[china])])  # fmt: skip
    assert "1410000000" in expression_numbers(asked)
    assert "9596961" not in expression_numbers(asked)
    other = PromptContext("What is the sum of China and India?", rounds=asked.rounds)
    assert "9596961" in expression_numbers(other)  # no word names one: every number
    assert not operands_found(PromptContext(asked.question, rounds=[]))


def test_a_replan_for_a_name_left_out_does_not_repeat_what_was_found():
    question = "How many more employees does Microsoft have than Apple?"
    found = TaskRecord(1, "company_profile", '1. company_profile("Microsoft")',
                       "Microsoft: ticker MSFT; 228,000 employees.")  # fmt: skip
    context = PromptContext(question, rounds=[RoundRecord(tasks=[found])])
    from evals import stocks

    assert found_calls(context, stocks.TOOLS) == {"company_profile": [("Microsoft",)]}
    grammar = plan_grammar(stocks.TOOLS, first_id=2, known_ids=[1],
                           names=plan_names(context, stocks.TOOLS),
                           exclude=found_calls(context, stocks.TOOLS))  # fmt: skip
    assert accepts(grammar, '2. company_profile("Apple")\n3. join()\n' + END_OF_PLAN)
    assert not accepts(grammar, '2. company_profile("Microsoft")\n3. join()\n' + END_OF_PLAN)
    apple = TaskRecord(2, "company_profile", '2. company_profile("Apple")', "Apple: 164,000.")
    both = PromptContext(question, rounds=[RoundRecord(tasks=[found, apple])])
    assert found_calls(both, stocks.TOOLS) == {}  # nothing left out: no constraint
    assert compares(question)  # "how many more ..."

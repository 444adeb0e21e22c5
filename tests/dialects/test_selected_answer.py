"""Answers rendered from the results the model selects, and replans that cannot repeat a
failed call (no model: grammars are checked with the tests' GBNF recognizer)."""

from __future__ import annotations

import sys
from pathlib import Path

from evals import stocks
from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects import ForcedJoin, LLMCompilerDialect
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.dialects.grammar import plan_grammar
from llm_compiler.dialects.grounding import failed_calls, plan_writable
from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
from llm_compiler.dialects.selected_answer import (
    answer_grammar,
    answer_parts,
    number_text,
    parse_selected,
    select_examples,
    selected_answer,
    units,
)
from llm_compiler.plan import END_OF_PLAN
from llm_compiler.tools.adapt import to_tool

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gbnf_check import accepts  # noqa: E402

T = TaskRecord
EGYPT = "Egypt: Country in North Africa. Capital: Cairo. Population: about 105 million."
NIGERIA = "Nigeria: Country in West Africa. Capital: Abuja. Population: about 223 million."
KILIMANJARO = (
    "Mount Kilimanjaro: Mountain in the Eastern Rift mountains, in Tanzania. "
    "Height: 5,895 m above sea level. Highest mountain in Africa."
)


def context(question: str, *tasks: TaskRecord, tools: list = demo_tools.TOOLS) -> PromptContext:
    rounds = [RoundRecord(tasks=list(tasks))]
    return PromptContext(question, rounds=rounds, tools=tools, constrained=True, chat=False)


def comparison() -> PromptContext:
    return context(
        "How much higher is Mont Blanc than the Matterhorn?",
        T(1, "lookup", '1. lookup("Mont Blanc", "height_m")', "4806.0"),
        T(2, "lookup", '2. lookup("Matterhorn", "height_m")', "4478.0"),
        T(3, "calculator", '3. calculator("$1 - $2")', "328.0"),
    )


def capitals() -> PromptContext:
    return context(
        "What are the capitals of Egypt and Nigeria?",
        T(1, "search", '1. search("Egypt")', EGYPT),
        T(2, "search", '2. search("Nigeria")', NIGERIA),
    )


def test_a_comparison_is_rendered_with_its_operands_and_needs_no_choice():
    answer = selected_answer(comparison())
    assert answer == (
        "lookup (Mont Blanc, height m): 4806; lookup (Matterhorn, height m): 4478; "
        "4806 - 4478 = 328; Mont Blanc (4806) is 328 more than Matterhorn (4478)."
    )


def test_the_sentence_that_fits_the_question_is_quoted_without_a_choice():
    assert selected_answer(capitals()) == "Egypt: capital Cairo; Nigeria: capital Abuja."
    tall = context(
        "How tall is Mount Kilimanjaro?",
        T(1, "search", '1. search("Mount Kilimanjaro")', KILIMANJARO),
    )
    assert selected_answer(tall) is None  # no sentence says "tall": the model picks
    grammar = answer_grammar(tall)
    assert accepts(grammar, " height 5,895 m above sea level (Mount Kilimanjaro).")


def test_the_model_picks_among_the_sentences_that_fit_equally_well():
    ctx = context(
        "Egypt and Nigeria, briefly.",
        T(1, "search", '1. search("Egypt")', EGYPT),
        T(2, "search", '2. search("Nigeria")', NIGERIA),
    )
    assert selected_answer(ctx) is None  # a choice is left
    grammar = answer_grammar(ctx)
    assert accepts(grammar, " capital Cairo (Egypt); capital Abuja (Nigeria).")
    assert accepts(
        grammar, " capital Cairo; population about 105 million (Egypt); capital Abuja (Nigeria)."
    )
    for wrong in (
        " capital Abuja (Egypt); capital Cairo (Nigeria).",  # a sentence of the other result
        " Egypt is the capital of Nigeria.",
        " capital Cairo (Egypt).",  # every result that answers is shown
        " capital Abuja (Nigeria); capital Cairo (Egypt).",
    ):
        assert not accepts(grammar, wrong), wrong


NO_GOOGL = "Error: NotFound: No company named 'GOOGL'."


def test_results_the_question_does_not_name_are_left_out_unless_used():
    ctx = context(
        "What is the price of GOOGL stock in yen?",
        T(1, "stock_price", '1. stock_price(symbol="GOOGL")', "201.4"),
        T(2, "stock_price", '2. stock_price(symbol="GOOGL")', "201.4"),
        T(3, "convert_currency", '3. convert_currency(amount=$1, to_currency="JPY")', "29605.8"),
        T(4, "company_profile", '4. company_profile(name="GOOGL")', NO_GOOGL, is_error=True),
        T(5, "stock_price", '5. stock_price(symbol="TSLA")', "338.7"),
        tools=stocks.TOOLS,
    )
    assert selected_answer(ctx) == (
        "stock price (GOOGL): 201.4; convert currency (amount 201.4, JPY): 29605.8."
    )


def test_nothing_found_says_what_was_looked_for():
    ctx = context(
        "What is the capital of Chile?",
        T(1, "search", '1. search("Chile")', "Error: NotFound: No entry for 'Chile'.", True),
        T(2, "lookup", '2. lookup("Chile", "population")', "Error: NotFound: no entry", True),
        T(3, "calculator", '3. calculator("$1 - $2")', "Skipped", skipped=True),
    )
    assert answer_parts(ctx) == []
    assert selected_answer(ctx) == 'I could not find "Chile".'
    assert accepts(answer_grammar(ctx), ' I could not find "Chile".')


def test_a_tool_that_failed_is_said_to_have_failed_not_to_have_found_nothing():
    ctx = context(
        "What is the weather in Berlin?",
        T(1, "search", '1. search("Berlin")', "Error: ConnectionError: HTTP 503", True),
    )
    answer = selected_answer(ctx)
    assert answer == 'Search ("Berlin") failed (ConnectionError: HTTP 503).'
    assert "could not find" not in answer


def test_observations_split_into_sentences_with_labels_as_words():
    assert units("Born 1756, died 1791. Austrian composer.") == [
        "Born 1756, died 1791",
        "Austrian composer",
    ]
    assert units("Population: about 68.4 million (2024 estimate). Area: 551,695 km².") == [
        "population about 68.4 million (2024 estimate)",
        "area 551,695 km²",
    ]


def test_finish_examples_become_rendered_answers_and_replans_are_left_out():
    text = select_examples(demo_tools.JOINER_EXAMPLES, demo_tools.TOOLS)
    assert "Answer: Italy: capital Rome; Spain: capital Madrid." in text
    assert (
        "Answer: lookup (Mont Blanc, height m): 4806; lookup (Matterhorn, height m): 4478; "
        "4806 - 4478 = 328; Mont Blanc (4806) is 328 more than Matterhorn (4478)." in text
    )
    assert "Replan" not in select_examples(
        'Question: Q?\n1. search("X")\nObservation: X: y.\nThought: t\nAction: Replan(more)\n'
        "<END_OF_RESPONSE>\n"
    )


def test_the_select_joiner_answers_without_a_call_when_nothing_is_left_to_choose():
    dialect = LLMCompilerDialect(joiner="select")
    assert isinstance(dialect, ForcedJoin)
    decision = dialect.forced_decision(comparison())
    assert decision is not None and decision.action == "finish" and "= 328" in decision.content
    open_question = context("Egypt, briefly.", T(1, "search", '1. search("Egypt")', EGYPT))
    assert dialect.forced_decision(open_question) is None
    request = dialect.joiner_request(open_question)
    assert request.prompt is not None and request.prompt.endswith("Answer:")
    assert "unit0" in request.extras["grammar"]
    assert parse_selected(" Egypt: capital Cairo; Nigeria: capital Abuja.").content.startswith(
        "Egypt"
    )
    # Unconstrained (or chat) models get the Thought/Action joiner.
    free = PromptContext(capitals().question, rounds=capitals().rounds, chat=False)
    assert dialect.forced_decision(free) is None
    assert "grammar" not in dialect.joiner_request(free).extras
    assert dialect.parse_decision("Thought: t\nAction: Finish(Cairo)").content == "Cairo"


def yangtze() -> PromptContext:
    return context(
        "How much longer is the Amazon than the Yangtze, in km?",
        T(1, "lookup", '1. lookup("Amazon", "length_km")', "6400.0"),
        T(
            2,
            "lookup",
            '2. lookup("Yangtze", "height_m")',
            "Error: no field 'height_m'",
            is_error=True,
        ),
        T(3, "calculator", '3. calculator("$1 - $2")', "Skipped", skipped=True),
    )


def test_failed_calls_are_the_literal_calls_that_found_nothing():
    assert failed_calls(yangtze(), demo_tools.TOOLS) == {"lookup": [("Yangtze", "height_m")]}


def test_a_replan_cannot_write_a_call_that_found_nothing_again():
    ctx = yangtze()
    grammar = plan_grammar(
        demo_tools.TOOLS, first_id=4, known_ids=[1, 2, 3], writable=plan_writable(ctx, ctx.tools)
    )

    def ok(line: str) -> bool:
        return accepts(grammar, f"4. {line}\n5. join()\n{END_OF_PLAN}")

    assert not ok('lookup("Yangtze", "height_m")')
    assert not ok('lookup(name="Yangtze", field="height_m")')
    assert ok('lookup("Yangtze", "length_km")')
    assert ok('lookup("Amazon", "height_m")')
    assert ok('search("Yangtze")')
    assert ok('lookup($1, "height_m")')


def yangtze_replan_grammar() -> str:
    """The demo planner's grammar for the replan of the Yangtze question."""
    dialect = LLMCompilerDialect(demo_tools.PLANNER_EXAMPLES)
    planner = PlannerContext(
        prompt=yangtze(),
        tools=[to_tool(t) for t in demo_tools.TOOLS],
        round=1,
        next_id=4,
        known_ids=frozenset({1, 2, 3}),
        constrained=True,
    )
    return str(dialect.planner_request(planner).extras["grammar"])


def test_the_planner_of_a_replan_gets_the_exclusions():
    grammar = yangtze_replan_grammar()
    assert not accepts(
        grammar,
        f'4. lookup("Yangtze", "height_m")\n5. calculator("$1 - $4")\n6. join()\n{END_OF_PLAN}',
    )
    assert accepts(
        grammar,
        f'4. lookup("Yangtze", "length_km")\n5. calculator("$1 - $4")\n6. join()\n{END_OF_PLAN}',
    )


async def test_a_run_with_the_select_joiner_makes_no_joiner_call_when_the_answer_is_forced():
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    def lookup(name: str) -> float:
        """The height of a mountain, in metres."""
        return {"Mont Blanc": 4806.0, "Matterhorn": 4478.0}[name]

    plan = '1. lookup("Mont Blanc")\n2. lookup("Matterhorn")\n3. calculator("$1 - $2")\n4. join()\n'
    llm = ScriptedLLM([plan + END_OF_PLAN], chat=False)
    wf = LLMCompilerWorkflow(
        tools=[lookup, demo_tools.calculator],
        llm=llm,
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        timeout=30,
    )
    output = await wf.run(user_msg="How much higher is Mont Blanc than the Matterhorn?")
    assert str(output) == (
        "lookup (Mont Blanc): 4806; lookup (Matterhorn): 4478; 4806 - 4478 = 328; "
        "Mont Blanc (4806) is 328 more than Matterhorn (4478)."
    )
    assert len(llm.calls) == 1  # the plan only


def test_an_answer_about_part_of_a_question_says_what_it_could_not_find():
    ctx = context(
        "What are the capitals of Egypt and Peru?",
        T(1, "search", '1. search("Egypt")', EGYPT),
        T(2, "search", '2. search("Peru")', "Error: NotFound: No entry for 'Peru'.", True),
    )
    grammar = answer_grammar(ctx)
    assert accepts(grammar, ' Egypt: capital Cairo. I could not find "Peru".')
    assert not accepts(grammar, " Egypt: capital Cairo.")


def test_a_replan_cannot_refer_to_a_result_that_failed():
    grammar = yangtze_replan_grammar()
    lookup = '4. lookup("Yangtze", "length_km")\n'
    assert not accepts(grammar, f'{lookup}5. calculator("$1 - $2")\n6. join()\n{END_OF_PLAN}')
    assert not accepts(grammar, f"{lookup}5. calculator($2)\n6. join()\n{END_OF_PLAN}")
    assert accepts(grammar, f"{lookup}5. calculator($1)\n6. join()\n{END_OF_PLAN}")
    assert accepts(grammar, f'{lookup}5. calculator("$4 - $1")\n6. join()\n{END_OF_PLAN}')
    assert not accepts(grammar, f'{lookup}5. calculator("($1 - $4) / 2")\n6. join()\n{END_OF_PLAN}')
    assert not accepts(grammar, f'{lookup}5. calculator("$1 - $1")\n6. join()\n{END_OF_PLAN}')
    assert not accepts(grammar, f'{lookup}5. calculator("$14 - $1")\n6. join()\n{END_OF_PLAN}')


def test_varied_examples_show_several_shapes_with_the_runs_tools():
    from llm_compiler.dialects.llmcompiler.examples import varied_examples

    tools = [to_tool(t) for t in stocks.TOOLS]
    text = varied_examples(tools, "calculator")
    plans = [p for p in text.split("Question: ") if p]
    assert len(plans) == 4
    parallel, chain, compare, single = plans
    assert (
        "1. stock_price(" in parallel and "2. stock_price(" in parallel and "3. join()" in parallel
    )
    assert "3. convert_currency(amount=$1" in chain and "4. join()" in chain
    assert chain.startswith(  # as users ask for it
        "Stock price for symbol 1 and symbol 2; convert currency of the one for symbol 1 in "
        "to currency 1.\n"
    )
    assert '3. calculator(expression="$1 - $2")' in compare
    assert single.count("(") == 2 and 'company_profile(name="name 1")' in single


def test_a_call_of_one_argument_that_failed_is_not_planned_again():
    failed = T(1, "search", '1. search("Peru")', "Error: NotFound: No entry.", is_error=True)
    ctx = context("What is the capital of Peru?", failed)
    assert failed_calls(ctx, demo_tools.TOOLS) == {"search": [("Peru",)]}


def test_a_calculation_writes_only_numbers_of_the_question_and_of_findings():
    question = context("How much more does a share of MSFT cost than a share of AAPL?")
    grammar = plan_grammar(stocks.TOOLS, writable=plan_writable(question, stocks.TOOLS))
    plan = '1. stock_price("MSFT")\n2. stock_price("AAPL")\n3. calculator("{}")\n4. join()\n'
    assert accepts(grammar, plan.format("$1 - $2") + END_OF_PLAN)
    assert not accepts(grammar, plan.format("($1 - $2) / 2") + END_OF_PLAN)  # no 2 written
    assert not accepts(grammar, plan.format("(8849 - 8611) / 2") + END_OF_PLAN)
    found = context(
        question.question,
        T(1, "stock_price", '1. stock_price("MSFT")', "512.0"),
        T(2, "stock_price", '2. stock_price("AAPL")', "229.5"),
        tools=stocks.TOOLS,
    )
    replan = plan_grammar(
        stocks.TOOLS, first_id=3, known_ids=[1, 2], writable=plan_writable(found, stocks.TOOLS)
    )
    assert accepts(replan, f'3. calculator("512.0 - 229.5")\n4. join()\n{END_OF_PLAN}')
    assert not accepts(replan, f'3. calculator("512.0 - 229")\n4. join()\n{END_OF_PLAN}')


def test_the_note_on_what_was_not_found_names_only_names_of_the_question():
    brazil = "Brazil: Country in South America. Capital: Brasília. Population: about 203 million."
    ctx = context(
        "What is the population of Brazil?",
        T(1, "search", '1. search("Brazil")', brazil),
        T(2, "lookup", '2. lookup("population", "area_km2")', "Error: NotFound: x", True),
    )
    answer = selected_answer(ctx)
    assert answer is not None and "203 million" in answer
    assert answer.endswith('I could not find "population".')  # the failed lookup's words
    peru = context(
        "What are the populations of Egypt and Peru?",
        T(1, "search", '1. search("Egypt")', EGYPT),
        T(2, "search", '2. search("Peru")', "Error: NotFound: No entry for 'Peru'.", True),
    )
    assert 'I could not find "Peru".' in (selected_answer(peru) or answer_grammar(peru))


def test_a_replan_of_a_failed_field_takes_a_value_the_error_named():
    from llm_compiler.dialects.grounding import suggested_values

    error = (
        "Error: Leonardo da Vinci has no field 'height_m'; known fields: birth_year, death_year."
    )
    ctx = context(
        "How old was Leonardo da Vinci when he died?",
        T(1, "lookup", '1. lookup("Leonardo da Vinci", "height_m")', error, is_error=True),
        T(2, "lookup", '2. lookup("Leonardo da Vinci", "length_km")', error, is_error=True),
    )
    suggest = suggested_values(ctx, demo_tools.TOOLS)
    assert suggest == {"lookup": {("Leonardo da Vinci",): ["birth_year", "death_year"]}}
    grammar = plan_grammar(demo_tools.TOOLS, first_id=3, writable=plan_writable(ctx, ctx.tools))

    def ok(line: str) -> bool:
        return accepts(grammar, f"3. {line}\n4. join()\n{END_OF_PLAN}")

    assert ok('lookup("Leonardo da Vinci", "death_year")')
    assert ok('lookup("Leonardo da Vinci", "birth_year")')
    assert not ok('lookup("Leonardo da Vinci", "population")')  # the error named others
    assert not ok('lookup("Leonardo da Vinci", "height_m")')
    assert ok('lookup("Vinci", "population")')  # another name: any field
    assert ok('lookup("Leonardo", "population")')  # another span
    assert not ok('lookup("da Vinci died", "population")')  # no span of the question
    # An error that names no value of the enum leaves every other value.
    failed = T(1, "lookup", ctx.rounds[0].tasks[0].text, "Error: no entry", is_error=True)
    plain = context(ctx.question, failed)
    assert suggested_values(plain, demo_tools.TOOLS) == {}


def test_nothing_found_names_what_the_question_wrote_as_a_name():
    ctx = context(
        "How long is the Volga river?",
        T(1, "search", '1. search("Volga river")', "Error: NotFound: no entry", True),
        T(2, "lookup", '2. lookup("volga", "length_km")', "Error: NotFound: no entry", True),
    )
    assert selected_answer(ctx) == 'I could not find "Volga river" or "volga".'


def test_of_the_values_an_error_named_a_replan_takes_those_the_question_names():
    from llm_compiler.dialects.grounding import suggested_values

    error = "Error: Norway has no field 'height_m'; known fields: population, area_km2."
    ctx = context(
        "What is the combined area of Norway and Switzerland in km2?",
        T(1, "lookup", '1. lookup("Norway", "height_m")', error, is_error=True),
    )
    assert suggested_values(ctx, demo_tools.TOOLS) == {"lookup": {("Norway",): ["area_km2"]}}


def test_numbers_are_written_as_an_answer_writes_them():
    assert number_text("48.30000000000001") == "48.3"  # a float's noise, not a digit of it
    assert number_text("4806.0") == "4806"
    assert number_text("107600000.0") == "107,600,000"
    assert number_text("0.00001") == "0.00001"
    assert number_text("181.2 USD") == "181.2 USD"


def test_a_calculation_of_numbers_read_from_texts_is_the_answers_last_part():
    ctx = context(
        "How many more employees does Microsoft have than Apple?",
        T(1, "company_profile", '1. company_profile("Microsoft")', "Microsoft: 228,000 employees."),
        T(2, "company_profile", '2. company_profile("Apple")', "Apple: 164,000 employees."),
        T(3, "calculator", '3. calculator("$1 - $2")', "Error: not arithmetic", is_error=True),
        T(4, "calculator", '4. calculator("228000 - 164000")', "64000.0"),
        tools=stocks.TOOLS,
    )
    answer = selected_answer(ctx)
    assert answer is not None and answer.endswith("; 228000 - 164000 = 64,000.")
    assert answer.startswith("Microsoft: 228,000 employees; Apple: 164,000 employees")


def test_a_which_question_on_two_numbers_says_which_is_larger_and_by_how_much():
    ctx = context(
        "Which planet is bigger, Mars or Venus?",
        T(1, "lookup", '1. lookup("Mars", "diameter_km")', "6779.0"),
        T(2, "lookup", '2. lookup("Venus", "diameter_km")', "12104.0"),
    )
    answer = selected_answer(ctx)
    assert answer is not None and answer.endswith("Venus (12,104) is 5325 more than Mars (6779).")


def test_three_numbers_of_one_tool_name_the_highest_and_the_lowest():
    ctx = context(
        "Welcher Planet ist am größten: Mars, Venus oder Merkur?",
        T(1, "lookup", '1. lookup("Mars", "diameter_km")', "6779.0"),
        T(2, "lookup", '2. lookup("Venus", "diameter_km")', "12104.0"),
        T(3, "lookup", '3. lookup("Merkur", "diameter_km")', "4879.0"),
    )
    answer = selected_answer(ctx)
    assert answer is not None and answer.endswith("highest: Venus (12,104); lowest: Merkur (4879).")


def _two_calls(question: str, second: str, results: tuple[str, str]) -> str:
    """The answer to two calls of one tool: ``trip("Berlin", "Paris")`` and `second`."""

    def trip(origin: str, destination: str) -> str:
        """A trip's price or length."""
        return ""

    ctx = context(
        question,
        T(1, "trip", '1. trip("Berlin", "Paris")', results[0]),
        T(2, "trip", f"2. {second}", results[1]),
        tools=[trip],
    )
    return str(selected_answer(ctx))


def test_calls_that_differ_in_several_arguments_are_labelled_by_those():
    question = "Which is cheaper, Berlin to Paris or Amsterdam to Porto?"
    other = 'trip(origin="Amsterdam", destination="Porto")'
    answer = _two_calls(question, other, ("98.0", "87.0"))
    assert answer.endswith("Berlin, Paris (98) is 11 more than Amsterdam, Porto (87).")
    same = _two_calls("Berlin to Paris?", 'trip("Berlin", "Paris")', ("98.0", "98.0"))
    assert "more than" not in same


def test_numbers_in_texts_of_one_shape_compare_and_others_do_not():
    question, other = "Berlin to Paris or to Rome?", 'trip("Berlin", "Rome")'
    answer = _two_calls(question, other, ("about 11 minutes", "about 1,017 minutes"))
    assert answer.endswith("Rome (1017) is 1006 more than Paris (11).")
    assert "more than" not in _two_calls(question, other, ("about 11 minutes", "17 stops"))


def test_a_difference_is_shown_as_the_calculator_took_it_with_labels():
    ctx = context(
        "How many years after Bohr was Einstein born?",
        T(1, "lookup", '1. lookup("Bohr", "birth_year")', "1885.0"),
        T(2, "lookup", '2. lookup("Einstein", "birth_year")', "1879.0"),
        T(3, "calculator", '3. calculator("$2 - $1")', "-6.0"),
    )
    answer = str(selected_answer(ctx))
    assert "1879 (Einstein) - 1885 (Bohr) = -6;" in answer
    assert "Bohr (1885) is 6 more than Einstein (1879)." in answer
    written = context(
        "How many more employees does Apple have than Microsoft?",
        T(1, "company", '1. company("Apple")', "164000"),
        T(2, "company", '2. company("Microsoft")', "228000"),
        T(3, "calculator", '3. calculator("164000 - 228000")', "-64000.0"),
        tools=[*demo_tools.TOOLS, company],
    )
    assert "164,000 (Apple) - 228,000 (Microsoft) = -64,000;" in str(selected_answer(written))


async def test_a_negative_result_keeps_its_sign_without_a_joiner_call():
    """``calculator("120 - 200")`` = -80 is a balance change downwards: never ``200 - 120
    = 80``."""
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    def balance(month: str) -> float:
        """The account's balance at the end of a month, in euros."""
        return {"March": 120.0, "April": 200.0}[month]

    plan = '1. balance("March")\n2. balance("April")\n3. calculator("120 - 200")\n4. join()\n'
    llm = ScriptedLLM([plan + END_OF_PLAN], chat=False)
    wf = LLMCompilerWorkflow(
        tools=[balance, demo_tools.calculator],
        llm=llm,
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        timeout=30,
    )
    output = str(await wf.run(user_msg="By how much did my balance change from March to April?"))
    assert "120 (March) - 200 (April) = -80" in output
    assert "200 - 120" not in output and "= 80" not in output
    assert len(llm.calls) == 1  # the plan only


def company(name: str) -> int:
    """A company's number of employees."""
    return 0


def test_each_value_is_labelled_by_its_tool_and_arguments():
    def flight_price(city: str) -> float:
        """A return flight's price, in US dollars."""
        return 180.0

    def hotel_price(city: str) -> float:
        """A night's hotel price, in US dollars."""
        return 95.0

    def convert_currency(amount: float, currency: str) -> float:
        """Convert US dollars into another currency (EUR, GBP)."""
        return 194.4

    ctx = context(
        "What do a flight and a hotel night in Lisbon cost, the flight in EUR?",
        T(1, "flight_price", '1. flight_price("Lisbon")', "180.0"),
        T(2, "convert_currency", '2. convert_currency($1, "EUR")', "165.6"),
        T(3, "hotel_price", '3. hotel_price("Lisbon")', "95.0"),
        tools=[flight_price, hotel_price, convert_currency],
    )
    assert selected_answer(ctx) == (
        "flight price (Lisbon): 180; convert currency (amount 180, EUR): 165.6; "
        "hotel price (Lisbon): 95."
    )


# A bookshop, as a new user writes it: the answer says which parts got no result,
# shows no value nobody asked for and no name nobody wrote.
PRICES = {"Dune": 11.0, "Emma": 8.5, "Ulysses": 14.0}


def book_price(title: str) -> float:
    """The price of a book, in euros."""
    return PRICES[title]


def delivery_days(title: str) -> int:
    """How many days delivery of a book to your home takes."""
    return {"Dune": 2, "Emma": 4, "Ulysses": 6}[title]


def copies_in_stock(title: str, branch: str) -> int:
    """How many copies of a book a branch of the shop has in stock."""
    return 3


BOOKSHOP = [book_price, delivery_days, copies_in_stock]
DELIVERY = "How long does delivery take for Dune, for Emma and for Ulysses?"


async def _bookshop_answer(question: str, plan: str) -> tuple[str, int]:
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    llm = ScriptedLLM([plan + END_OF_PLAN], chat=False)
    wf = LLMCompilerWorkflow(
        tools=BOOKSHOP,
        llm=llm,
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        max_replans=0,
        timeout=30,
    )
    return str(await wf.run(user_msg=question)), len(llm.calls)


async def test_an_answer_names_the_parts_of_the_question_no_call_answered():
    plan = (
        '1. delivery_days("Dune")\n2. book_price("Dune")\n3. book_price("Emma")\n'
        '4. book_price("Ulysses")\n5. join()\n'
    )
    answer, calls = await _bookshop_answer(DELIVERY, plan)
    assert answer.startswith("delivery days (Dune): 2.")
    assert "No result for delivery days (Emma) or delivery days (Ulysses)." in answer
    assert not any(str(p) in answer for p in (11, 8.5, 14))  # no price: nobody asked
    assert "more than" not in answer and "highest" not in answer
    assert calls == 1


async def test_an_answer_never_shows_a_name_the_question_did_not_write_as_found():
    plan = '1. copies_in_stock("Dune", "Downtown")\n2. join()\n'
    answer, _ = await _bookshop_answer("How many copies of Dune are in stock?", plan)
    assert "Downtown" not in answer and "3" not in answer
    assert "could not find" in answer
    named = '1. copies_in_stock("Dune", "Riverside")\n2. join()\n'
    answer, _ = await _bookshop_answer("How many copies of Dune does Riverside have?", named)
    assert answer == "copies in stock (Dune, Riverside): 3."


async def test_an_answer_to_every_part_adds_no_note():
    plan = (
        '1. delivery_days("Dune")\n2. delivery_days("Emma")\n3. delivery_days("Ulysses")\n'
        "4. join()\n"
    )
    answer, _ = await _bookshop_answer(DELIVERY, plan)
    assert "No result" not in answer
    assert "delivery days (Ulysses): 6" in answer

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
from llm_compiler.dialects.grounding import failed_calls, plan_names
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
    assert answer == "Mont Blanc (height m): 4806; Matterhorn (height m): 4478; 4806 - 4478 = 328."


def test_the_sentence_that_fits_the_question_is_quoted_without_a_choice():
    assert selected_answer(capitals()) == "Egypt: capital Cairo; Nigeria: capital Abuja."
    tall = context(
        "How tall is Mount Kilimanjaro?",
        T(1, "search", '1. search("Mount Kilimanjaro")', KILIMANJARO),
    )
    assert selected_answer(tall) == "Mount Kilimanjaro: height 5,895 m above sea level."


def test_the_model_picks_among_the_sentences_that_fit_equally_well():
    ctx = context(
        "Tell me about Egypt and Nigeria.",
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


def test_results_the_question_does_not_name_are_left_out_unless_used():
    ctx = context(
        "What is the price of GOOGL stock in yen?",
        T(1, "stock_price", '1. stock_price(symbol="GOOGL")', "201.4"),
        T(2, "stock_price", '2. stock_price(symbol="GOOGL")', "201.4"),
        T(3, "convert_currency", '3. convert_currency(amount=$1, to_currency="JPY")', "29605.8"),
        T(4, "company_profile", '4. company_profile(name="GOOGL")', "No company named 'GOOGL'."),
        T(5, "stock_price", '5. stock_price(symbol="TSLA")', "338.7"),
        tools=stocks.TOOLS,
    )
    assert selected_answer(ctx) == "GOOGL: 201.4; convert currency of 201.4, JPY: 29605.8."


def test_nothing_found_says_what_was_looked_for():
    ctx = context(
        "What is the capital of Chile?",
        T(1, "search", '1. search("Chile")', "No entry for 'Chile'."),
        T(2, "lookup", '2. lookup("Chile", "population")', "Error: no entry", is_error=True),
        T(3, "calculator", '3. calculator("$1 - $2")', "Skipped", skipped=True),
    )
    assert answer_parts(ctx) == []
    assert selected_answer(ctx) == 'I could not find "Chile".'
    assert accepts(answer_grammar(ctx), ' I could not find "Chile".')


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
        "Answer: Mont Blanc (height m): 4806; Matterhorn (height m): 4478; 4806 - 4478 = 328."
        in text
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
    open_question = context("Tell me about Egypt.", T(1, "search", '1. search("Egypt")', EGYPT))
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
        demo_tools.TOOLS,
        first_id=4,
        known_ids=[1, 2, 3],
        names=plan_names(ctx, demo_tools.TOOLS),
        exclude=failed_calls(ctx, demo_tools.TOOLS),
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
    assert str(output) == "Mont Blanc: 4806; Matterhorn: 4478; 4806 - 4478 = 328."
    assert len(llm.calls) == 1  # the plan only


def test_an_answer_about_part_of_a_question_says_what_it_could_not_find():
    ctx = context(
        "What are the capitals of Egypt and Peru?",
        T(1, "search", '1. search("Egypt")', EGYPT),
        T(2, "search", '2. search("Peru")', "No entry for 'Peru'."),
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
    assert accepts(grammar, f'{lookup}5. calculator("($1 - $4) / 2")\n6. join()\n{END_OF_PLAN}')
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
    assert "2. convert_currency(amount=$1" in chain and "3. join()" in chain
    assert chain.startswith("Stock price for Initech in USD.\n")  # as users ask for it
    assert '3. calculator(expression="$1 - $2")' in compare
    assert single.count("(") == 2 and "company_profile(name=" in single  # the tool's words
    assert "Ada Lovelace" not in text  # a company, not a person, for company_profile(name)


def test_a_call_of_one_argument_that_failed_may_be_planned_again():
    ctx = context("What is the capital of Peru?", T(1, "search", '1. search("Peru")', "No entry."))
    assert failed_calls(ctx, demo_tools.TOOLS) == {}


def test_a_calculation_writes_only_numbers_of_the_question_and_of_findings():
    from llm_compiler.dialects.grounding import expression_numbers

    question = PromptContext("How much more does a share of MSFT cost than a share of AAPL?")
    grammar = plan_grammar(
        stocks.TOOLS, compute="calculator", compute_numbers=expression_numbers(question)
    )
    plan = '1. stock_price("MSFT")\n2. stock_price("AAPL")\n3. calculator("{}")\n4. join()\n'
    assert accepts(grammar, plan.format("$1 - $2") + END_OF_PLAN)
    assert accepts(grammar, plan.format("($1 - $2) / 2") + END_OF_PLAN)
    assert not accepts(grammar, plan.format("(8849 - 8611) / 2") + END_OF_PLAN)
    found = context(
        question.question,
        T(1, "stock_price", '1. stock_price("MSFT")', "512.0"),
        T(2, "stock_price", '2. stock_price("AAPL")', "229.5"),
        tools=stocks.TOOLS,
    )
    replan = plan_grammar(
        stocks.TOOLS,
        first_id=3,
        known_ids=[1, 2],
        compute="calculator",
        compute_numbers=expression_numbers(found),
    )
    assert accepts(replan, f'3. calculator("512.0 - 229.5")\n4. join()\n{END_OF_PLAN}')
    assert not accepts(replan, f'3. calculator("512.0 - 229")\n4. join()\n{END_OF_PLAN}')


def test_the_note_on_what_was_not_found_names_only_names_of_the_question():
    brazil = "Brazil: Country in South America. Capital: Brasília. Population: about 203 million."
    ctx = context(
        "What is the population of Brazil?",
        T(1, "search", '1. search("Brazil")', brazil),
        T(2, "lookup", '2. lookup("population", "area_km2")', "Error: no entry", is_error=True),
    )
    answer = selected_answer(ctx)
    assert answer is not None and "203 million" in answer
    assert "could not find" not in answer  # "population" is no name the question wrote
    peru = context(
        "What are the populations of Egypt and Peru?",
        T(1, "search", '1. search("Egypt")', EGYPT),
        T(2, "search", '2. search("Peru")', "No entry for 'Peru'."),
    )
    assert 'I could not find "Peru".' in (selected_answer(peru) or answer_grammar(peru))


def test_names_of_the_question_no_call_took_are_those_like_the_ones_taken():
    from llm_compiler.dialects.grounding import question_names, uncovered_names

    def missing(question: str, *lines: str) -> list[str]:
        tasks = [T(i, "t", line, "1.0") for i, line in enumerate(lines, 1)]
        return uncovered_names(context(question, *tasks, tools=stocks.TOOLS))

    employees = "How many more employees does Microsoft have than Apple?"
    assert missing(employees, '1. company_profile(name="Microsoft")') == ["Apple"]
    both = ('1. company_profile("Microsoft")', '2. company_profile("Apple")')
    assert missing(employees, *both) == []
    # Another shape than every name taken: a word beside a code, no thing to look up.
    swiss = ('1. stock_price("NVDA")', '2. convert_currency($1, "CHF")')
    assert missing("What does one share of NVDA cost in Swiss francs?", *swiss) == []
    wayne = '1. company_profile("Wayne Enterprises")'
    assert missing("Who is the CEO of Wayne Enterprises?", wayne) == []
    assert missing("How much more does MSFT cost than AAPL?", '1. stock_price("MSFT")') == ["AAPL"]
    assert question_names("How old was Leonardo da Vinci when he died?") == ["Leonardo da Vinci"]
    assert question_names("What is the capital of Peru?") == ["Peru"]


async def test_a_first_round_that_left_a_name_out_is_planned_again_for_it():
    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.testing import ScriptedLLM

    first = f'1. company_profile(name="Microsoft")\n2. join()\n{END_OF_PLAN}'
    second = f'3. company_profile(name="Apple")\n4. join()\n{END_OF_PLAN}'
    llm = ScriptedLLM([first, second], chat=False)
    wf = LLMCompilerWorkflow(
        tools=stocks.TOOLS,
        llm=llm,
        dialect=LLMCompilerDialect(joiner="select"),
        constrained=True,
        max_replans=1,
        timeout=30,
    )
    output = await wf.run(user_msg="How many more employees does Microsoft have than Apple?")
    assert len(llm.calls) == 2  # two plans, no joiner call: the answer is forced
    assert '"Apple", which no action above used' in str(llm.calls[1].prompt)
    assert "228,000 employees" in str(output) and "164,000 employees" in str(output)


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
    grammar = plan_grammar(
        demo_tools.TOOLS,
        first_id=3,
        names=plan_names(ctx, demo_tools.TOOLS),
        exclude=failed_calls(ctx, demo_tools.TOOLS),
        suggest=suggest,
    )

    def ok(line: str) -> bool:
        return accepts(grammar, f"3. {line}\n4. join()\n{END_OF_PLAN}")

    assert ok('lookup("Leonardo da Vinci", "death_year")')
    assert ok('lookup("Leonardo da Vinci", "birth_year")')
    assert not ok('lookup("Leonardo da Vinci", "population")')  # the error named others
    assert not ok('lookup("Leonardo da Vinci", "height_m")')
    assert ok('lookup("Vinci", "population")')  # another name: any field
    assert not ok('lookup("Leonardo", "population")')  # would run on as the failed name
    # An error that names no value of the enum leaves every other value.
    failed = T(1, "lookup", ctx.rounds[0].tasks[0].text, "Error: no entry", is_error=True)
    plain = context(ctx.question, failed)
    assert suggested_values(plain, demo_tools.TOOLS) == {}


def test_nothing_found_names_what_the_question_wrote_as_a_name():
    ctx = context(
        "How long is the Volga river?",
        T(1, "search", '1. search("Volga river")', "No entry for 'Volga river'."),
        T(2, "lookup", '2. lookup("volga", "length_km")', "Error: no entry", is_error=True),
    )
    assert selected_answer(ctx) == 'I could not find "Volga river".'


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

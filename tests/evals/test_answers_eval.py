"""The end-to-end answer eval: answer matching and one scripted run."""

from __future__ import annotations

import pytest

from evals import stocks
from evals.answers import (
    QUESTIONS,
    Question,
    is_right,
    markdown,
    numbers,
    run_answers,
    verdict,
)
from llm_compiler.demo import tools as demo_tools
from llm_compiler.testing import LLMCall, ScriptedLLM
from llm_compiler.tools import NotFound


def test_numbers_understand_separators_and_scales():
    assert numbers("8,849 m and 107.6 million, 1.41 billion; 42") == [
        8849.0,
        107_600_000.0,
        1_410_000_000.0,
        42.0,
    ]
    assert numbers("born in 1912 and 1954") == [1912.0, 1954.0]


def test_a_difference_the_wrong_way_round_is_not_the_one_asked_for():
    assert numbers("1815 - 1879 = -64.") == [1815.0, 1879.0, -64.0]
    assert numbers("pages 3-4, item x-5") == [3.0, 4.0, 5.0]  # a dash, not a sign
    assert not is_right("1912 - 1954 = -42.", [42])
    assert is_right("1954 - 1912 = 42.", [42])


def test_answers_need_every_name_and_number():
    assert is_right("The capitals are Paris and Tokyo.", ("Paris", "Tokyo"))
    assert not is_right("The capital of France is Paris.", ("Paris", "Tokyo"))
    assert is_right("Brasília and Ottawa", ("Ottawa", "Brasilia"))
    assert not is_right("Parisian food", ("Paris",))
    assert is_right("Everest is 238.0 m higher.", (238,))
    assert not is_right("Everest is 2380 m higher.", (238,))
    assert is_right("About 107,600,000 people.", (107_600_000,))


def test_the_question_set_includes_the_demo_question():
    assert QUESTIONS[0] == Question(
        "What are the capitals of France and Japan?", ("Paris", "Tokyo"), "facts"
    )
    assert len(QUESTIONS) >= 30
    held_out = [q for q in QUESTIONS if q.held_out]
    assert len([q for q in held_out if q.tools == "demo" and q.batch == 1]) == 8
    second = [q for q in held_out if q.batch == 2]
    assert len([q for q in second if q.tools == "demo"]) >= 8
    assert len([q for q in second if q.tools == "stocks"]) >= 4
    assert len({q.text for q in QUESTIONS}) == len(QUESTIONS)
    assert {q.kind for q in held_out} == {"facts", "compare", "missing", "fact"}
    assert {q.tools for q in QUESTIONS} == {"demo", "stocks"}


def test_verdicts_tell_right_could_not_find_and_wrong_apart():
    assert verdict("Mont Blanc is 328 m higher.", (328,)) == "right"
    assert verdict("I could not find the Matterhorn.", (328,)) == "could not find"
    assert verdict("Mont Blanc is 4,478 m higher.", (328,)) == "wrong"
    assert verdict("I could not find Peru in the encyclopedia.", ()) == "right"
    assert verdict("The capital of Peru is Lima.", ()) == "wrong"


async def test_the_stock_tools_answer_from_fixed_data():
    assert await stocks.stock_price("nvda") == 181.2
    assert "CEO Satya Nadella" in await stocks.company_profile("Microsoft")
    with pytest.raises(NotFound, match="No company"):
        await stocks.company_profile("Initech")
    assert stocks.convert_currency(229.5, "EUR") == 197.37


async def test_a_full_scripted_run_is_checked(monkeypatch):
    monkeypatch.setattr(demo_tools, "LATENCY", 0.0)

    def reply(call: LLMCall) -> str:
        if call.prompt.rstrip().endswith("Thought:"):
            return " Both found.\nAction: Finish(Paris and Tokyo.)"
        return '1. search("France")\n2. search("Japan")\n3. join()\n<END_OF_PLAN>'

    questions = [QUESTIONS[0], Question("What is the capital of Australia?", ("Canberra",))]
    outcomes = await run_answers(ScriptedLLM(reply, chat=False), questions, timeout=30)
    assert [o.right for o in outcomes] == [True, False]
    assert outcomes[0].rounds == 1
    assert [t.split(" -> ")[0] for t in outcomes[0].tasks] == [
        "search({'query': 'France'})",
        "search({'query': 'Japan'})",
    ]
    assert (
        outcomes[0]
        .tasks[0]
        .endswith("-> 'France: Country in Western Europe. Capital: Paris. Populatio'")
    )
    table = markdown(outcomes, "scripted", "today")
    assert "Answer accuracy: **1/2** on scripted" in table
    assert "| tuned, demo tools | 1/2 | 0 | 1 |" in table
    assert outcomes[0].first_task is not None and outcomes[0].first_task <= outcomes[0].seconds


async def test_both_joiners_answer_each_question_in_turn(monkeypatch):
    monkeypatch.setattr(demo_tools, "LATENCY", 0.0)

    def reply(call: LLMCall) -> str:
        if call.prompt.rstrip().endswith("Thought:"):
            return " Found.\nAction: Finish(Canberra.)"
        if "Answer the question:" in call.prompt:
            return '{"verdict": "answer", "evidence": [], "answer": "Sydney."}'
        return '1. search("Australia")\n2. join()\n<END_OF_PLAN>'

    questions = [Question("What is the capital of Australia?", ("Canberra",))]
    llm = ScriptedLLM(reply, chat=False)
    outcomes = await run_answers(llm, questions, timeout=30, joiners=("text", "json"))
    assert [(o.joiner, o.verdict) for o in outcomes] == [("text", "right"), ("json", "wrong")]
    table = markdown(outcomes, "scripted", "today")
    assert "| text joiner, tuned, demo tools | 1/1 |" in table
    assert "| json joiner, tuned, demo tools | 0/1 | 0 | 1 |" in table

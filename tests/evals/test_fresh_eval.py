"""The fresh answer eval: its tools, its strict verdicts, first-round coverage, one scripted run."""

from __future__ import annotations

import pytest

from evals import fresh_tools as ft
from evals import fresh_tools7 as f7
from evals.fresh import QUESTIONS, Fresh, chosen_sets, covered, judge, markdown, run_fresh
from evals.own_tools import Ref
from llm_compiler.testing import LLMCall, ScriptedLLM


async def test_the_tools_answer_from_fixed_data_and_fail_in_their_own_words():
    assert await ft.flight_price("Berlin", "madrid") == 142.0
    assert await ft.convert_currency(142.0, "usd") == 153.36
    assert ft.hotel_price("Porto", 2) == 144.0
    assert ft.hotel_price("Lima", 2) == "Sorry, we have no hotels listed in Lima."
    assert ft.line_total("Vario desk", ft.stock_level("vario desk")) == 1167.0
    assert ft.unit_price("Zen sofa") is None
    assert await ft.order_status(9999) == "Order 9999 does not exist."
    assert ft.local_time("Mumbai", "10:00") == "15:30"
    assert ft.local_time("Tokyo", await ft.first_meeting_time("2026-12-02")) == "17:00"
    assert await ft.meetings("2026-12-06") == []
    with pytest.raises(LookupError, match="No flights found"):
        await ft.flight_price("Oslo", "Lima")
    with pytest.raises(KeyError, match="not in the catalogue"):
        ft.stock_level("Zen sofa")
    with pytest.raises(ConnectionError, match="503"):
        await ft.convert_currency(200, "NOK")
    with pytest.raises(TimeoutError):
        await ft.order_status(5530)
    with pytest.raises(ConnectionError, match="502"):
        await ft.meetings("2026-12-24")


async def test_batch_seven_tools_answer_from_fixed_data_and_fail_in_their_own_words():
    assert f7.publication_year(f7.books_by("Toni Morrison")[0]) == 1987
    assert await f7.copies_available("Zen") == "Sorry, Zen is not in our catalogue."
    assert f7.fare(f7.zones_between("Central", "Airport")) == 4.2
    assert f7.add_minutes("07:42", f7.travel_minutes("Airport", "Central") or 0) == "08:06"
    assert f7.travel_minutes("Central", "Zoo") is None
    assert await f7.line_status("M7") == "Unknown line: M7."
    assert f7.calories(f7.main_ingredient("porridge"), 100) == 389.0
    assert f7.recipe_ingredients("lasagne") == []
    with pytest.raises(LookupError, match="No book titled"):
        f7.author_of("The Silmarillion")
    with pytest.raises(ConnectionError):
        await f7.loan_due_date("L-399")
    with pytest.raises(TimeoutError):
        await f7.line_status("S9")
    with pytest.raises(ConnectionError, match="503"):
        await f7.price_per_kg("almonds")


def test_the_sets_are_large_enough_and_in_several_languages():
    assert chosen_sets("batch7,demo") == {"library", "transit", "nutrition", "demo"}
    for name in ("travel", "shop", "calendar", "library", "transit", "nutrition"):
        mine = [q for q in QUESTIONS if q.set == name]
        assert len(mine) >= 10
        assert len({q.lang for q in mine}) >= 2
        assert {"which", "missing", "failed"} & {q.kind for q in mine}
    assert len([q for q in QUESTIONS if q.set == "demo"]) == 10
    assert len([q for q in QUESTIONS if q.set == "stocks"]) == 8
    assert len({q.text for q in QUESTIONS}) == len(QUESTIONS)


_WHICH = Fresh(
    "demo", "en", "which", "Which planet is bigger, Saturn or Uranus?", ("Saturn",), (), ("Uranus",)
)


def test_a_which_must_name_the_winner_not_list_both():
    assert judge("Saturn is bigger than Uranus.", _WHICH) == "right"
    assert judge("Saturn.", _WHICH) == "right"
    assert judge("Saturn: 120536 km; Uranus: 51118 km.", _WHICH) == "wrong"
    assert judge("Uranus: 51118 km.", _WHICH) == "wrong"


def test_a_failed_tool_must_be_called_a_failure_not_nothing_found():
    q = Fresh("shop", "en", "failed", "Where is my order 5530?", (), ())
    assert judge("The order service timed out.", q) == "right"
    assert judge("I could not find order 5530.", q) == "could not find"
    missing = Fresh("shop", "fr", "missing", "Combien de Zen sofa ?", (), ())
    assert judge("Le Zen sofa n'existe pas dans le catalogue.", missing) == "right"
    assert judge("Il y en a 3.", missing) == "wrong"


def test_coverage_needs_every_part_in_the_first_round():
    q = Fresh(
        "travel", "en", "chain", "Flight Berlin-Madrid in USD?", (153.36,),
        (("flight_price", {"origin": "Berlin", "destination": "Madrid"}),
         ("convert_currency", {"amount": Ref("flight_price"), "currency": "USD"})),
    )  # fmt: skip
    flight = {"id": 1, "round": 0, "tool": "flight_price",
              "args": {"origin": "berlin", "destination": "Madrid"}}  # fmt: skip
    convert = {"id": 2, "round": 0, "tool": "convert_currency",
               "args": {"amount": {"$ref": 1}, "currency": "USD"}}  # fmt: skip
    assert covered(q, [flight, convert])
    assert not covered(q, [flight, {**convert, "round": 1}])
    assert not covered(q, [flight, {**convert, "args": {"amount": 20.0, "currency": "USD"}}])
    assert not covered(q, [])


async def test_a_scripted_run_is_judged_and_tabled():
    def reply(call: LLMCall) -> str:
        if "Question:" in call.prompt and call.prompt.rstrip().endswith("Thought:"):
            return " Found.\nAction: Finish(142 EUR.)"
        if "Answer the question:" in call.prompt:
            return '{"verdict": "answer", "evidence": [], "answer": "142 EUR."}'
        return '1. flight_price("Berlin", "Madrid")\n2. join()\n<END_OF_PLAN>'

    outcomes = await run_fresh(ScriptedLLM(reply, chat=False), QUESTIONS[:1], timeout=30)
    assert outcomes[0].covered
    assert outcomes[0].tasks[0].startswith("r0 flight_price(")
    table = markdown(outcomes, "scripted")
    assert "| fresh tool sets, all | " in table and "| 1/1 (100%) |" in table

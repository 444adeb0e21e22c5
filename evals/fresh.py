"""Fresh answers: held-out questions on tool sets the engine was never tuned on.

Three tool sets of kinds the project had none of (``evals.fresh_tools``: travel prices,
a shop, a calendar with time zones), written as a user writes their own tools and given
no examples, asked in English, German, French and Spanish; and a sixth held-out batch on
the demo's tools and on the stocks set of ``evals.answers``. Every question and its
expected answer was written before any change it measures, and is run once per change.
Batch 7 (``--sets batch7``, ``evals.fresh_tools7``), written after batch 6 had been read:
a library catalogue, a transit timetable and nutrition with recipes, in English, German,
French, Spanish and Italian. Batch 8 (``--sets batch8``, ``evals.fresh_tools8``), written
after batch 7 had been read: a bookshop whose tools cannot answer every part of some
questions, and a home's sensors (a change that is negative, a failing sensor hub).

Verdicts, counted strictly: **right** when the answer holds every expected name and
number (as ``evals.answers`` reads them); a "which" question must name the winner and,
if it names the others too, say how they compare (a list of values is not an answer);
a question the tools cannot answer must say it found nothing; one whose tool fails (a
transport error) must say the tool failed, not that nothing exists; one the tools answer
in part (``partial``) must hold what they have and say that something was not found or
failed. An answer that holds a value nobody asked for (``absent``) is wrong. **could not find**:
the answer says nothing was found although the tools have it (or the tool failed).
**wrong**: anything else, failed runs included.

Per question also: **first-round coverage** (round 0 called a tool for every part of
the question: each expected call matched by its own round-0 task, arguments as in
``evals.own_tools``), the first task and the answer time. Run
``python -m evals.fresh --help``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from llama_index.core.llms import LLM

from evals import answers
from evals.answers import Verdict, is_right, normalize, numbers, run_once, task_line
from evals.bfcl import write_results
from evals.fresh_tools import TOOL_SETS as TOOL_SETS_6
from evals.fresh_tools7 import TOOL_SETS as TOOL_SETS_7
from evals.fresh_tools8 import TOOL_SETS as TOOL_SETS_8
from evals.own_tools import ExpectedCall, Ref, matched, sampling
from llm_compiler import LLMCompilerWorkflow

RESULTS_DIR = Path(__file__).resolve().parent / "results"
TOOL_SETS = {**TOOL_SETS_6, **TOOL_SETS_7, **TOOL_SETS_8}
BATCHES = {"batch6": ("travel", "shop", "calendar", "demo", "stocks"),
           "batch7": tuple(TOOL_SETS_7), "batch8": tuple(TOOL_SETS_8)}  # fmt: skip
"""Questions by the batch they were written in (batch 7 after batch 6 had been read)."""
SetName = Literal[
    "travel", "shop", "calendar", "demo", "stocks", "library", "transit", "nutrition",
    "bookshop", "sensors",
]  # fmt: skip
Kind = Literal["fact", "facts", "which", "compare", "chain", "missing", "failed", "partial"]


@dataclass(frozen=True)
class Fresh:
    """A question, what its answer must hold, and the calls that answer it.

    `expect`: names and numbers the answer must contain (the winner first for a
    "which"); `losers`: the other candidates of a "which"; `calls`: what round 0 must
    call (an empty dict of arguments: any arguments); `absent`: values nobody asked for,
    which the answer must not hold.
    """

    set: SetName
    lang: str
    kind: Kind
    text: str
    expect: tuple[str | float, ...]
    calls: tuple[ExpectedCall, ...]
    losers: tuple[str, ...] = ()
    absent: tuple[str | float, ...] = ()


def _f(
    set_: SetName, lang: str, kind: Kind, text: str, expect: tuple[str | float, ...],
    *calls: ExpectedCall, losers: tuple[str, ...] = (), absent: tuple[str | float, ...] = (),
) -> Fresh:  # fmt: skip
    return Fresh(set_, lang, kind, text, expect, calls, losers, absent)


_CALC: ExpectedCall = ("calculator", {})
_SUB: ExpectedCall = ("subtract", {})
_DIFF: ExpectedCall = ("difference", {})
_ADD: ExpectedCall = ("add", {})

QUESTIONS = (
    # Travel: flight_price, hotel_price, convert_currency, calculator.
    _f("travel", "en", "fact", "How much is a flight from Berlin to Madrid?", (142,),
       ("flight_price", {"origin": "Berlin", "destination": "Madrid"})),
    _f("travel", "en", "facts",
       "What do flights from Berlin to Paris and from Berlin to Oslo cost?", (98, 129),
       ("flight_price", {"origin": "Berlin", "destination": "Paris"}),
       ("flight_price", {"origin": "Berlin", "destination": "Oslo"})),
    _f("travel", "en", "chain", "What does a flight from Berlin to Madrid cost in US dollars?",
       (153.36,), ("flight_price", {"origin": "Berlin", "destination": "Madrid"}),
       ("convert_currency", {"amount": Ref("flight_price"), "currency": "USD"})),
    _f("travel", "en", "compare",
       "How much more does a flight from Paris to Oslo cost than two nights at a hotel in Porto?",
       (27,), ("flight_price", {"origin": "Paris", "destination": "Oslo"}),
       ("hotel_price", {"city": "Porto", "nights": 2}), _CALC),
    _f("travel", "en", "which",
       "Which is cheaper, a flight from Berlin to Paris or a flight from Amsterdam to Porto?",
       ("Amsterdam",), ("flight_price", {"origin": "Berlin", "destination": "Paris"}),
       ("flight_price", {"origin": "Amsterdam", "destination": "Porto"}), losers=("Berlin",)),
    _f("travel", "en", "fact", "What do 3 nights in a hotel in Dublin cost?", (390,),
       ("hotel_price", {"city": "Dublin", "nights": 3})),
    _f("travel", "en", "missing", "How much is a flight from Oslo to Lima?", (),
       ("flight_price", {"origin": "Oslo", "destination": "Lima"})),
    _f("travel", "en", "failed", "What is 200 euros in NOK?", (),
       ("convert_currency", {"amount": 200, "currency": "NOK"})),
    _f("travel", "de", "fact", "Wie viel kostet ein Flug von Madrid nach Dublin?", (119,),
       ("flight_price", {"origin": "Madrid", "destination": "Dublin"})),
    _f("travel", "de", "compare",
       "Was kosten 2 Nächte im Hotel in Berlin und 2 Nächte im Hotel in Paris zusammen?", (540,),
       ("hotel_price", {"city": "Berlin", "nights": 2}),
       ("hotel_price", {"city": "Paris", "nights": 2}), _CALC),
    _f("travel", "es", "chain", "¿Cuánto cuesta un vuelo de Madrid a Oslo en GBP?", (173.4,),
       ("flight_price", {"origin": "Madrid", "destination": "Oslo"}),
       ("convert_currency", {"amount": Ref("flight_price"), "currency": "GBP"})),
    _f("travel", "es", "missing", "¿Cuánto cuestan dos noches de hotel en Lima?", (),
       ("hotel_price", {"city": "Lima", "nights": 2})),
    # Shop: stock_level, unit_price, line_total, order_status, subtract.
    _f("shop", "en", "fact", "How many Ergo chairs are in stock?", (8,),
       ("stock_level", {"product": "Ergo chair"})),
    _f("shop", "en", "facts", "What are the prices of the Vario desk and the Lumo lamp?",
       (389, 24.9), ("unit_price", {"product": "Vario desk"}),
       ("unit_price", {"product": "Lumo lamp"})),
    _f("shop", "en", "which", "Which costs more, the Lumo lamp or the Flex arm?", ("Flex arm",),
       ("unit_price", {"product": "Lumo lamp"}), ("unit_price", {"product": "Flex arm"}),
       losers=("Lumo lamp",)),
    _f("shop", "en", "compare", "How many more Hub7 than Lumo lamps do we have in stock?", (83,),
       ("stock_level", {"product": "Hub7"}), ("stock_level", {"product": "Lumo lamp"}), _SUB),
    _f("shop", "en", "chain", "What would it cost to buy every Vario desk we have in stock?",
       (1167,), ("stock_level", {"product": "Vario desk"}),
       ("line_total", {"product": "Vario desk", "quantity": Ref("stock_level")})),
    _f("shop", "en", "fact", "What is the status of order 5521?", ("DHL",),
       ("order_status", {"order_id": 5521})),
    _f("shop", "en", "failed", "Where is my order 5530?", (),
       ("order_status", {"order_id": 5530})),
    _f("shop", "en", "missing", "Has order 9999 been shipped yet?", (),
       ("order_status", {"order_id": 9999})),
    _f("shop", "de", "fact", "Wie viele Flex arm sind noch auf Lager?", (0,),
       ("stock_level", {"product": "Flex arm"})),
    _f("shop", "de", "fact", "Was kosten 4 Ergo chairs zusammen?", (596,),
       ("line_total", {"product": "Ergo chair", "quantity": 4})),
    _f("shop", "fr", "fact", "Combien coûte le Vario desk ?", (389,),
       ("unit_price", {"product": "Vario desk"})),
    _f("shop", "fr", "missing", "Combien de Zen sofa avez-vous en stock ?", (),
       ("stock_level", {"product": "Zen sofa"})),
    # Calendar: utc_offset, local_time, meetings, first_meeting_time, subtract.
    _f("calendar", "en", "fact", "What time is it in Tokyo when it is 12:00 UTC?", ("21:00",),
       ("local_time", {"city": "Tokyo", "utc_time": "12:00"})),
    _f("calendar", "en", "facts", "What are the UTC offsets of Mumbai and Tokyo?", (5.5, 9),
       ("utc_offset", {"city": "Mumbai"}), ("utc_offset", {"city": "Tokyo"})),
    _f("calendar", "en", "compare", "How many hours ahead of London is Sydney?", (11,),
       ("utc_offset", {"city": "Sydney"}), ("utc_offset", {"city": "London"}), _SUB),
    _f("calendar", "en", "which", "Which city is further ahead of UTC, Berlin or Mumbai?",
       ("Mumbai",), ("utc_offset", {"city": "Berlin"}), ("utc_offset", {"city": "Mumbai"}),
       losers=("Berlin",)),
    _f("calendar", "en", "facts", "What meetings do I have on 2026-12-01?",
       ("Standup", "Budget review", "Dentist"), ("meetings", {"day": "2026-12-01"})),
    _f("calendar", "en", "missing", "What is on my calendar on 2026-12-06?", (),
       ("meetings", {"day": "2026-12-06"})),
    _f("calendar", "en", "failed", "Which meetings do I have on 2026-12-24?", (),
       ("meetings", {"day": "2026-12-24"})),
    _f("calendar", "en", "chain",
       "What time is it in Tokyo when my first meeting on 2026-12-02 starts?", ("17:00",),
       ("first_meeting_time", {"day": "2026-12-02"}),
       ("local_time", {"city": "Tokyo", "utc_time": Ref("first_meeting_time")})),
    _f("calendar", "de", "fact", "Wie spät ist es in New York, wenn es 18:00 UTC ist?",
       ("13:00",), ("local_time", {"city": "New York", "utc_time": "18:00"})),
    _f("calendar", "de", "facts", "Welche Termine habe ich am 2026-12-02?",
       ("Design review", "Lunch with Anna"), ("meetings", {"day": "2026-12-02"})),
    _f("calendar", "de", "missing", "Wie spät ist es in Reykjavik um 12:00 UTC?", (),
       ("local_time", {"city": "Reykjavik", "utc_time": "12:00"})),
    _f("calendar", "fr", "fact", "Quel est le décalage de Tokyo par rapport à UTC, en heures ?",
       (9,), ("utc_offset", {"city": "Tokyo"})),
    _f("calendar", "es", "fact", "¿Qué hora es en Mumbai cuando son las 10:00 UTC?",
       ("15:30",), ("local_time", {"city": "Mumbai", "utc_time": "10:00"})),
    # The demo's tools (search, lookup, calculator), held-out batch 6.
    _f("demo", "en", "which", "Which planet is bigger, Saturn or Uranus?", ("Saturn",),
       ("lookup", {"name": "Saturn"}), ("lookup", {"name": "Uranus"}), losers=("Uranus",)),
    _f("demo", "en", "which", "Which is taller, Denali or Aconcagua?", ("Aconcagua",),
       ("lookup", {"name": "Denali"}), ("lookup", {"name": "Aconcagua"}), losers=("Denali",)),
    _f("demo", "en", "compare", "How many years after Mozart was Charles Darwin born?", (53,),
       ("lookup", {"name": "Mozart"}), ("lookup", {"name": "Charles Darwin"}), _CALC),
    _f("demo", "en", "compare", "How many more people live in Mexico than in Canada?",
       (88_900_000,), ("lookup", {"name": "Mexico"}), ("lookup", {"name": "Canada"}), _CALC),
    _f("demo", "en", "fact", "What is the capital of the United Kingdom?", ("London",),
       ("search", {"query": "United Kingdom"})),
    _f("demo", "en", "compare", "How many years did Galileo Galilei live?", (78,),
       ("lookup", {"name": "Galileo Galilei"}), ("lookup", {"name": "Galileo Galilei"}), _CALC),
    _f("demo", "en", "facts", "What are the areas of France and Spain in km2?",
       (551_695, 505_990), ("lookup", {"name": "France", "field": "area_km2"}),
       ("lookup", {"name": "Spain", "field": "area_km2"})),
    _f("demo", "en", "which",
       "Which river is longer, the Mississippi or the Yangtze, and by how much?", ("Yangtze", 2570),
       ("lookup", {"name": "Mississippi", "field": "length_km"}),
       ("lookup", {"name": "Yangtze", "field": "length_km"}), _CALC, losers=("Mississippi",)),
    _f("demo", "en", "missing", "What is the capital of Austria?", (), ("search", {})),
    _f("demo", "en", "fact", "How far is Saturn from the Sun, in AU?", (9.58,),
       ("lookup", {"name": "Saturn", "field": "distance_au"})),
    # The stocks set of evals.answers, held-out batch 6.
    _f("stocks", "en", "which", "Which is more expensive, a share of AAPL or a share of GOOGL?",
       ("AAPL",), ("stock_price", {"symbol": "AAPL"}), ("stock_price", {"symbol": "GOOGL"}),
       losers=("GOOGL",)),
    _f("stocks", "en", "chain", "What does a share of TSLA cost in yen?", (49_788.9,),
       ("stock_price", {"symbol": "TSLA"}),
       ("convert_currency", {"amount": Ref("stock_price"), "to_currency": "JPY"})),
    _f("stocks", "en", "compare", "How many more employees does Tesla have than NVIDIA?",
       (89_000,), ("company_profile", {"name": "Tesla"}),
       ("company_profile", {"name": "NVIDIA"}), _CALC),
    _f("stocks", "en", "facts", "Who are the CEOs of Tesla and Apple?", ("Elon Musk", "Tim Cook"),
       ("company_profile", {"name": "Tesla"}), ("company_profile", {"name": "Apple"})),
    _f("stocks", "en", "missing", "What is the share price of Initrode?", (),
       ("stock_price", {}),),
    _f("stocks", "en", "compare", "How many years after Microsoft was Alphabet founded?", (40,),
       ("company_profile", {"name": "Microsoft"}), ("company_profile", {"name": "Alphabet"}),
       _CALC),
    _f("stocks", "en", "compare", "What do two shares of MSFT cost together?", (1024,),
       ("stock_price", {"symbol": "MSFT"}), _CALC),
    _f("stocks", "en", "which", "Which company has more employees, Alphabet or Microsoft?",
       ("Microsoft",), ("company_profile", {"name": "Alphabet"}),
       ("company_profile", {"name": "Microsoft"}), losers=("Alphabet",)),
    # Batch 7, written 2026-11-28 11:45 UTC before the change it measures.
    # Library: author_of, publication_year, copies_available, books_by, loan_due_date, difference.
    _f("library", "en", "fact", "How many copies of Neuromancer can I borrow right now?", (4,),
       ("copies_available", {"title": "Neuromancer"})),
    _f("library", "en", "fact", "Who wrote Beloved?", ("Toni Morrison",),
       ("author_of", {"title": "Beloved"})),
    _f("library", "en", "facts", "In which years were Emma and Persuasion first published?",
       (1815, 1817), ("publication_year", {"title": "Emma"}),
       ("publication_year", {"title": "Persuasion"})),
    _f("library", "en", "which", "Which book is older, Dune or Neuromancer?", ("Dune",),
       ("publication_year", {"title": "Dune"}), ("publication_year", {"title": "Neuromancer"}),
       losers=("Neuromancer",)),
    _f("library", "en", "compare", "How many years after The Hobbit was Dune published?", (28,),
       ("publication_year", {"title": "The Hobbit"}), ("publication_year", {"title": "Dune"}),
       _DIFF),
    _f("library", "en", "compare", "How many more copies of Emma than of Beloved are available?",
       (3,), ("copies_available", {"title": "Emma"}), ("copies_available", {"title": "Beloved"}),
       _DIFF),
    _f("library", "en", "chain", "When was the book by Toni Morrison first published?", (1987,),
       ("books_by", {"author": "Toni Morrison"}),
       ("publication_year", {"title": Ref("books_by")})),
    _f("library", "en", "missing", "Who wrote The Silmarillion?", (),
       ("author_of", {"title": "The Silmarillion"})),
    _f("library", "en", "failed", "When is my loan L-399 due?", (),
       ("loan_due_date", {"loan_id": "L-399"})),
    _f("library", "en", "missing", "Which books by Ursula K. Le Guin do you have?", (),
       ("books_by", {"author": "Ursula K. Le Guin"})),
    _f("library", "de", "fact", "Wie viele Exemplare von Emma kann ich gerade ausleihen?", (5,),
       ("copies_available", {"title": "Emma"})),
    _f("library", "de", "which", "Welches Buch ist neuer, Emma oder Beloved?", ("Beloved",),
       ("publication_year", {"title": "Emma"}), ("publication_year", {"title": "Beloved"}),
       losers=("Emma",)),
    _f("library", "es", "fact", "¿Cuándo tengo que devolver el préstamo L-301?", ("2026-12-05",),
       ("loan_due_date", {"loan_id": "L-301"})),
    # Transit: travel_minutes, zones_between, fare, next_departure, line_status, add_minutes,
    # calculator.
    _f("transit", "en", "fact", "How long does the ride from Central to Airport take?", (24,),
       ("travel_minutes", {"origin": "Central", "destination": "Airport"})),
    _f("transit", "en", "fact", "When does the next U2 leave Central after 07:25?", ("07:35",),
       ("next_departure", {"stop": "Central", "line": "U2", "after": "07:25"})),
    _f("transit", "en", "facts", "What is the status of lines S1 and T4?", (10, "on time"),
       ("line_status", {"line": "S1"}), ("line_status", {"line": "T4"})),
    _f("transit", "en", "which",
       "Which ride is shorter, Central to Harbour or Central to University?", ("Harbour",),
       ("travel_minutes", {"origin": "Central", "destination": "Harbour"}),
       ("travel_minutes", {"origin": "Central", "destination": "University"}),
       losers=("University",)),
    _f("transit", "en", "compare",
       "How many minutes longer is the ride from Harbour to Airport than from Central to Airport?",
       (7,), ("travel_minutes", {"origin": "Harbour", "destination": "Airport"}),
       ("travel_minutes", {"origin": "Central", "destination": "Airport"}), _CALC),
    _f("transit", "en", "chain", "How much is a single ticket from Central to Airport?", (4.2,),
       ("zones_between", {"origin": "Central", "destination": "Airport"}),
       ("fare", {"zones": Ref("zones_between")})),
    _f("transit", "en", "chain",
       "If I leave Central at 07:42, at what time do I arrive at Airport?", ("08:06",),
       ("travel_minutes", {"origin": "Central", "destination": "Airport"}),
       ("add_minutes", {"time": "07:42", "minutes": Ref("travel_minutes")})),
    _f("transit", "en", "missing", "How long is the ride from Central to Zoo?", (),
       ("travel_minutes", {"origin": "Central", "destination": "Zoo"})),
    _f("transit", "en", "failed", "Is line S9 running on time?", (),
       ("line_status", {"line": "S9"})),
    _f("transit", "en", "missing", "What is the status of line M7?", (),
       ("line_status", {"line": "M7"})),
    _f("transit", "de", "fact", "Wie viele Minuten dauert die Fahrt von University nach Stadium?",
       (9,), ("travel_minutes", {"origin": "University", "destination": "Stadium"})),
    _f("transit", "de", "fact", "Was kostet ein Einzelticket für 2 Zonen?", (3.1,),
       ("fare", {"zones": 2})),
    _f("transit", "de", "compare",
       "Wie viel teurer ist ein Ticket für 3 Zonen als eines für 1 Zone?", (1.8,),
       ("fare", {"zones": 3}), ("fare", {"zones": 1}), _CALC),
    _f("transit", "fr", "fact", "À quelle heure part le prochain T4 de Harbour après 07:30 ?",
       ("07:58",), ("next_departure", {"stop": "Harbour", "line": "T4", "after": "07:30"})),
    # Nutrition: calories, protein, recipe_ingredients, recipe_servings, main_ingredient,
    # price_per_kg, add, subtract.
    _f("nutrition", "en", "fact", "How many calories are in 50 g of oats?", (194.5,),
       ("calories", {"food": "oats", "grams": 50})),
    _f("nutrition", "en", "fact", "How much protein is in 200 g of chicken breast?", (62,),
       ("protein", {"food": "chicken breast", "grams": 200})),
    _f("nutrition", "en", "facts", "How many calories do 100 g of rice and 100 g of lentils have?",
       (130, 116), ("calories", {"food": "rice", "grams": 100}),
       ("calories", {"food": "lentils", "grams": 100})),
    _f("nutrition", "en", "which", "Which has more protein, 100 g of tofu or 100 g of lentils?",
       ("lentils",), ("protein", {"food": "tofu", "grams": 100}),
       ("protein", {"food": "lentils", "grams": 100}), losers=("tofu",)),
    _f("nutrition", "en", "compare",
       "How many more calories do 30 g of almonds have than 100 g of banana?", (84.7,),
       ("calories", {"food": "almonds", "grams": 30}),
       ("calories", {"food": "banana", "grams": 100}), _SUB),
    _f("nutrition", "en", "compare",
       "How many calories do 100 g of rice and 150 g of chicken breast have together?", (377.5,),
       ("calories", {"food": "rice", "grams": 100}),
       ("calories", {"food": "chicken breast", "grams": 150}), _ADD),
    _f("nutrition", "en", "facts", "What are the ingredients of dal?",
       ("lentils", "onion", "turmeric", "garlic"), ("recipe_ingredients", {"recipe": "dal"})),
    _f("nutrition", "en", "chain",
       "How many calories are in 100 g of the main ingredient of porridge?", (389,),
       ("main_ingredient", {"recipe": "porridge"}),
       ("calories", {"food": Ref("main_ingredient"), "grams": 100})),
    _f("nutrition", "en", "missing", "How many calories are in 100 g of quinoa?", (),
       ("calories", {"food": "quinoa", "grams": 100})),
    _f("nutrition", "en", "failed", "How much does a kilo of almonds cost?", (),
       ("price_per_kg", {"food": "almonds"})),
    _f("nutrition", "en", "missing", "What are the ingredients of lasagne?", (),
       ("recipe_ingredients", {"recipe": "lasagne"})),
    _f("nutrition", "es", "fact", "¿Cuántas calorías tienen 200 g de tofu?", (152,),
       ("calories", {"food": "tofu", "grams": 200})),
    _f("nutrition", "es", "which", "¿Qué tiene más calorías, 100 g de banana o 100 g de tofu?",
       ("banana",), ("calories", {"food": "banana", "grams": 100}),
       ("calories", {"food": "tofu", "grams": 100}), losers=("tofu",)),
    _f("nutrition", "it", "fact", "Quante porzioni fa la ricetta del dal?", (4,),
       ("recipe_servings", {"recipe": "dal"})),
    # Batch 8, written 2026-12-07 21:20 UTC before the change it measures.
    # Bookshop: book_price, delivery_days, copies_at_branch, writer_of.
    _f("bookshop", "en", "fact", "How much does Solaris cost?", (12.5,),
       ("book_price", {"title": "Solaris"}), absent=(3,)),
    _f("bookshop", "en", "partial",
       "How long does delivery take for Middlemarch, for Kindred and for Rebecca?",
       (2, 5, "Kindred"), ("delivery_days", {"title": "Middlemarch"}),
       ("delivery_days", {"title": "Kindred"}), ("delivery_days", {"title": "Rebecca"}),
       absent=(9.9, 14, 11.2)),
    _f("bookshop", "en", "partial", "What do Dracula and Ulysses cost?", (7.8, "Ulysses"),
       ("book_price", {"title": "Dracula"}), ("book_price", {"title": "Ulysses"})),
    _f("bookshop", "en", "partial", "Who wrote Rebecca, and how many pages does it have?",
       ("Daphne du Maurier",), ("writer_of", {"title": "Rebecca"})),
    _f("bookshop", "en", "fact", "How many copies of Solaris does the Harbour branch have?", (4,),
       ("copies_at_branch", {"title": "Solaris", "branch": "Harbour"}), absent=(12.5,)),
    _f("bookshop", "en", "partial", "How many copies of Dracula are at the Airport branch?", (),
       ("copies_at_branch", {"title": "Dracula", "branch": "Airport"})),
    _f("bookshop", "en", "which", "Which is cheaper, Rebecca or Middlemarch?", ("Middlemarch",),
       ("book_price", {"title": "Rebecca"}), ("book_price", {"title": "Middlemarch"}),
       losers=("Rebecca",)),
    _f("bookshop", "en", "fact", "Who wrote Dracula?", ("Bram Stoker",),
       ("writer_of", {"title": "Dracula"}), absent=(7.8,)),
    _f("bookshop", "en", "compare", "How much more does Kindred cost than Dracula?", (6.2,),
       ("book_price", {"title": "Kindred"}), ("book_price", {"title": "Dracula"})),
    _f("bookshop", "de", "fact", "Wie viele Tage dauert die Lieferung von Solaris?", (3,),
       ("delivery_days", {"title": "Solaris"}), absent=(12.5,)),
    # Sensors: room_temperature, humidity, energy_used_today, subtract.
    _f("sensors", "en", "fact", "What is the humidity in the cellar?", (81,),
       ("humidity", {"room": "cellar"})),
    _f("sensors", "en", "compare",
       "By how much did the bedroom temperature change from 08:00 to 20:00?", (-1.5,),
       ("room_temperature", {"room": "bedroom", "time": "08:00"}),
       ("room_temperature", {"room": "bedroom", "time": "20:00"}), _SUB),
    _f("sensors", "en", "which", "Which room is warmer at 20:00, the kitchen or the cellar?",
       ("kitchen",), ("room_temperature", {"room": "kitchen", "time": "20:00"}),
       ("room_temperature", {"room": "cellar", "time": "20:00"}), losers=("cellar",)),
    _f("sensors", "en", "missing", "What is the humidity in the attic?", (),
       ("humidity", {"room": "attic"})),
    _f("sensors", "en", "failed", "What was the temperature in the garage at 08:00?", (),
       ("room_temperature", {"room": "garage", "time": "08:00"})),
    _f("sensors", "en", "facts", "How much energy have the fridge and the heat pump used today?",
       (1.1, 14.2), ("energy_used_today", {"device": "fridge"}),
       ("energy_used_today", {"device": "heat pump"})),
    _f("sensors", "en", "partial", "What is the humidity in the kitchen and in the attic?",
       (48, "attic"), ("humidity", {"room": "kitchen"}), ("humidity", {"room": "attic"})),
    _f("sensors", "en", "fact", "What was the kitchen temperature at 08:00?", (19.5,),
       ("room_temperature", {"room": "kitchen", "time": "08:00"}), absent=(22, 48)),
    _f("sensors", "es", "fact", "¿Cuánta energía ha consumido hoy el fridge?", (1.1,),
       ("energy_used_today", {"device": "fridge"})),
)  # fmt: skip

# ----------------------------------------------------------------------------- judging
# The eval's own reading of answers in the four languages asked (never the engine's).

_NOTHING = re.compile(
    r"could ?n[o']t find|can ?n[o']t find|cannot find|did ?n[o']t find|not found|no \w+ "
    r"(?:found|listed|for|named|entry|exists?)|does ?n[o']t exist|does not exist|not in the|"
    r"no (?:entry|information|data|result|meetings?|flights?|hotels?)|nothing|unknown|"
    r"do ?n[o']t know|nicht gefunden|keine|kein|gibt es nicht|unbekannt|introuvable|aucun|"
    r"pas trouvé|n'existe pas|no (?:se )?encontr|no hay|ningún|ninguna|desconocid",
    re.I,
)
_FAILED = re.compile(
    r"fail|error|unavailable|not available|did ?n[o']t (?:answer|respond)|time[sd]? ?out|"
    r"\b50[234]\b|could ?n[o']t (?:reach|connect|get|convert|retrieve|load)|unreachable|"
    r"fehl|nicht erreichbar|échou|erreur|indisponible|falló|fallo|no disponible",
    re.I,
)
_COMPARES = re.compile(
    r"\b(?:than|more|less|fewer|bigger|larger|greater|smaller|taller|higher|longer|shorter|"
    r"cheaper|dearer|pricier|expensive|further|farther|ahead|als|mehr|weniger|größer|"
    r"teurer|billiger|höher|länger|que|plus|moins|más|menos|mayor|menor)\b",
    re.I,
)


def says_nothing(answer: str) -> bool:
    """Whether an answer says it found nothing."""
    return bool(_NOTHING.search(answer))


def says_failed(answer: str) -> bool:
    """Whether an answer says a tool failed."""
    return bool(_FAILED.search(answer))


def names_winner(answer: str, q: Fresh) -> bool:
    """A "which" answered: the winner named, and if another candidate is named too, the
    answer compares them (a list of both values does not say which)."""
    said = f" {normalize(answer)} "
    others = any(f" {normalize(name)} " in said for name in q.losers)
    return not others or bool(_COMPARES.search(answer))


def holds_unasked(answer: str, q: Fresh) -> bool:
    """Whether `answer` holds one of the values nobody asked for (``q.absent``)."""
    said, found = f" {normalize(answer)} ", numbers(answer)
    return any(
        f" {normalize(v)} " in said
        if isinstance(v, str)
        else any(abs(n - v) <= 0.005 * abs(v) for n in found)
        for v in q.absent
    )


def judge(answer: str, q: Fresh) -> Verdict:
    """Right, could not find, or wrong (see the module's docstring)."""
    if holds_unasked(answer, q):
        return "wrong"
    if q.kind == "partial":
        told = says_nothing(answer) or says_failed(answer)
        return "right" if told and is_right(answer, q.expect) else "wrong"
    if q.kind == "missing":
        return "right" if says_nothing(answer) else "wrong"
    if q.kind == "failed":
        if says_failed(answer):
            return "right"
        return "could not find" if says_nothing(answer) else "wrong"
    if is_right(answer, q.expect) and (q.kind != "which" or names_winner(answer, q)):
        return "right"
    return "could not find" if says_nothing(answer) else "wrong"


def first_round(tasks: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tasks of the run's first planning round."""
    rounds = [t["round"] for t in tasks]
    return [t for t in tasks if rounds and t["round"] == min(rounds)]


def covered(q: Fresh, tasks: Sequence[dict[str, Any]]) -> bool:
    """Whether round 0 called a tool for every part of `q` (each expected call matched by
    its own round-0 task)."""
    first = first_round(tasks)
    tool_of = {i: t["tool"] for i, t in _ids(first)}
    planned = [(t["tool"], dict(t["args"] or {})) for t in first]
    return matched(q.calls, planned, tool_of) == len(q.calls)


def _ids(tasks: Sequence[dict[str, Any]]) -> list[tuple[int, dict[str, Any]]]:
    return [(int(t.get("id", i)), t) for i, t in enumerate(tasks, 1)]


# ----------------------------------------------------------------------------- running


@dataclass
class FreshOutcome:
    """One question's run and verdict."""

    set: str
    lang: str
    kind: str
    question: str
    expect: list[Any]
    answer: str
    verdict: Verdict
    covered: bool
    seconds: float
    first_task: float | None
    rounds: int = 0
    tasks: list[str] = field(default_factory=list)
    error: str | None = None


def workflows(llm: LLM, **options: Any) -> dict[str, LLMCompilerWorkflow]:
    """One workflow per tool set."""
    made = {n: answers.user_workflow(tools, llm, **options) for n, tools in TOOL_SETS.items()}
    made["demo"] = answers.demo_workflow(llm, **options)
    made["stocks"] = answers.stocks_workflow(llm, **options)
    return made


async def ask(workflow: LLMCompilerWorkflow, q: Fresh, timeout: float | None) -> FreshOutcome:
    """Run one question and judge its answer and its first round."""
    run = await run_once(workflow, q.text, timeout)
    return FreshOutcome(
        set=q.set,
        lang=q.lang,
        kind=q.kind,
        question=q.text,
        expect=list(q.expect),
        answer=run.answer,
        verdict="wrong" if run.error else judge(run.answer, q),
        covered=covered(q, run.tasks),
        seconds=run.seconds,
        first_task=run.first_task,
        rounds=run.rounds,
        tasks=[f"r{t['round']} {task_line(t)}" for t in run.tasks],
        error=run.error,
    )


async def run_fresh(
    llm: LLM, questions: Sequence[Fresh], timeout: float | None, **options: Any
) -> list[FreshOutcome]:
    """Every question, one after another, each once the model has read its planner's
    prompt again (as a user who reads an answer, then asks again; the workflows of the
    sets asked only)."""
    asked = {q.set for q in questions}
    made = {n: w for n, w in workflows(llm, **options).items() if n in asked}
    out = []
    for i, q in enumerate(questions, 1):
        await asyncio.gather(*(w.warmed() for w in made.values()))
        outcome = await ask(made[q.set], q, timeout)
        print(
            f"[{i}/{len(questions)}] {outcome.verdict} covered={outcome.covered} "
            f"{outcome.seconds:.1f} s (first task {outcome.first_task} s): {q.text} -> "
            f"{outcome.answer[:100]!r} [{'; '.join(outcome.tasks)}]",
            file=sys.stderr,
            flush=True,
        )
        out.append(outcome)
    return out


def _median(values: Sequence[float | None]) -> str:
    known = [v for v in values if v is not None]
    return f"{statistics.median(known):.1f}" if known else "-"


def row(label: str, group: Sequence[FreshOutcome]) -> str:
    """One table row: right / could not find / wrong, coverage, median times."""
    n = len(group)
    right = sum(o.verdict == "right" for o in group)
    cnf = sum(o.verdict == "could not find" for o in group)
    cov = sum(o.covered for o in group)
    return (
        f"| {label} | {right}/{n} ({100 * right / n:.0f}%) | {cnf} | {n - right - cnf} "
        f"| {cov}/{n} ({100 * cov / n:.0f}%) | {_median([o.first_task for o in group])} "
        f"| {_median([o.seconds for o in group])} |"
    )


def markdown(outcomes: Sequence[FreshOutcome], title: str) -> str:
    """Totals by tool set (and the three fresh sets together), then one row per question."""
    lines = [
        title,
        "",
        "| questions | right | could not find | wrong | first-round coverage "
        "| median first task s | median answer s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    fresh = [o for o in outcomes if o.set in TOOL_SETS]
    if fresh:
        lines.append(row("fresh tool sets, all", fresh))
    for name in dict.fromkeys(o.set for o in outcomes):
        lines.append(row(name, [o for o in outcomes if o.set == name]))
    lines += [
        "",
        "| set | lang | kind | question | expected | answer | verdict | covered "
        "| first task s | answer s |",
        "|---|---|---|---|---|---|---|---|---:|---:|",
    ]
    for o in outcomes:
        answer = (o.error or o.answer).replace("|", "/").replace("\n", " ")[:160]
        expect = ", ".join(str(x) for x in o.expect) or f"({o.kind})"
        first = "-" if o.first_task is None else f"{o.first_task:.1f}"
        lines.append(
            f"| {o.set} | {o.lang} | {o.kind} | {o.question} | {expect} | {answer} "
            f"| {o.verdict} | {'yes' if o.covered else 'no'} | {first} | {o.seconds:.1f} |"
        )
    return "\n".join(lines) + "\n"


def chosen_sets(spec: str) -> set[str]:
    """Set names from ``--sets``: set and batch names (``batch6``, ``batch7``)."""
    out: set[str] = set()
    for name in spec.split(","):
        out.update(BATCHES.get(name, (name,)))
    return out


async def main_async(args: argparse.Namespace) -> int:
    """Run the chosen questions on the configured model; print and save the results."""
    import os

    from llm_compiler.models.resolve import resolve_llm

    chosen = [q for q in QUESTIONS if args.sets == "all" or q.set in chosen_sets(args.sets)]
    resolved = resolve_llm()
    if args.sampling:
        resolved.sampling = {**resolved.sampling, **sampling(args.sampling)}  # type: ignore[attr-defined]
    date = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    async with resolved as llm:
        outcomes = await run_fresh(llm, chosen, args.timeout)
    title = f"Fresh answers on {resolved.description}, {date} (load average at start {load})."
    table = markdown(outcomes, title)
    print(table)
    right = sum(o.verdict == "right" for o in outcomes)
    meta = {"model": resolved.description, "date": date, "load": load, "right": right,
            "covered": sum(o.covered for o in outcomes), "n": len(outcomes),
            "sampling": getattr(resolved, "sampling", None)}  # fmt: skip
    write_results(args.out, table, meta, outcomes)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``python -m evals.fresh``."""
    p = argparse.ArgumentParser(prog="python -m evals.fresh", description=__doc__)
    p.add_argument(
        "--sets",
        default="all",
        help="all, or comma-separated: travel,shop,calendar,demo,stocks (batch6), "
        "library,transit,nutrition (batch7), bookshop,sensors (batch8)",
    )
    p.add_argument("--out", type=Path, default=RESULTS_DIR / "fresh.json")
    p.add_argument("--timeout", type=float, default=300.0, help="seconds per question")
    p.add_argument(
        "--sampling",
        default="",
        help="the embedded model's sampling settings for this run, e.g. repeat_penalty=1.1",
    )
    return asyncio.run(main_async(p.parse_args(argv)))


if __name__ == "__main__":
    sys.exit(main())

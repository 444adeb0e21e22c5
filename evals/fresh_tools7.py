"""Three more tool sets for the fresh answer eval (batch 7), written as a user writes their own.

A library catalogue (books, authors, copies, loans), a public transit timetable (ride
times, departures, line status, zones and fares) and nutrition with recipes (calories and
protein per amount, recipes, grocery prices). Plain functions with type hints and
docstrings over small fixed data (made up, no network). Some fail as real tools do: not
found in their own words (an exception, a returned message, ``None``, an empty list) and
a few inputs stand for a remote service that is down (``ConnectionError`` /
``TimeoutError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from llm_compiler.demo.tools import calculator

# ----------------------------------------------------------------------------- library

BOOKS = {
    "the hobbit": ("J. R. R. Tolkien", 1937, 3),
    "dune": ("Frank Herbert", 1965, 0),
    "beloved": ("Toni Morrison", 1987, 2),
    "emma": ("Jane Austen", 1815, 5),
    "persuasion": ("Jane Austen", 1817, 1),
    "neuromancer": ("William Gibson", 1984, 4),
}
LOANS = {"L-301": "2026-12-05", "L-302": "2026-12-11", "L-317": "2026-11-30"}
_ARCHIVED_LOANS = {"L-399"}
"""Loans kept by the old branch system, which is offline."""


def _book(title: str) -> tuple[str, int, int]:
    found = BOOKS.get(title.strip().lower())
    if found is None:
        raise LookupError(f"No book titled {title!r} in our catalogue.")
    return found


def author_of(title: str) -> str:
    """The author of a book in the catalogue."""
    return _book(title)[0]


def publication_year(title: str) -> int | None:
    """The year a book was first published (None when we do not know it)."""
    found = BOOKS.get(title.strip().lower())
    return None if found is None else found[1]


async def copies_available(title: str) -> int | str:
    """How many copies of a book can be borrowed right now."""
    await asyncio.sleep(0.05)
    found = BOOKS.get(title.strip().lower())
    if found is None:
        return f"Sorry, {title} is not in our catalogue."
    return found[2]


def books_by(author: str) -> list[str]:
    """Titles of the books in the catalogue written by an author."""
    who = author.strip().lower()
    return [t.title() for t, (a, _, _) in BOOKS.items() if a.lower() == who]


async def loan_due_date(loan_id: str) -> str:
    """The date (YYYY-MM-DD) a loan must be returned by; loan ids look like L-301."""
    await asyncio.sleep(0.05)
    key = loan_id.strip().upper()
    if key in _ARCHIVED_LOANS:
        raise ConnectionError("branch-archive.example.org: connection refused")
    if key not in LOANS:
        raise KeyError(f"unknown loan {loan_id}")
    return LOANS[key]


def difference(a: float, b: float) -> float:
    """a minus b."""
    return a - b


# ----------------------------------------------------------------------------- transit

RIDES = {  # minutes, zones
    ("central", "airport"): (24, 3),
    ("central", "harbour"): (11, 1),
    ("central", "university"): (17, 2),
    ("harbour", "airport"): (31, 3),
    ("university", "stadium"): (9, 1),
}
DEPARTURES = {
    ("central", "u2"): ["07:05", "07:20", "07:35", "07:50", "08:05"],
    ("central", "s1"): ["07:12", "07:42", "08:12"],
    ("harbour", "t4"): ["06:58", "07:28", "07:58"],
}
LINE_STATUS = {"u2": "running on time", "s1": "delays of about 10 minutes",
               "t4": "running on time"}  # fmt: skip
_FEED_DOWN = {"s9"}
"""Lines whose status comes from a regional feed that does not answer."""
FARES = {1: 2.40, 2: 3.10, 3: 4.20, 4: 5.00}


def _ride(origin: str, destination: str) -> tuple[int, int] | None:
    a, b = origin.strip().lower(), destination.strip().lower()
    return RIDES.get((a, b)) or RIDES.get((b, a))


def travel_minutes(origin: str, destination: str) -> int | None:
    """Minutes a direct ride between two stops takes (None: no direct connection)."""
    ride = _ride(origin, destination)
    return None if ride is None else ride[0]


def zones_between(origin: str, destination: str) -> int:
    """Number of fare zones a ride between two stops crosses."""
    ride = _ride(origin, destination)
    if ride is None:
        raise ValueError(f"no connection between {origin} and {destination}")
    return ride[1]


def fare(zones: int) -> float:
    """Price in euros of a single ticket for a number of zones (1 to 4)."""
    if zones not in FARES:
        raise ValueError(f"there is no ticket for {zones} zones")
    return FARES[zones]


def next_departure(stop: str, line: str, after: str) -> str:
    """The first departure (HH:MM) of a line from a stop at or after a time (HH:MM)."""
    times = DEPARTURES.get((stop.strip().lower(), line.strip().lower()), [])
    later = [t for t in times if t >= after.strip()]
    if not later:
        return f"No departures of {line} from {stop} after {after}."
    return later[0]


async def line_status(line: str) -> str:
    """Current service status of a line (e.g. U2, S1, T4)."""
    await asyncio.sleep(0.05)
    key = line.strip().lower()
    if key in _FEED_DOWN:
        raise TimeoutError("status feed did not answer within 3 s")
    return LINE_STATUS.get(key, f"Unknown line: {line}.")


def add_minutes(time: str, minutes: int) -> str:
    """A clock time (HH:MM) plus a number of minutes, as HH:MM."""
    start = datetime.strptime(time.strip(), "%H:%M")
    return (start + timedelta(minutes=minutes)).strftime("%H:%M")


# ----------------------------------------------------------------------------- nutrition

FOODS = {  # per 100 g: kcal, protein g
    "oats": (389.0, 16.9),
    "banana": (89.0, 1.1),
    "lentils": (116.0, 9.0),
    "chicken breast": (165.0, 31.0),
    "rice": (130.0, 2.7),
    "almonds": (579.0, 21.2),
    "tofu": (76.0, 8.0),
}
RECIPES = {
    "porridge": (["oats", "banana", "milk"], 1),
    "dal": (["lentils", "onion", "turmeric", "garlic"], 4),
    "fried rice": (["rice", "egg", "spring onion", "soy sauce"], 2),
}
PRICES = {"oats": 2.20, "rice": 1.90, "lentils": 3.40, "tofu": 9.50, "banana": 1.60}
_PRICE_API_DOWN = {"almonds", "chicken breast"}
"""Foods whose price comes from the grocery API, which is down."""


def _food(food: str) -> tuple[float, float]:
    found = FOODS.get(food.strip().lower())
    if found is None:
        raise ValueError(f"{food!r} is not in the food table")
    return found


def calories(food: str, grams: float) -> float:
    """Kilocalories in an amount of a food, in grams."""
    return round(_food(food)[0] * grams / 100, 1)


def protein(food: str, grams: float) -> float:
    """Grams of protein in an amount of a food, in grams."""
    return round(_food(food)[1] * grams / 100, 1)


def recipe_ingredients(recipe: str) -> list[str]:
    """The ingredients of a recipe (empty when we have no such recipe)."""
    found = RECIPES.get(recipe.strip().lower())
    return [] if found is None else list(found[0])


def recipe_servings(recipe: str) -> int | None:
    """How many servings a recipe makes."""
    found = RECIPES.get(recipe.strip().lower())
    return None if found is None else found[1]


def main_ingredient(recipe: str) -> str:
    """The first and main ingredient of a recipe."""
    found = RECIPES.get(recipe.strip().lower())
    if found is None:
        raise LookupError(f"no recipe called {recipe}")
    return found[0][0]


async def price_per_kg(food: str) -> float | str:
    """Today's grocery price of a food, in euros per kilogram."""
    await asyncio.sleep(0.05)
    key = food.strip().lower()
    if key in _PRICE_API_DOWN:
        raise ConnectionError("grocery-prices.example.net: HTTP 503 Service Unavailable")
    return PRICES.get(key, f"No price listed for {food}.")


def add(a: float, b: float) -> float:
    """a plus b."""
    return a + b


def subtract(a: float, b: float) -> float:
    """a minus b."""
    return a - b


TOOL_SETS: dict[str, list[Callable[..., Any]]] = {
    "library": [author_of, publication_year, copies_available, books_by, loan_due_date, difference],
    "transit": [
        travel_minutes,
        zones_between,
        fare,
        next_departure,
        line_status,
        add_minutes,
        calculator,
    ],  # fmt: skip
    "nutrition": [
        calories,
        protein,
        recipe_ingredients,
        recipe_servings,
        main_ingredient,
        price_per_kg,
        add,
        subtract,
    ],  # fmt: skip
}

"""Three tool sets for the fresh answer eval, written as a user would write their own.

Travel (flight and hotel prices, currency conversion), a small shop (stock, prices,
orders) and a calendar with time zones. Plain functions with type hints and docstrings,
over small fixed data (made up, no network): a run's answer can be checked against it.
Some fail the way real tools do: a lookup that finds nothing says so in its own words
(an exception, a message, ``None`` or an empty list), and a few inputs stand for a
remote service that is down (``ConnectionError`` / ``TimeoutError``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from llm_compiler.demo.tools import calculator

# ----------------------------------------------------------------------------- travel

FLIGHTS = {
    ("berlin", "madrid"): 142.0,
    ("berlin", "paris"): 98.0,
    ("berlin", "oslo"): 129.0,
    ("paris", "oslo"): 171.0,
    ("madrid", "dublin"): 119.0,
    ("madrid", "oslo"): 204.0,
    ("amsterdam", "porto"): 87.0,
}
HOTEL_NIGHT = {"madrid": 95.0, "paris": 160.0, "oslo": 185.0, "dublin": 130.0, "porto": 72.0,
               "berlin": 110.0}  # fmt: skip
EURO_RATES = {"USD": 1.08, "GBP": 0.85, "CHF": 0.94, "JPY": 162.0}
"""Rates kept locally; any other currency would be fetched from the rates service."""


async def flight_price(origin: str, destination: str) -> float:
    """Cheapest one-way economy fare between two cities, in euros."""
    await asyncio.sleep(0.05)
    fare = FLIGHTS.get((origin.strip().lower(), destination.strip().lower()))
    if fare is None:
        raise LookupError(f"No flights found from {origin} to {destination}.")
    return fare


def hotel_price(city: str, nights: int) -> float | str:
    """Total price in euros of a double room in a city for a number of nights."""
    per_night = HOTEL_NIGHT.get(city.strip().lower())
    if per_night is None:
        return f"Sorry, we have no hotels listed in {city}."
    return per_night * nights


async def convert_currency(amount: float, currency: str) -> float:
    """Convert an amount in euros into another currency (three-letter code, e.g. USD)."""
    await asyncio.sleep(0.05)
    rate = EURO_RATES.get(currency.strip().upper())
    if rate is None:
        # The rates service stands in here for a remote one that is down.
        raise ConnectionError("rates.example.com: HTTP 503 Service Unavailable")
    return round(amount * rate, 2)


# ----------------------------------------------------------------------------- shop

CATALOGUE = {
    "lumo lamp": (24.90, 37),
    "ergo chair": (149.00, 8),
    "vario desk": (389.00, 3),
    "flex arm": (59.50, 0),
    "hub7": (19.99, 120),
}
ORDERS = {
    5521: "shipped on 2026-11-20 with DHL, tracking number 00340434",
    5522: "paid, being packed",
    5523: "delivered on 2026-11-18",
}
_OFFLINE_ORDERS = {5530}
"""Orders kept in the old order system, which does not answer."""


def _product(name: str) -> tuple[float, int]:
    return CATALOGUE[name.strip().lower()]


def stock_level(product: str) -> int:
    """How many units of a product are in the warehouse."""
    try:
        return _product(product)[1]
    except KeyError:
        raise KeyError(f"{product!r} is not in the catalogue") from None


def unit_price(product: str) -> float | None:
    """Price of one unit of a product, in euros (None if we do not sell it)."""
    found = CATALOGUE.get(product.strip().lower())
    return None if found is None else found[0]


def line_total(product: str, quantity: int) -> float:
    """Price in euros of a quantity of one product."""
    return round(_product(product)[0] * quantity, 2)


async def order_status(order_id: int) -> str:
    """Status and shipping details of a customer order."""
    await asyncio.sleep(0.05)
    if order_id in _OFFLINE_ORDERS:
        raise TimeoutError("order service did not answer within 5 s")
    return ORDERS.get(order_id, f"Order {order_id} does not exist.")


def subtract(a: float, b: float) -> float:
    """a minus b."""
    return a - b


# ----------------------------------------------------------------------------- calendar

UTC_OFFSETS = {"berlin": 1.0, "london": 0.0, "new york": -5.0, "los angeles": -8.0,
               "tokyo": 9.0, "sydney": 11.0, "mumbai": 5.5}  # fmt: skip
CALENDAR = {
    "2026-12-01": ["09:30 Standup", "11:00 Budget review", "15:00 Dentist"],
    "2026-12-02": ["08:00 Design review", "13:00 Lunch with Anna"],
    "2026-12-03": ["10:00 Standup"],
}
_UNREACHABLE_DAYS = {"2026-12-24"}
"""Days held by the shared calendar server, which answers with an error."""


def utc_offset(city: str) -> float:
    """Hours a city's clock is ahead of UTC (negative: behind)."""
    try:
        return UTC_OFFSETS[city.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown time zone for {city!r}") from None


def local_time(city: str, utc_time: str) -> str:
    """The local clock time (HH:MM) in a city when it is utc_time (HH:MM) in UTC."""
    start = datetime.strptime(utc_time.strip(), "%H:%M")
    return (start + timedelta(hours=utc_offset(city))).strftime("%H:%M")


async def meetings(day: str) -> list[str]:
    """The meetings on a date (YYYY-MM-DD), each as 'HH:MM title', times in UTC."""
    await asyncio.sleep(0.05)
    if day.strip() in _UNREACHABLE_DAYS:
        raise ConnectionError("calendar.example.com: HTTP 502 Bad Gateway")
    return list(CALENDAR.get(day.strip(), []))


async def first_meeting_time(day: str) -> str:
    """UTC start time (HH:MM) of the first meeting on a date (YYYY-MM-DD); empty if free."""
    found = await meetings(day)
    return found[0].split()[0] if found else ""


TOOL_SETS: dict[str, list[Callable[..., Any]]] = {
    "travel": [flight_price, hotel_price, convert_currency, calculator],
    "shop": [stock_level, unit_price, line_total, order_status, subtract],
    "calendar": [utc_offset, local_time, meetings, first_meeting_time, subtract],
}

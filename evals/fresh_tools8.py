"""Two more tool sets for the fresh answer eval (batch 8), written as a user writes their own.

A bookshop (prices, delivery times, copies at a branch, authors) whose tools cannot
answer every part of some questions, and a home's sensors (room temperatures at a time
of day, humidity, a device's energy use). Plain functions with type hints and
docstrings over small fixed data (made up, no network). Not found in the tools' own
words (an exception, ``None``) and one service that is down (``ConnectionError``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# ----------------------------------------------------------------------------- bookshop

CATALOGUE = {  # price in EUR, days to deliver (None: not deliverable), author
    "solaris": (12.50, 3, "Stanislaw Lem"),
    "middlemarch": (9.90, 2, "George Eliot"),
    "kindred": (14.00, None, "Octavia E. Butler"),
    "rebecca": (11.20, 5, "Daphne du Maurier"),
    "dracula": (7.80, 2, "Bram Stoker"),
}
BRANCH_STOCK = {
    ("solaris", "harbour"): 4,
    ("solaris", "old town"): 0,
    ("middlemarch", "harbour"): 1,
    ("rebecca", "old town"): 6,
    ("dracula", "harbour"): 2,
}
BRANCHES = {"harbour", "old town"}


def _title(title: str) -> tuple[float, int | None, str]:
    found = CATALOGUE.get(title.strip().lower())
    if found is None:
        raise LookupError(f"We do not sell a book titled {title!r}.")
    return found


def book_price(title: str) -> float:
    """The price of a book, in euros."""
    return _title(title)[0]


def delivery_days(title: str) -> int | None:
    """How many days delivery of a book to your home takes (None: we cannot deliver it)."""
    return _title(title)[1]


def copies_at_branch(title: str, branch: str) -> int:
    """How many copies of a book a branch of the shop has on its shelves."""
    key = branch.strip().lower()
    if key not in BRANCHES:
        raise KeyError(f"no branch called {branch}")
    return BRANCH_STOCK.get((title.strip().lower(), key), 0)


def writer_of(title: str) -> str:
    """Who wrote a book we sell."""
    return _title(title)[2]


# ----------------------------------------------------------------------------- sensors

TEMPERATURES = {  # degrees Celsius by room and time of day
    ("kitchen", "08:00"): 19.5,
    ("kitchen", "20:00"): 22.0,
    ("cellar", "08:00"): 12.0,
    ("cellar", "20:00"): 11.5,
    ("bedroom", "08:00"): 18.0,
    ("bedroom", "20:00"): 16.5,
}
HUMIDITY = {"kitchen": 48, "cellar": 81, "bedroom": 55}
ENERGY = {"heat pump": 14.2, "fridge": 1.1, "washing machine": 2.4}
_OFFLINE = {"garage"}


def room_temperature(room: str, time: str) -> float:
    """A room's temperature in degrees Celsius at a time of day (HH:MM)."""
    if room.strip().lower() in _OFFLINE:
        raise ConnectionError("sensor hub garage-hub.local: HTTP 503")
    value = TEMPERATURES.get((room.strip().lower(), time.strip()))
    if value is None:
        raise LookupError(f"No reading for {room} at {time}.")
    return value


def humidity(room: str) -> int | None:
    """A room's relative humidity now, in percent (None: no sensor in that room)."""
    return HUMIDITY.get(room.strip().lower())


def energy_used_today(device: str) -> float | None:
    """Kilowatt-hours a device has used today (None: the device is not metered)."""
    return ENERGY.get(device.strip().lower())


def subtract(a: float, b: float) -> float:
    """a minus b."""
    return a - b


TOOL_SETS: dict[str, list[Callable[..., Any]]] = {
    "bookshop": [book_price, delivery_days, copies_at_branch, writer_of],
    "sensors": [room_temperature, humidity, energy_used_today, subtract],
}

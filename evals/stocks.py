"""A second tool set for the answer eval, unlike the demo's: stocks, companies, currencies.

Offline and fixed (the prices are made up, not market data): a run's answer can be
checked against them. No hand-written examples go with these tools: a run gets what a
new user's first script gets.
"""

from __future__ import annotations

import asyncio

from llm_compiler.demo.tools import calculator
from llm_compiler.tools import NotFound

PRICES = {"NVDA": 181.2, "AAPL": 229.5, "MSFT": 512.0, "GOOGL": 201.4, "TSLA": 338.7}
COMPANIES = {
    "nvidia": ("NVIDIA", "NVDA", "Jensen Huang", 1993, 36_000),
    "apple": ("Apple", "AAPL", "Tim Cook", 1976, 164_000),
    "microsoft": ("Microsoft", "MSFT", "Satya Nadella", 1975, 228_000),
    "alphabet": ("Alphabet", "GOOGL", "Sundar Pichai", 2015, 183_000),
    "tesla": ("Tesla", "TSLA", "Elon Musk", 2003, 125_000),
}
RATES = {"USD": 1.0, "EUR": 0.86, "JPY": 147.0, "GBP": 0.74, "CHF": 0.8}


async def stock_price(symbol: str) -> float:
    """The latest price of one share, in US dollars, by ticker symbol (such as NVDA)."""
    await asyncio.sleep(0)
    price = PRICES.get(symbol.strip().upper())
    if price is None:
        raise NotFound(f"Unknown symbol {symbol!r}; known: {', '.join(PRICES)}.")
    return price


async def company_profile(name: str) -> str:
    """A company's ticker symbol, chief executive (CEO), founding year and employees."""
    await asyncio.sleep(0)
    key = name.lower().replace(" inc", "").replace(" corp", "").strip(" .")
    found = COMPANIES.get(key)
    if found is None:
        raise NotFound(f"No company named {name!r}.")
    title, ticker, ceo, founded, staff = found
    return f"{title}: ticker {ticker}; CEO {ceo}; founded {founded}; {staff:,} employees."


def convert_currency(amount: float, to_currency: str) -> float:
    """Convert an amount of US dollars into another currency (EUR, JPY, GBP, CHF)."""
    rate = RATES.get(to_currency.strip().upper())
    if rate is None:
        raise NotFound(f"Unknown currency {to_currency!r}; known: {', '.join(RATES)}.")
    return round(amount * rate, 2)


TOOLS = [stock_price, company_profile, convert_currency, calculator]

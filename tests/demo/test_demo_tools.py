"""The offline demo tools: safe calculator and encyclopedia (llm_compiler.demo.tools)."""

from __future__ import annotations

import math

import pytest

from llm_compiler.demo import tools as demo_tools
from llm_compiler.tools import NotFound

calculator = demo_tools.calculator


@pytest.fixture(autouse=True)
def no_latency(monkeypatch):
    monkeypatch.setattr(demo_tools, "LATENCY", 0.0)


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7.0),
        ("(1 + 2) * 3", 9.0),
        ("8849 - 8611", 238.0),
        ("7 / 2", 3.5),
        ("7 // 2", 3.0),
        ("7 % 4", 3.0),
        ("2 ** 10", 1024.0),
        ("-3 + +5", 2.0),
        ("-(2 ** 2)", -4.0),
        ("sqrt(16) + abs(-2)", 6.0),
        ("min(3, 1, 2) + max(4, 5)", 6.0),
        ("round(2.567, 2)", 2.57),
        ("8849.0 / 1000", 8.849),
        ("  1.5e3 ", 1500.0),
        ("2 * pi", 2 * math.pi),
    ],
)
def test_calculator_evaluates_arithmetic(expression, expected):
    assert calculator(expression) == pytest.approx(expected)


def test_calculator_returns_float():
    assert isinstance(calculator("2 + 2"), float)


def test_calculator_drops_float_noise():
    assert str(calculator("229.5 - 181.2")) == "48.3"
    assert str(calculator("0.1 + 0.2")) == "0.3"
    assert calculator("1 / 3") == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",  # unknown call
        "open('x')",
        "x + 1",  # unknown name
        "math.sqrt(4)",  # attribute access
        "(1).__class__",
        "'a' * 3",  # strings
        "True + 1",  # booleans are not numbers here
        "[1, 2]",
        "lambda: 1",
        "1 if 2 else 3",
        "1 < 2",
        "sqrt(x=4)",  # keyword arguments
    ],
)
def test_calculator_rejects_anything_but_arithmetic(expression):
    with pytest.raises(ValueError, match="Unsupported syntax|Unknown function|Only numbers"):
        calculator(expression)


@pytest.mark.parametrize("expression", ["", "1 +", "8,849 m - 8,611 m", "import os"])
def test_calculator_rejects_non_expressions(expression):
    with pytest.raises(ValueError):
        calculator(expression)


def test_calculator_refuses_huge_exponents_and_division_by_zero():
    with pytest.raises(ValueError, match="too large"):
        calculator("9 ** 9 ** 9")
    with pytest.raises(ValueError, match="Division by zero"):
        calculator("1 / (2 - 2)")


@pytest.mark.parametrize(
    ("query", "title"),
    [
        ("France", "France"),
        ("france", "France"),
        ("Everest", "Mount Everest"),
        ("mount everest", "Mount Everest"),
        ("Mt. Everst", "Mount Everest"),  # typo, close match
        ("the Nile", "Nile"),
        ("Population of Brazil", "Brazil"),
        ("USA", "United States"),
        ("Einstein", "Albert Einstein"),
        ("Jupitr", "Jupiter"),
    ],
)
async def test_search_finds_entries_fuzzily(query, title):
    text = await demo_tools.search(query)
    assert text.startswith(f"{title}: ")


async def test_search_says_when_there_is_no_entry():
    with pytest.raises(NotFound, match="No entry for 'Atlantis'"):
        await demo_tools.search("Atlantis")


async def test_search_texts_hold_the_facts():
    assert "Capital: Paris" in await demo_tools.search("France")
    assert "8,849 m" in await demo_tools.search("Everest")
    assert "Born 1879" in await demo_tools.search("Albert Einstein")


async def test_lookup_returns_numbers_and_explains_missing_fields():
    assert await demo_tools.lookup("K2", "height_m") == 8611.0
    assert await demo_tools.lookup("Nile", "length_km") == 6650.0
    with pytest.raises(LookupError, match="known fields: height_m"):
        await demo_tools.lookup("K2", "population")
    with pytest.raises(LookupError, match="No entry for 'Atlantis'"):
        await demo_tools.lookup("Atlantis", "population")


def test_every_entry_is_well_formed():
    entries = {id(e): e for e in demo_tools._entries().values()}.values()
    assert len(entries) >= 36
    for entry in entries:
        assert entry["title"] and entry["text"] and entry["facts"]
        assert all(isinstance(v, int | float) for v in entry["facts"].values())

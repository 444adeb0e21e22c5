"""Generated few-shot examples show shapes: declared values or placeholders named after
each parameter, a pair of parameters two different ones."""

from __future__ import annotations

import re
from typing import Annotated, Literal

import pytest
from llama_index.core.tools import FunctionTool
from pydantic import Field

from llm_compiler.dialects.llmcompiler.examples import own_tools_example

Code = Literal["EUR", "USD", "JPY"]


def convert_currency(amount: float, from_currency: Code, to_currency: Code) -> float:
    """Convert an amount between currencies."""
    return amount


def days_between(start: str, end: str) -> int:
    """Days from start to end."""
    return 0


def copy_file(source_path: str, target_path: str) -> str:
    """Copy a file."""
    return target_path


def random_int(min_value: int, max_value: int) -> int:
    """A random integer in [min_value, max_value]."""
    return min_value


def stock_price(symbol: str) -> float:
    """The latest price of a stock."""
    return 1.0


def _calls(plan: str, tool: str) -> list[dict[str, str]]:
    found = re.findall(rf"{tool}\((.*)\)", plan)
    return [dict(re.findall(r"(\w+)=([^,]+)", args)) for args in found]


@pytest.mark.parametrize(
    ("fn", "first", "second"),
    [
        (convert_currency, "from_currency", "to_currency"),
        (days_between, "start", "end"),
        (copy_file, "source_path", "target_path"),
        (random_int, "min_value", "max_value"),
    ],
)
def test_paired_parameters_get_distinct_values(fn, first, second):
    tools = [FunctionTool.from_defaults(stock_price), FunctionTool.from_defaults(fn)]
    plan = own_tools_example(tools)
    calls = _calls(plan, fn.__name__)
    assert calls, plan
    for call in calls:
        assert call[first] != call[second], plan


def test_ranges_run_forward_in_both_parallel_calls():
    plan = own_tools_example([FunctionTool.from_defaults(days_between)])
    calls = _calls(plan, "days_between")
    assert len(calls) == 2 and calls[0] != calls[1]
    numbers = _calls(own_tools_example([FunctionTool.from_defaults(random_int)]), "random_int")
    assert all(int(c["min_value"]) < int(c["max_value"]) for c in numbers)


def test_values_are_declared_or_named_after_the_parameter_never_a_list_of_words():
    def fahrt(haltestelle: Annotated[str, Field(examples=["Hauptbahnhof", "Messe"])]) -> int:
        """Fahrzeit."""
        return 0

    def weather(city: str) -> float:
        """Weather."""
        return 0.0

    plan = own_tools_example([FunctionTool.from_defaults(fahrt)])
    assert 'fahrt(haltestelle="Hauptbahnhof")' in plan and 'haltestelle="Messe"' in plan
    plan = own_tools_example([FunctionTool.from_defaults(weather)])
    assert 'weather(city="city 1")' in plan and 'weather(city="city 2")' in plan
    assert "Paris" not in plan

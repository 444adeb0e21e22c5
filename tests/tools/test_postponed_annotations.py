"""Tools written in a module with postponed annotations keep their full schema."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from llm_compiler.dialects.grammar import plan_grammar
from llm_compiler.tools import signature, to_tool, validate_arguments


class Point(BaseModel):
    x: int
    y: int


def weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather in a city."""
    return city


async def distance(a: Point, b: Point) -> float:
    """Distance between two points."""
    return float(abs(a.x - b.x) + abs(a.y - b.y))


def test_literal_and_model_annotations_resolve():
    tool = to_tool(weather)
    assert signature(tool) == """weather(city: str, unit: "celsius" | "fahrenheit" = 'celsius')"""
    assert validate_arguments(tool, {"city": "Oslo", "unit": "fahrenheit"})["unit"] == "fahrenheit"
    assert '"\\"fahrenheit\\""' in plan_grammar([tool])
    params = to_tool(distance).metadata.get_parameters_dict()
    assert params["properties"]["a"] == {"$ref": "#/$defs/Point"}

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


def test_a_function_tool_made_elsewhere_gets_its_annotations_resolved():
    """An AgentWorkflow turns callables into FunctionTools itself: the engine still reads
    the Literal (the demo's ``lookup`` declares its fields so)."""
    from llama_index.core.tools import FunctionTool

    from llm_compiler.demo.tools import lookup
    from llm_compiler.tools.spec import tool_spec

    tool = FunctionTool.from_defaults(async_fn=lookup)
    spec = tool_spec(tool)
    assert [p.name for p in spec.params] == ["name", "field"]
    assert "height_m" in spec.params[1].schema["enum"]


def test_a_tool_whose_annotations_never_resolve_keeps_its_parameter_names():
    from llama_index.core.tools import FunctionTool

    from llm_compiler.tools.spec import tool_spec

    def measure(thing: str, unit: NoSuchType) -> float:  # type: ignore[name-defined]  # noqa: F821
        """Measure a thing."""
        return 1.0

    spec = tool_spec(FunctionTool.from_defaults(fn=measure))
    assert [(p.name, p.required) for p in spec.params] == [("thing", True), ("unit", True)]

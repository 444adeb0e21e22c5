"""Tools from JSON schemas: dialects, awkward names, nesting, rendering, exact calls."""

from __future__ import annotations

import pytest
from llama_index.core.tools import FunctionTool

from llm_compiler import ConfigurationError, LLMCompilerWorkflow
from llm_compiler.dialects.llmcompiler.prompts import render_actions
from llm_compiler.plan import PlanTask
from llm_compiler.testing import ScriptedLLM
from llm_compiler.tools import (
    bind,
    call_tool,
    parameters,
    required,
    signature,
    to_tool,
    validate_arguments,
)
from llm_compiler.tools.schema import (
    SchemaTool,
    normalize_schema,
    parse_definition,
    python_names,
    tool_json_schema,
    tools_from_schemas,
)

FLIGHTS = {
    "type": "function",
    "function": {
        "name": "flights.search",
        "description": "Find flights\n between two airports.",
        "parameters": {
            "type": "dict",
            "properties": {
                "from": {"type": "string", "description": "Departure airport code."},
                "_from": {"type": "string", "description": "Fallback departure."},
                "class": {
                    "type": "string",
                    "enum": ["economy", "business"],
                    "default": "economy",
                },
                "max-results": {"type": "integer", "default": 5},
                "passenger": {
                    "type": "dict",
                    "description": "Who flies.",
                    "properties": {
                        "name": {"type": "string"},
                        "age": {"type": "integer", "default": 30},
                        "seat-pref": {"type": "string", "enum": ["aisle", "window"]},
                    },
                    "required": ["name"],
                },
                "dates": {"type": "array", "items": {"type": "string"}},
                "ratio": {"type": "float"},
                "anything": {"type": "any"},
                "pair": {"type": "tuple", "items": {"type": "integer"}},
            },
            "required": ["from", "passenger"],
        },
    },
}


def record_into(log: list) -> object:
    def handler(name: str, arguments: dict) -> str:
        log.append((name, arguments))
        return f"{name} ok"

    return handler


def test_dialect_types_are_normalized_recursively():
    schema = normalize_schema(FLIGHTS["function"]["parameters"])
    props = schema["properties"]
    assert schema["type"] == "object"
    assert props["passenger"]["type"] == "object"
    assert props["ratio"]["type"] == "number"
    assert props["pair"] == {"type": "array", "items": {"type": "integer"}}
    assert "type" not in props["anything"]
    assert normalize_schema({"type": ["float", "null"]})["type"] == ["number", "null"]


@pytest.mark.parametrize(
    "spec",
    [
        FLIGHTS,
        FLIGHTS["function"],
        {
            "name": "flights.search",
            "description": "Find flights.",
            "inputSchema": FLIGHTS["function"]["parameters"],
        },
    ],
    ids=["openai", "bare", "mcp"],
)
def test_every_dialect_gives_the_same_tool(spec):
    name, _, params = parse_definition(spec)
    assert name == "flights.search"
    assert set(params["properties"]) >= {"from", "_from", "class", "max-results"}
    assert params["required"] == ["from", "passenger"]


def test_bad_definitions_are_refused_clearly():
    with pytest.raises(ConfigurationError, match="name"):
        parse_definition({"description": "no name"})
    with pytest.raises(ConfigurationError, match="object"):
        parse_definition({"name": "f", "parameters": {"type": "string"}})
    with pytest.raises(ConfigurationError, match="exactly one"):
        SchemaTool("f", "", {"type": "object", "properties": {}})
    with pytest.raises(ConfigurationError, match="No function"):
        tools_from_schemas([FLIGHTS])


def test_python_names_are_unique_safe_and_stable():
    names = python_names(["from", "_from", "class", "max-results", "from_", "2d", "json", "ok"])
    assert names["ok"] == "ok" and names["from_"] == "from_"
    assert names["from"] not in ("from", "from_") and names["from"].isidentifier()
    assert len(set(names.values())) == len(names)
    for original, safe in names.items():
        assert safe.isidentifier() and not safe.startswith("_"), (original, safe)
    assert names["json"] != "json"  # would shadow BaseModel.json


def test_signature_shows_enums_nesting_defaults_and_descriptions():
    tool = SchemaTool.from_definition(FLIGHTS, handler=record_into([]))
    sig = signature(tool)
    assert sig.startswith("flights.search(from_: str, ")
    assert 'class_: "economy" | "business" = \'economy\'' in sig
    assert "max_results: int = 5" in sig
    assert '"name": str' in sig and '"age": int = 30' in sig
    assert '"seat-pref": "aisle" | "window" = None' in sig
    assert "dates: list[str] = None" in sig and "pair: list[int] = None" in sig
    line = render_actions([tool])
    assert "Find flights between two airports." in line
    assert "from_: Departure airport code." in line and "passenger: Who flies." in line
    assert "\n" not in line


def test_plan_arguments_bind_by_python_or_original_name_and_map_back_exactly():
    log: list = []
    tool = SchemaTool.from_definition(FLIGHTS, handler=record_into(log))
    assert parameters(tool)[:4] == ["from_", "from_2", "class_", "max_results"]
    assert required(tool) == ["from_", "passenger"]
    text_plan = PlanTask(
        id=1, tool="flights.search", args=["JFK"], kwargs={"max_results": "3", "passenger": {}}
    )
    bound = bind(text_plan, tool)
    assert bound.error is None
    assert bound.kwargs == {"from_": "JFK", "max_results": "3", "passenger": {}}
    with pytest.raises(ValueError, match="passenger.name"):
        validate_arguments(tool, bound.kwargs)
    json_plan = PlanTask(
        id=2,
        tool="flights.search",
        kwargs={
            "from": "JFK",
            "max-results": "3",
            "class": "business",
            "passenger": {"name": "Ann", "seat-pref": "aisle"},
        },
    )
    bound = bind(json_plan, tool)
    assert bound.error is None
    assert set(bound.kwargs) == {"from_", "max_results", "class_", "passenger"}
    kwargs = validate_arguments(tool, bound.kwargs)
    assert kwargs["max_results"] == 3
    assert tool.original_arguments(kwargs) == {
        "from": "JFK",
        "max-results": 3,
        "class": "business",
        "passenger": {"name": "Ann", "seat-pref": "aisle"},
    }
    twice = PlanTask(id=3, tool="flights.search", kwargs={"from": "A", "from_": "B"})
    assert "twice" in (bind(twice, tool).error or "")
    unknown = PlanTask(id=4, tool="flights.search", kwargs={"to": "A"})
    assert "no parameter 'to'" in (bind(unknown, tool).error or "")


async def test_the_callable_receives_original_names_and_only_given_values():
    log: list = []
    tool = SchemaTool.from_definition(FLIGHTS, handler=record_into(log))
    task = PlanTask(
        id=1,
        tool="flights.search",
        kwargs={"from": "JFK", "max-results": "3", "passenger": {"name": "Ann", "x": 1}},
    )
    kwargs = validate_arguments(tool, bind(task, tool).kwargs)
    assert await call_tool(tool, kwargs) == "flights.search ok"
    assert log == [
        (
            "flights.search",
            {"from": "JFK", "max-results": 3, "passenger": {"name": "Ann", "x": 1}},
        )
    ]


def test_invalid_arguments_are_reported_by_name():
    tool = SchemaTool.from_definition(FLIGHTS, handler=record_into([]))
    with pytest.raises(ValueError, match="class"):
        validate_arguments(tool, {"from_": "JFK", "passenger": {"name": "A"}, "class_": "first"})
    with pytest.raises(ValueError, match="passenger.name"):
        tool.original_arguments({"from": "JFK", "passenger": {}})
    with pytest.raises(TypeError, match="keyword"):
        tool.call("JFK")


async def test_sync_and_async_functions_per_tool():
    seen: list = []

    def play(**kwargs):
        seen.append(("sync", kwargs))
        return "played"

    async def stop(**kwargs):
        seen.append(("async", kwargs))
        return "stopped"

    specs = [
        {"name": "spotify.play", "parameters": {"type": "dict", "properties": {"for": {}}}},
        {"name": "spotify.stop", "inputSchema": {"type": "object", "properties": {}}},
    ]
    play_tool, stop_tool = tools_from_schemas(
        specs, functions={"spotify.play": play, "spotify.stop": stop}
    )
    assert (await play_tool.acall(for_=[1, "x"])).raw_output == "played"
    assert (await stop_tool.acall()).raw_output == "stopped"
    assert play_tool.call(**{"for": 2}).raw_output == "played"
    assert seen == [("sync", {"for": [1, "x"]}), ("async", {}), ("sync", {"for": 2})]


def test_tool_json_schema_of_schema_tools_and_function_tools():
    tool = SchemaTool.from_definition(FLIGHTS, handler=record_into([]))
    schema = tool_json_schema(tool)
    assert schema["properties"]["passenger"]["type"] == "object"
    schema["properties"].clear()  # a copy: the tool's own schema is untouched
    assert tool_json_schema(tool)["properties"]

    def lookup(name: str, field: str = "population") -> str:
        """Look up a field."""
        return name

    fn_schema = tool_json_schema(FunctionTool.from_defaults(fn=lookup))
    assert fn_schema["properties"]["name"]["type"] == "string"
    assert fn_schema["required"] == ["name"]
    assert "$defs" not in fn_schema


async def test_a_workflow_runs_schema_tools_from_a_text_plan():
    log: list = []
    tool = SchemaTool.from_definition(FLIGHTS, handler=record_into(log))
    plan = (
        '1. flights.search(from_="JFK", passenger={"name": "Ann"}, class_="business")\n'
        "2. join()\n<END_OF_PLAN>"
    )
    llm = ScriptedLLM([plan, "Thought: done.\nAction: Finish(Booked.)"], chat=False)
    output = await LLMCompilerWorkflow(tools=[tool], llm=llm).run(user_msg="Fly me")
    assert str(output) == "Booked."
    assert log == [
        ("flights.search", {"from": "JFK", "passenger": {"name": "Ann"}, "class": "business"})
    ]
    assert "flights.search(from_: str" in llm.calls[0].prompt


def test_references_are_inlined_and_recursion_is_cut():
    spec = {
        "name": "tree.add",
        "inputSchema": {
            "type": "object",
            "properties": {"node": {"$ref": "#/$defs/Node"}, "tag": {"$ref": "#/definitions/Tag"}},
            "required": ["node"],
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "label": {"type": "string"},
                        "child": {"$ref": "#/$defs/Node"},
                    },
                    "required": ["label"],
                }
            },
            "definitions": {"Tag": {"type": "string", "enum": ["a", "b"]}},
        },
    }
    tool = SchemaTool.from_definition(spec, handler=record_into([]))
    assert 'tag: "a" | "b" = None' in signature(tool)
    assert '"label": str' in signature(tool)
    nested = {"label": "x", "child": {"label": "y", "child": {"label": "z"}}}
    assert tool.original_arguments({"node": nested}) == {"node": nested}
    with pytest.raises(ValueError, match="tag"):
        tool.original_arguments({"node": nested, "tag": "c"})


def test_enums_of_objects_and_untyped_values_accept_any_value():
    spec = {
        "name": "pick",
        "parameters": {
            "type": "object",
            "properties": {"choice": {"enum": [{"a": 1}, {"b": 2}]}, "free": {}},
        },
    }
    tool = SchemaTool.from_definition(spec, handler=record_into([]))
    assert tool.original_arguments({"choice": {"a": 1}, "free": [1, "x"]}) == {
        "choice": {"a": 1},
        "free": [1, "x"],
    }
    assert signature(tool) == 'pick(choice: {"a": 1} | {"b": 2} = None, free = None)'


def test_a_signature_is_built_once_per_schema_and_name(monkeypatch):
    """Every planner prompt shows each tool's signature: the JSON schema behind it is
    built once per schema and name, and a renamed tool gets its own line."""

    def scale(value: float, factor: float = 2.0) -> float:
        """Scale a number."""
        return value * factor

    tool = to_tool(scale)
    schema = tool.metadata.fn_schema
    assert schema is not None
    built = []
    original = schema.model_json_schema

    def counted(*args, **kwargs):
        built.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(schema, "model_json_schema", counted)
    first = signature(tool)
    assert signature(tool) == first == "scale(value: float, factor: float = 2.0)"
    assert len(built) == 1
    renamed = FunctionTool.from_defaults(fn=scale, name="resize", fn_schema=schema)
    assert signature(renamed) == "resize(value: float, factor: float = 2.0)"
    assert len(built) == 2

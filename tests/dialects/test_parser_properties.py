"""The plan parser never raises, and gives the same result however the text is chunked."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from llm_compiler.dialects.llmcompiler import PlanParser

_ATOMS = st.sampled_from(
    [
        '"text"',
        "'single'",
        "$1",
        "${2}",
        "$10",
        "3",
        "-4.5",
        "[1, $1]",
        '{"k": $2}',
        '{"$ref": 1}',
        '{"$concat": ["a", {"$ref": 2}]}',
        '{"$lit": 5}',
        "free text words",
        '"unclosed',
        "(",
        ")",
        "[[[",
        "]]",
        "\\\\",
        '"esc \\" quote"',
        "a.b.c",
        "not x",
        "x=1",
        "*args",
        "1" * 40,
        "ü日本",
    ]
)
_ARGS = st.lists(_ATOMS, max_size=4).map(", ".join)
_LINE = st.one_of(
    st.tuples(st.integers(0, 12), st.sampled_from(["search", "math", "join", "x.y"]), _ARGS).map(
        lambda t: f"{t[0]}. {t[1]}({t[2]})"
    ),
    st.tuples(st.integers(0, 12), _ARGS).map(lambda t: f'{t[0]}. {{"search": [{t[1]}]}}'),
    st.sampled_from(
        [
            "Thought: think",
            "join()",
            "<END_OF_PLAN>",
            "Question: next",
            "Here is the plan:",
            "```",
            "",
            "   ",
            "3) search(x) trailing words",
            "- 4: math($3)",
            "99999999999999. search(a)",
        ]
    ),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=30),
)
PLANS = st.lists(_LINE, max_size=12).map("\n".join)


def _parse(chunks: list[str], **limits: int) -> tuple:
    parser = PlanParser(known_ids=[], **limits)
    tasks = []
    for chunk in chunks:
        tasks += parser.feed(chunk)
    tasks += parser.finish()
    return (
        [t.model_dump() for t in tasks],
        parser.errors,
        parser.thoughts,
        parser.join_id,
        parser.joined,
    )


def _cut(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts})
    return [text[a:b] for a, b in zip([0, *points], [*points, len(text)], strict=True)]


@given(text=PLANS, cuts=st.lists(st.integers(0, 10_000), max_size=20))
def test_parsing_never_raises_and_ignores_chunking(text, cuts):
    whole = _parse([text])
    assert _parse(_cut(text, cuts)) == whole
    assert _parse(list(text)) == whole


@given(text=PLANS, cuts=st.lists(st.integers(0, 10_000), max_size=8))
def test_bounds_hold_however_the_text_is_chunked(text, cuts):
    limits = {"max_plan_chars": 60, "max_plan_errors": 3, "max_line_chars": 25, "max_tasks": 3}
    whole = _parse([text], **limits)
    assert _parse(_cut(text, cuts), **limits) == whole
    tasks, errors, _, _, _ = whole
    assert len(tasks) <= 3 and len(errors) <= 3 + 2
    for task in tasks:
        assert task["error"] is None or len(task["error"]) < 400

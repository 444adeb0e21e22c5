"""Plan errors have a kind, whichever dialect or check wrote them."""

from __future__ import annotations

import pytest

from llm_compiler.dialects import PlannerContext
from llm_compiler.dialects.json_plan import JsonPlanStream
from llm_compiler.dialects.llmcompiler import PlanParser
from llm_compiler.dialects.prompting import PromptContext
from llm_compiler.plan import error_kind


@pytest.mark.parametrize(
    ("text", "kinds"),
    [
        ('1. a("x")\n2. a("y")\n3. a("z")\n4. join()', ["too_many_tasks", "no_join"]),
        ('1. a("x")', ["no_join"]),
        ("", ["empty_plan", "no_join"]),
    ],
)
def test_text_plan_errors(text, kinds):
    parser = PlanParser(max_tasks=2)
    parser.feed(text)
    parser.finish()
    assert [error_kind(e) for e in parser.errors] == kinds


def test_json_plan_errors():
    stream = JsonPlanStream(PlannerContext(prompt=PromptContext("q"), tools=[]))
    stream.feed('{"tasks": [{"id": 1}')
    stream.finish()
    assert [error_kind(e) for e in stream.errors] == ["no_join"]
    assert error_kind("something new") == "other"

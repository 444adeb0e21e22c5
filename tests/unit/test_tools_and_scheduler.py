"""Tool binding and the scheduler's pure core."""

from __future__ import annotations

import pytest
from llama_index.core.tools import FunctionTool

from llm_compiler.engine.scheduler import Scheduler
from llm_compiler.engine.state import CompilerState, TaskOutcome
from llm_compiler.plan import PlanTask, ref
from llm_compiler.tools import bind, jsonable, signature, validate_arguments


def area(width: float, height: float, unit: str = "m") -> str:
    """Area of a rectangle."""
    return f"{width * height} {unit}2"


TOOL = FunctionTool.from_defaults(fn=area)


def task(id, *args, deps=(), **kwargs):
    return PlanTask(id=id, tool="area", args=list(args), kwargs=kwargs, deps=list(deps))


def test_signature():
    assert signature(TOOL) == "area(width: float, height: float, unit: str = 'm')"


def test_bind_positional_and_keyword_arguments():
    assert bind(task(1, 2, height=3), TOOL).kwargs == {"width": 2, "height": 3}
    assert bind(task(1, 2, 3, "cm", 4), TOOL).error == (
        "area takes 3 argument(s) (width, height, unit) but 4 were given."
    )
    assert bind(task(1, 2, width=3), TOOL).error == "area got 'width' twice."
    assert bind(task(1, 2), TOOL).error == "area is missing required argument(s): height."


def test_validation_coerces_and_explains():
    assert validate_arguments(TOOL, {"width": "2", "height": 3}) == {"width": 2.0, "height": 3.0}
    with pytest.raises(ValueError, match="Invalid arguments for area: width: Input should be"):
        validate_arguments(TOOL, {"width": "wide", "height": 3})


def test_jsonable_keeps_json_values_and_stringifies_the_rest():
    assert jsonable({"a": [1, 2.5, None]}) == {"a": [1, 2.5, None]}
    assert jsonable({1, 2}) in ("{1, 2}", "{2, 1}")


def test_scheduler_dispatches_ready_tasks_and_skips_dependents_of_failures():
    s = Scheduler(CompilerState(), max_concurrency=None)
    s.admit(
        [
            task(1, width=1, height=2),
            task(2, width=ref(1), height=2, deps=[1]),
            task(3, width=ref(2), height=1, deps=[2]),
        ]
    )
    assert [t.id for t, _ in s.out.dispatch] == [1] and s.state.blocked == [2, 3]
    s = Scheduler(s.state, None)
    s.settle(1, TaskOutcome(output=5.0))
    assert [(t.id, kwargs) for t, kwargs in s.out.dispatch] == [(2, {"width": 5.0, "height": 2})]
    s = Scheduler(s.state, None)
    s.settle(2, TaskOutcome(output="boom", is_error=True))
    (failed,) = s.out.failed
    assert failed[0].id == 3 and failed[2] is True and "task 2, which failed" in failed[1]


def test_scheduler_respects_max_concurrency_and_copies_on_write():
    start = CompilerState()
    s = Scheduler(start, max_concurrency=2)
    s.admit([task(i, width=i, height=i) for i in (1, 2, 3)])
    assert [t.id for t, _ in s.out.dispatch] == [1, 2] and s.state.queued == [3]
    assert start.tasks == {} and start.running == []  # the committed state is untouched
    s = Scheduler(s.state, max_concurrency=2)
    s.settle(1, TaskOutcome(output=1.0))
    assert [t.id for t, _ in s.out.dispatch] == [3] and s.state.running == [2, 3]

"""Tool binding and the scheduler's pure core."""

from __future__ import annotations

import pytest
from llama_index.core.tools import FunctionTool

from llm_compiler.engine.scheduler import Book, facts_of, fold, with_facts
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import PlanEvent, TaskResult
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


class Run:
    """A run's facts and their fold, driven like the scheduler step drives them."""

    def __init__(self, limit=None):
        self.state, self.book, self.n = CompilerState(run_id="r"), Book(limit), 0

    def take(self, facts):
        if facts is None:
            return None
        self.state = with_facts(self.state, facts, None)
        return self.book.apply(facts.entry, self.state.tasks, self.state.outcomes)

    def admit(self, tasks):
        self.n += 1
        return self.take(
            facts_of(PlanEvent(round=0, tasks=tasks, event_id=f"p{self.n}"), self.state, self.book)
        )

    def settle(self, tid, output, is_error=False, event_id=None):
        ev = TaskResult(round=0, task_id=tid, tool_name="area", output=output, is_error=is_error)
        if event_id:
            ev.event_id = event_id
        return self.take(facts_of(ev, self.state, self.book))


def test_scheduler_dispatches_ready_tasks_and_skips_dependents_of_failures():
    run = Run()
    out = run.admit(
        [
            task(1, width=1, height=2),
            task(2, width=ref(1), height=2, deps=[1]),
            task(3, width=ref(2), height=1, deps=[2]),
        ]
    )
    assert [t.id for t, _ in out.dispatch] == [1] and run.book.blocked == [2, 3]
    out = run.settle(1, 5.0)
    assert [(t.id, kwargs) for t, kwargs in out.dispatch] == [(2, {"width": 5.0, "height": 2})]
    out = run.settle(2, "boom", is_error=True)
    (failed,) = out.failed
    assert failed[0].id == 3 and failed[2] is True and "task 2, which failed" in failed[1]


def test_scheduler_respects_max_concurrency_and_the_facts_are_copied_on_write():
    run = Run(limit=2)
    start = run.state
    out = run.admit([task(i, width=i, height=i) for i in (1, 2, 3)])
    assert [t.id for t, _ in out.dispatch] == [1, 2] and run.book.queued == [3]
    assert start.tasks == {} and start.log == []  # the committed state is untouched
    out = run.settle(1, 1.0)
    assert [t.id for t, _ in out.dispatch] == [3] and list(run.book.running) == [2, 3]


def test_a_duplicate_late_or_unplanned_result_adds_no_fact():
    run = Run(limit=1)
    run.admit([task(1, width=1, height=1), task(2, width=2, height=2)])
    assert run.settle(2, 4.0) is None  # queued behind the limit: not running, not settled
    assert run.settle(9, 1.0) is None  # not in the plan
    out = run.settle(1, 1.0)
    assert [t.id for t, _ in out.dispatch] == [2]
    assert run.settle(1, 99.0) is None  # settled already: the first result stands
    assert run.state.outcomes[1].output == 1.0 and len(run.state.log) == 2


def test_the_bookkeeping_is_the_fold_of_the_log():
    run = Run(limit=2)
    run.admit([task(1, width=1, height=1), task(2, width=ref(1), height=1, deps=[1])])
    run.admit([task(3, width=3, height=3), task(4, width=4, height=4)])
    first = run.settle(1, 1.0)
    assert [t.id for t, _ in first.dispatch] == [2] and run.book.queued == [4]
    again = fold(run.state, 2)
    assert (again.blocked, again.queued, list(again.running)) == (
        run.book.blocked,
        run.book.queued,
        list(run.book.running),
    )
    # The decision of the last entry, made again from the fold before it (a step run
    # again after a crash): the same tasks are dispatched.
    before = fold(run.state, 2, upto=len(run.state.log) - 1)
    redo = before.apply(run.state.log[-1], run.state.tasks, run.state.outcomes)
    assert redo.dispatch == first.dispatch and redo.failed == first.failed

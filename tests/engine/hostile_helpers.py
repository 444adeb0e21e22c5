"""Shared pieces of the hostile-input tests: scripted runs, gates, plan dialects."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llm_compiler import TaskResult
from llm_compiler.dialects.base import PlannerContext
from llm_compiler.dialects.llmcompiler import LLMCompilerDialect
from llm_compiler.plan import PlanTask

FINISH = "Thought: done.\nAction: Finish({})"


def results(events: list[Any]) -> dict[int, TaskResult]:
    """Task results by task id."""
    return {e.task_id: e for e in events if isinstance(e, TaskResult)}


class Gate:
    """An asyncio.Event for proving order without sleeps."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def open(self) -> None:
        self.event.set()

    async def wait(self, timeout: float = 10.0) -> None:
        await asyncio.wait_for(self.event.wait(), timeout)


@dataclass
class FixedPlan:
    """A plan stream that yields given tasks as they are (bypassing any parser)."""

    tasks: list[PlanTask]
    done: bool = False
    text: str = ""
    thoughts: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    join_id: int | None = None

    def feed(self, delta: str) -> list[PlanTask]:
        return []

    def finish(self) -> list[PlanTask]:
        self.done = True
        out, self.tasks = self.tasks, []
        return out


@dataclass(frozen=True)
class TasksDialect(LLMCompilerDialect):
    """The default dialect, but each round's tasks come from `make` (a hostile dialect)."""

    make: Callable[[PlannerContext], list[PlanTask]] = lambda c: []
    name: str = "fixed"

    def plan_parser(self, context: PlannerContext) -> FixedPlan:  # type: ignore[override]
        return FixedPlan(self.make(context))

"""Speculation: while the planner writes a fresh question's first plan, the calls that the
plan cache's template for the question's shape predicts start already.

Only calls of ``pure`` tools the result cache may serve, with literal arguments (no other
task's result), no approval and no concurrency limit or resource key of their own; never
an ``idempotent`` or ``at_most_once`` call. A speculative call runs through the run's
result cache, so a task of the real plan making the same call waits for it and takes its
output (a ``TaskResult`` marked ``cached``, like any call served from the cache); a call
the real plan does not ask for is cancelled when the run ends and its result is dropped
(kept across runs only if its policy has a ``cache_ttl``, like any result). Speculative
calls are not counted against the run's concurrency limit, emit no events and do not pass
through ``before_tool_call``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from llama_index.core.tools import BaseTool

from llm_compiler.engine.dispatch import checked, ready_event
from llm_compiler.engine.policy import RunPolicies
from llm_compiler.events import PlanEvent, TaskReady, TaskResult
from llm_compiler.tools import ToolSet
from llm_compiler.tools.policy import ToolPolicy

Start = Callable[[TaskReady, BaseTool, ToolPolicy], Coroutine[Any, Any, TaskResult]]


def speculable(policy: ToolPolicy) -> bool:
    """Whether a call under `policy` may be started before a plan asks for it."""
    return (
        policy.side_effect == "pure"
        and policy.cacheable
        and not policy.requires_approval
        and policy.max_concurrency is None
        and not policy.limits
        and not policy.resource_keys
    )


def predicted(
    plan: PlanEvent, run_id: str, tools: ToolSet, rules: RunPolicies
) -> list[tuple[TaskReady, BaseTool, ToolPolicy]]:
    """The calls of `plan` that may start now: speculable, of a known tool, with literal
    arguments that fit its schema."""
    out = []
    for task in plan.tasks:
        tool, policy = tools.get(task.tool), rules.of(task.tool)
        if tool is None or task.error is not None or task.deps or not speculable(policy):
            continue
        args, error = checked(tool, dict(task.kwargs))
        if error is None:
            out.append((ready_event(task, run_id, args, 0.0), tool, policy))
    return out


class Speculation:
    """The speculative calls in flight, by run."""

    def __init__(self) -> None:
        self._runs: dict[str, set[asyncio.Task[TaskResult]]] = {}

    def start(
        self, run_id: str, calls: list[tuple[TaskReady, BaseTool, ToolPolicy]], call: Start
    ) -> int:
        """Start `call` for each of `calls`; how many started."""
        running = self._runs.setdefault(run_id, set())
        loop = asyncio.get_running_loop()

        def done(task: asyncio.Task[TaskResult]) -> None:
            running.discard(task)
            if not running and self._runs.get(run_id) is running:
                del self._runs[run_id]  # a run that failed never calls forget()

        for ready, tool, policy in calls:
            task = loop.create_task(call(ready, tool, policy))
            running.add(task)
            task.add_done_callback(done)
        return len(calls)

    def forget(self, run_id: str) -> None:
        """Cancel the run's speculative calls still running (the run has ended)."""
        for task in self._runs.pop(run_id, set()):
            task.cancel()

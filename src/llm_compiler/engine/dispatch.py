"""The events the steps emit, made from the run's facts.

Every event here is a function of the state (and the scheduler's decision), so a step
that runs again after a crash emits the same events: the same ``TaskReady`` for the
same task, the same not-run result (with the same ``event_id``), the same
``ReplanEvent`` from the recorded verdict.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from workflows import Context
from workflows.events import Event

from llm_compiler.engine.planner import publish
from llm_compiler.engine.scheduler import Decision
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import (
    CompiledPlan,
    JoinEvent,
    PlanEvent,
    ReplanEvent,
    TaskReady,
    TaskResult,
    call_key,
)
from llm_compiler.plan import PlanTask
from llm_compiler.tools import validate_arguments


def emit(
    ctx: Context[Any],
    state: CompilerState,
    decision: Decision,
    on_not_run: Callable[[PlanTask, str, bool, Any], None] | None = None,
) -> None:
    """Publish what the scheduler decided: results of tasks that cannot run, and
    ``TaskReady`` for each task to run now (with its arguments validated: a call that
    does not fit the tool's schema is an error observation instead). `on_not_run` is
    told of each task that will not run (task, message, skipped, arguments)."""
    for task, message, skipped in decision.failed:
        if on_not_run is not None:
            on_not_run(task, message, skipped, task.kwargs)
        publish(ctx, not_run(task, state.run_id, message, skipped))
    for task, kwargs in decision.dispatch:
        tool = state.toolset.get(task.tool) if state.toolset is not None else None
        try:
            args = kwargs if tool is None else validate_arguments(tool, kwargs)
        except ValueError as e:
            if on_not_run is not None:
                on_not_run(task, str(e), False, kwargs)
            publish(ctx, not_run(task, state.run_id, str(e), False))
            continue
        ready = TaskReady(
            round=task.round, run_id=state.run_id, task_id=task.id, tool_name=task.tool, args=args
        )
        publish(ctx, ready)


def fan_in(ctx: Context[Any], state: CompilerState, ev: PlanEvent | TaskResult) -> JoinEvent | None:
    """Feed the round's complete plan or a task's first result to ``collect_events``;
    the ``JoinEvent`` once the plan and every task's result are in.

    The count of results expected (tasks admitted so far) only grows, and the complete
    plan keeps the batch open until the planner has finished.
    """
    round = ev.round
    expected: list[type[Event]] = [PlanEvent, *[TaskResult] * state.rounds[round].n_tasks]
    buffer = f"{state.run_id}-round-{round}"
    if ctx.collect_events(ev, expected, buffer_id=buffer) is None:
        return None
    join = JoinEvent(round=round, run_id=state.run_id)
    ctx.write_event_to_stream(join)
    return join


def not_run(task: PlanTask, run_id: str, message: str, skipped: bool) -> TaskResult:
    """The observation of a task that cannot run (invalid, or an input failed); its
    ``event_id`` is the same however often the decision is made."""
    now = time.time()
    return TaskResult(
        event_id=f"{call_key(run_id, task.round, task.id)}:not-run",
        round=task.round,
        run_id=run_id,
        task_id=task.id,
        tool_name=task.tool,
        output=message,
        is_error=True,
        skipped=skipped,
        started_at=now,
        finished_at=now,
    )


def replan_event(state: CompilerState, round: int) -> ReplanEvent:
    """The event that starts the round after `round`, from the recorded verdict."""
    record = state.rounds[round]
    return ReplanEvent(
        round=round + 1,
        reason=record.replan_reason or "",
        thought=record.joiner_thought,
        run_id=state.run_id,
    )


def return_direct(state: CompilerState, round: int) -> int | None:
    """The id of a task of `round` whose tool is ``return_direct`` and succeeded."""
    assert state.toolset is not None
    for task in state.round_tasks(round):
        tool = state.toolset.get(task.tool)
        outcome = state.outcomes.get(task.id)
        if tool and tool.metadata.return_direct and outcome and not outcome.is_error:
            return task.id
    return None


def compiled(plan: PlanEvent) -> CompiledPlan:
    """The compiled-plan view of a round's complete ``PlanEvent``."""
    return CompiledPlan(
        tasks=plan.tasks,
        errors=plan.errors,
        text=plan.text,
        thoughts=plan.thoughts,
        join_id=plan.join_id,
    )

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
from llm_compiler.engine.policy import RunPolicies, call_keys
from llm_compiler.engine.scheduler import Decision
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import (
    CompiledPlan,
    JoinEvent,
    PlanEvent,
    ReplanEvent,
    TaskApprovalRequest,
    TaskReady,
    TaskResult,
    TaskWaiting,
    idempotency_key,
)
from llm_compiler.plan import PlanTask
from llm_compiler.tools import jsonable, validate_arguments


def emit(
    ctx: Context[Any],
    state: CompilerState,
    decision: Decision,
    on_not_run: Callable[[PlanTask, str, bool, Any], None] | None = None,
    rules: RunPolicies | None = None,
) -> None:
    """Publish what the scheduler decided: results of tasks that cannot run, and
    ``TaskReady`` for each task to run now (with its arguments validated: a call that
    does not fit the tool's schema is an error observation instead). `on_not_run` is
    told of each task that will not run (task, message, skipped, arguments). Held tasks
    (a ``TaskApprovalRequest``) and waits for a slot (``TaskWaiting``) go to the stream."""
    rules = rules or RunPolicies()
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
        policy = rules.of(task.tool)
        ready = TaskReady(
            round=task.round,
            run_id=state.run_id,
            task_id=task.id,
            tool_name=task.tool,
            args=args,
            policy=policy.shown(),
            resource_keys=list(call_keys(policy, task.tool, args)),
            waited=decision.waited.get(task.id, 0.0),
        )
        publish(ctx, ready)
    for task, args in decision.held:
        shown = rules.of(task.tool).shown()
        ctx.write_event_to_stream(held_request(task, state.run_id, args, shown))
    for task, slot in decision.waiting:
        waiting = TaskWaiting(
            round=task.round, run_id=state.run_id, task_id=task.id, tool_name=task.tool, slot=slot
        )
        ctx.write_event_to_stream(waiting)


def held_request(
    task: PlanTask, run_id: str, args: dict[str, Any], policy: dict[str, Any]
) -> TaskApprovalRequest:
    """The request for a verdict on held `task` (the same however often it is made)."""
    return TaskApprovalRequest(
        round=task.round,
        run_id=run_id,
        task_id=task.id,
        tool_name=task.tool,
        args=jsonable(args),
        policy=policy,
    )


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
        event_id=f"{idempotency_key(run_id, task.round, task.id)}:not-run",
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


def compiled(plan: PlanEvent, rules: RunPolicies | None = None) -> CompiledPlan:
    """The compiled-plan view of a round's complete ``PlanEvent``, with the policy of
    each tool it calls."""
    rules = rules or RunPolicies()
    return CompiledPlan(
        tasks=plan.tasks,
        policies={t.tool: rules.of(t.tool).shown() for t in plan.tasks if t.error is None},
        errors=plan.errors,
        text=plan.text,
        thoughts=plan.thoughts,
        join_id=plan.join_id,
    )

"""The events the steps emit, made from the run's facts.

Every event here is a function of the state (and the scheduler's decision), so a step
that runs again after a crash emits the same events: the same ``TaskReady`` for the
same task, the same not-run result (with the same ``event_id``), the same
``ReplanEvent`` from the recorded verdict.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.tools import BaseTool
from workflows import Context

from llm_compiler.engine.planner import publish
from llm_compiler.engine.policy import RunPolicies, call_keys
from llm_compiler.engine.scheduler import Decision, task_arguments
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import (
    CompiledPlan,
    JoinEvent,
    PlanApprovalRequest,
    PlanApprovalResponse,
    PlanEvent,
    ReplanEvent,
    TaskApprovalRequest,
    TaskReady,
    TaskResult,
    TaskWaiting,
    call_key,
)
from llm_compiler.plan import PlanTask
from llm_compiler.tools import ToolSet, jsonable, validate_arguments
from llm_compiler.tools.policy import ToolPolicy
from llm_compiler.tracing.metrics import record_held

#: Runs whose prepared calls one workflow instance keeps (the rest prepare them again).
CALLS_KEPT = 1024


class Calls:
    """Each dispatched call's validated arguments, until the executor takes them.

    A memo, never the truth: a call is prepared once, at dispatch, and the executor
    takes its arguments from here (never from the ``TaskReady``, which anyone may send).
    A call this process did not prepare (a run resumed elsewhere) is prepared again from
    the facts by :func:`prepare`.
    """

    def __init__(self, kept: int = CALLS_KEPT) -> None:
        self.kept = kept
        self._runs: OrderedDict[str, dict[int, dict[str, Any]]] = OrderedDict()

    def put(self, run_id: str, task_id: int, args: dict[str, Any]) -> None:
        """Record the arguments `task_id` of `run_id` is dispatched with."""
        self._runs.setdefault(run_id, {})[task_id] = args
        self._runs.move_to_end(run_id)
        while len(self._runs) > self.kept:
            self._runs.popitem(last=False)

    def take(self, run_id: str, task_id: int) -> dict[str, Any] | None:
        """The recorded arguments (once), or None."""
        return self._runs.get(run_id, {}).pop(task_id, None)

    def forget(self, run_id: str) -> None:
        """Drop a finished run's calls (a cancelled run's go with the oldest)."""
        self._runs.pop(run_id, None)


def checked(tool: BaseTool | None, kwargs: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """`kwargs` validated against `tool`'s schema, or the message saying why they do not
    fit (whatever the validation raised: an error observation, never a failed run)."""
    if tool is None:
        return kwargs, None  # the executor reports the missing tool
    try:
        return validate_arguments(tool, kwargs), None
    except Exception as e:  # noqa: BLE001 - a bad call is data
        message = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
        return kwargs, message


def prepare(
    state: CompilerState, task: PlanTask, tool: BaseTool | None
) -> tuple[dict[str, Any], str | None]:
    """The call of a dispatched `task` prepared from the facts: its arguments resolved
    from its inputs' outputs (and a verdict's edits, if it was held) and validated (for a
    call :class:`Calls` does not hold)."""
    return checked(tool, task_arguments(state, task))


def emit(
    ctx: Context[Any],
    state: CompilerState,
    tools: ToolSet | None,
    decision: Decision,
    calls: Calls | None = None,
    on_not_run: Callable[[PlanTask, str, bool, Any], None] | None = None,
    rules: RunPolicies | None = None,
) -> None:
    """Publish what the scheduler decided: results of tasks that cannot run, and
    ``TaskReady`` for each task to run now (its arguments validated and recorded in
    `calls`: a call that does not fit the tool's schema is an error observation instead).
    `on_not_run` is told of each task that will not run (task, message, skipped, arguments).
    Held tasks (a ``TaskApprovalRequest``) and waits for a slot (``TaskWaiting``) go to the
    stream."""
    rules = rules or RunPolicies()
    for task, message, skipped in decision.failed:
        if on_not_run is not None:
            on_not_run(task, message, skipped, task.kwargs)
        publish(ctx, not_run(task, state.run_id, message, skipped))
    for task, kwargs in decision.dispatch:
        tool = tools.get(task.tool) if tools is not None else None
        args, error = checked(tool, kwargs)
        if error is not None:
            if on_not_run is not None:
                on_not_run(task, error, False, kwargs)
            publish(ctx, not_run(task, state.run_id, error, False))
            continue
        if calls is not None:
            calls.put(state.run_id, task.id, args)
        waited = decision.waited.get(task.id, 0.0)
        publish(ctx, ready_event(task, state.run_id, args, waited, rules.of(task.tool), kwargs))
    for task, args in decision.held:
        record_held(state.run_id, task.id, task.tool)
        shown = rules.of(task.tool).shown()
        ctx.write_event_to_stream(held_request(task, state.run_id, args, shown))
    for task, slot in decision.waiting:
        waiting = TaskWaiting(
            round=task.round, run_id=state.run_id, task_id=task.id, tool_name=task.tool, slot=slot
        )
        ctx.write_event_to_stream(waiting)


def ready_event(
    task: PlanTask,
    run_id: str,
    args: dict[str, Any],
    waited: float,
    policy: ToolPolicy | None = None,
    resolved: Mapping[str, Any] | None = None,
) -> TaskReady:
    """The ``TaskReady`` of `task`'s call with `args`; with `policy`, it shows the policy and
    the resource keys the call holds (read from its `resolved` arguments, else `args`)."""
    shown: dict[str, Any] = {}
    if policy is not None:
        keys = call_keys(policy, task.tool, args if resolved is None else resolved)
        shown = {"policy": policy.shown(), "resource_keys": list(keys)}
    return TaskReady(
        round=task.round,
        run_id=run_id,
        task_id=task.id,
        tool_name=task.tool,
        args=args,
        waited=waited,
        **shown,
    )


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
    """The ``JoinEvent`` once the round's plan is complete and every task of it settled.

    A fold of the facts, not a buffer of events: the scheduler calls it for an event
    that added facts, and only the one that completed the round finds it complete for
    the first time (later events of the round add nothing and are not passed here). A
    run rebuilt from its facts after a crash therefore joins exactly when it would have.
    """
    round = ev.round
    if round >= len(state.rounds) or not state.rounds[round].complete:
        return None
    if any(t.id not in state.outcomes for t in state.round_tasks(round)):
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


def return_direct(state: CompilerState, tools: ToolSet, round: int) -> int | None:
    """The id of a task of `round` whose tool is ``return_direct`` and succeeded."""
    for task in state.round_tasks(round):
        tool = tools.get(task.tool)
        outcome = state.outcomes.get(task.id)
        if tool and tool.metadata.return_direct and outcome and not outcome.is_error:
            return task.id
    return None


def approval_request(plan: PlanEvent, rules: RunPolicies | None = None) -> PlanApprovalRequest:
    """The request for a verdict on a round's complete plan."""
    shown = compiled(plan, rules)
    return PlanApprovalRequest(round=plan.round, run_id=plan.run_id, plan=shown)


def verdict_of(ev: PlanApprovalResponse) -> PlanApprovalResponse:
    """The verdict `ev` gives, as recorded (its fields only)."""
    return PlanApprovalResponse(
        run_id=ev.run_id, round=ev.round, action=ev.action, plan_text=ev.plan_text, reason=ev.reason
    )


def compiled(plan: PlanEvent, rules: RunPolicies | None = None) -> CompiledPlan:
    """The compiled-plan view of a round's complete ``PlanEvent``, with the policy of
    each tool it calls."""
    rules = rules or RunPolicies()
    return CompiledPlan(
        tasks=plan.tasks,
        policies={t.tool: rules.of(t.tool).shown() for t in plan.tasks if t.error is None},
        errors=plan.errors,
        error_kinds=plan.error_kinds,
        text=plan.text,
        thoughts=plan.thoughts,
        join_id=plan.join_id,
        llm_call=plan.llm_call,
    )

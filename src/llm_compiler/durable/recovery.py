"""What a run rebuilt from its facts must be sent to go on where it stopped.

The state says where the run is (:mod:`llm_compiler.engine.state`); the events below put
each step back to work on the facts, never redoing one that was recorded:

- an answer is recorded: the joiner step, which returns it (nothing is called);
- the current round's plan is not complete: the planner step (the call a crash cut is
  asked again; the tasks it had admitted keep their ids and results), or, for a plan
  that waits for a verdict, the request for it; a recorded verdict is acted on;
- tasks dispatched without a result: each is dispatched again (``pure``, ``idempotent``:
  at-least-once), or, for a call whose start was committed (``at_most_once``), a
  ``TaskCut``: the executor records the workflow's "outcome unknown" observation and calls
  nothing; a task decided not to run gets its error result again;
- the plan complete and every task settled: the joiner step.
"""

from __future__ import annotations

from collections.abc import Collection

from workflows.events import Event

from llm_compiler.engine.dispatch import not_run, replan_event
from llm_compiler.engine.policy import RunPolicies
from llm_compiler.engine.scheduler import Book
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import (
    CompilerStartEvent,
    JoinEvent,
    TaskCut,
    TaskReady,
)
from llm_compiler.plan import PlanTask


def resume_events(
    state: CompilerState,
    limit: int | None,
    cut: Collection[tuple[int, ...]] = (),
    rules: RunPolicies | None = None,
) -> list[Event]:
    """The events that carry `state`'s run on (`limit`: the workflow's tool concurrency;
    `cut`: the (round, task) of calls recorded as started that a crash cut; `rules`: the
    run's tool policies)."""
    run_id, round = state.run_id, state.round
    if state.answer is not None:
        return [JoinEvent(round=round, run_id=run_id)]
    planned = round < len(state.rounds) and state.rounds[round].complete
    out = [] if planned else [_plan_again(state)]
    out += outstanding(state, limit, cut, rules)
    if planned and all(t.id in state.outcomes for t in state.round_tasks(round)):
        out.append(JoinEvent(round=round, run_id=run_id))
    return out


def _plan_again(state: CompilerState) -> Event:
    """The planner step's event for the current round, or the recorded verdict on a plan
    that waited for one (the planner step asks again for a verdict not yet given)."""
    held, verdict = state.held, state.verdict
    if held is not None and held.round == state.round and verdict is not None:
        return verdict.model_copy()
    if state.round == 0:
        return CompilerStartEvent(
            user_msg=state.question, mode=state.mode, compiler_run_id=state.run_id
        )
    return replan_event(state, state.round - 1)


def outstanding(
    state: CompilerState,
    limit: int | None,
    cut: Collection[tuple[int, ...]] = (),
    rules: RunPolicies | None = None,
) -> list[Event]:
    """``TaskReady`` for each task dispatched and not settled (``TaskCut`` for an
    at-most-once call a crash cut, in `cut`); the error result again for each task decided
    not to run and not settled (the fold of the scheduler's journal)."""
    book = Book(limit, rules)
    failed: dict[int, tuple[PlanTask, str, bool]] = {}
    for entry in state.log:
        decision = book.apply(entry, state.tasks, state.outcomes)
        failed.update(
            {task.id: (task, message, skipped) for task, message, skipped in decision.failed}
        )
    out: list[Event] = []
    for tid in book.running:
        task = state.tasks[tid]
        if (task.round, tid) in cut:  # its start was committed: never called again
            out.append(
                TaskCut(round=task.round, run_id=state.run_id, task_id=tid, tool_name=task.tool)
            )
            continue
        out.append(
            TaskReady(round=task.round, run_id=state.run_id, task_id=tid, tool_name=task.tool)
        )
    for tid in sorted(book.failing):
        task, message, skipped = failed[tid]
        out.append(not_run(task, state.run_id, message, skipped))
    return out

"""The scheduler's pure core: admit tasks, settle results, decide what runs next.

The scheduler step is the only writer of the DAG bookkeeping. Each call takes the
committed state, copies the few containers it changes (shallow, so a step costs
microseconds even with hundreds of tasks) and returns the new state plus what to emit.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from llm_compiler.engine.state import CompilerState, RoundState, TaskOutcome
from llm_compiler.events import PlanEvent
from llm_compiler.plan import PlanTask, iter_refs, resolve_kwargs


@dataclass
class Decision:
    """What the scheduler step must emit after one event."""

    dispatch: list[tuple[PlanTask, dict[str, Any]]] = field(default_factory=list)
    """Tasks to run now, with resolved arguments."""
    failed: list[tuple[PlanTask, str, bool]] = field(default_factory=list)
    """Tasks that cannot run: (task, message, skipped)."""


class Scheduler:
    """Copy-on-write view of the state for one scheduler step."""

    def __init__(self, state: CompilerState, max_concurrency: int | None) -> None:
        self.state = state.model_copy()
        s = self.state
        s.tasks, s.outcomes = dict(s.tasks), dict(s.outcomes)
        s.blocked, s.queued, s.running = list(s.blocked), list(s.queued), list(s.running)
        self.limit = max_concurrency
        self.out = Decision()

    def round_record(self, round: int) -> RoundState:
        """The (copied) record of `round`, created if missing."""
        s = self.state
        s.rounds = list(s.rounds)
        while len(s.rounds) <= round:
            s.rounds.append(RoundState())
        s.rounds[round] = s.rounds[round].model_copy()
        return s.rounds[round]

    def admit(self, tasks: list[PlanTask]) -> None:
        """Add newly parsed tasks to the DAG; run those whose inputs are done."""
        s = self.state
        for task in tasks:
            if task.id in s.tasks:
                continue  # the complete PlanEvent repeats streamed tasks
            s.tasks[task.id] = task
            record = self.round_record(task.round)
            record.n_tasks += 1
            error = task.error or self._bad_deps(task)
            if error is not None:
                self.out.failed.append((task, error, False))
            elif all(d in s.outcomes for d in task.deps):
                self._ready(task)
            else:
                s.blocked.append(task.id)

    def _bad_deps(self, task: PlanTask) -> str | None:
        """Why `task` could wait forever, if it could (defence in depth: the parser only
        makes references to earlier tasks of this run, and admits tasks in order)."""
        s = self.state
        refs = set(iter_refs(task.args)) | set(iter_refs(list(task.kwargs.values())))
        unknown = sorted(d for d in set(task.deps) | refs if d == task.id or d not in s.tasks)
        if unknown:
            which = ", ".join(str(d) for d in unknown)
            return f"Task {task.id} needs task {which}, which is not an earlier task of this run."
        if not refs <= set(task.deps):
            return f"Task {task.id} uses results it does not list as inputs."
        return None

    def complete_round(self, ev: PlanEvent) -> None:
        """Record the whole plan of a round (its text, thoughts, errors, join, usage)."""
        record = self.round_record(ev.round)
        record.text, record.thoughts = ev.text, ev.thoughts
        record.errors, record.join_id = ev.errors, ev.join_id
        record.complete = True
        self.state.prompt_tokens += ev.prompt_tokens
        self.state.completion_tokens += ev.completion_tokens
        if ev.llm_call is not None:
            self.state.llm_calls = [*self.state.llm_calls, ev.llm_call]

    def settle(self, task_id: int, outcome: TaskOutcome) -> None:
        """Record a result; unblock dependents; fill free concurrency slots."""
        s = self.state
        s.outcomes[task_id] = outcome
        if task_id in s.running:
            s.running.remove(task_id)
        if s.blocked:
            still: list[int] = []
            for tid in s.blocked:
                task = s.tasks[tid]
                if all(d in s.outcomes for d in task.deps):
                    self._ready(task)
                else:
                    still.append(tid)
            s.blocked = still
        while s.queued and (self.limit is None or len(s.running) < self.limit):
            self._dispatch(s.tasks[s.queued.pop(0)])

    def _ready(self, task: PlanTask) -> None:
        s = self.state
        failed = [d for d in task.deps if s.outcomes[d].is_error]
        if failed:
            which = ", ".join(str(d) for d in failed)
            self.out.failed.append(
                (task, f"Skipped: it needs the result of task {which}, which failed.", True)
            )
        elif self.limit is not None and len(s.running) >= self.limit:
            s.queued.append(task.id)
        else:
            self._dispatch(task)

    def _dispatch(self, task: PlanTask) -> None:
        s = self.state
        s.running.append(task.id)
        results = {d: s.outcomes[d].output for d in task.deps}
        self.out.dispatch.append((task, resolve_kwargs(task.kwargs, results)))

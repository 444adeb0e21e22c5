"""The scheduler's pure core: the DAG bookkeeping as a function of the journaled facts.

The facts are the tasks (admitted once, by id), their outcomes (settled once, by id) and
``CompilerState.log``, the order in which the scheduler took the events that added them.
The bookkeeping (blocked, queued, running) is not stored: a :class:`Book` is the fold of
the log, and a step's decision (what to dispatch, what cannot run) is the fold's output
for that step's log entry. So a scheduler step that runs again after a crash, its facts
already written, recomputes the very decision it made the first time; and a fact that
arrives twice adds nothing, so it decides nothing.

A ``Book`` is memoized per run in the process (:class:`Books`): a step costs
microseconds even with hundreds of tasks, and a resumed run folds its log once.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_compiler.engine.state import CompilerState, RoundState, SchedStep
from llm_compiler.events import PlanEvent, TaskResult
from llm_compiler.plan import PlanTask, iter_refs, resolve_kwargs

#: Runs whose bookkeeping one workflow instance keeps folded (the rest fold again).
BOOKS_KEPT = 1024


@dataclass
class Decision:
    """What the scheduler step must emit after one event."""

    dispatch: list[tuple[PlanTask, dict[str, Any]]] = field(default_factory=list)
    """Tasks to run now, with resolved arguments."""
    failed: list[tuple[PlanTask, str, bool]] = field(default_factory=list)
    """Tasks that cannot run: (task, message, skipped)."""


@dataclass
class Book:
    """The bookkeeping after the first ``n`` entries of a run's log."""

    limit: int | None
    n: int = 0
    last: str | None = None
    events: dict[str, int] = field(default_factory=dict)
    """Event id -> its position in the log."""
    admitted: set[int] = field(default_factory=set)
    settled: set[int] = field(default_factory=set)
    blocked: list[int] = field(default_factory=list)
    queued: list[int] = field(default_factory=list)
    running: dict[int, None] = field(default_factory=dict)
    """Dispatched, not yet settled (an ordered set)."""
    failing: set[int] = field(default_factory=set)
    """Decided not to run; their error result is not settled yet."""

    def matches(self, log: list[SchedStep]) -> bool:
        """Whether this is the fold of exactly `log`."""
        return self.n == len(log) and (self.n == 0 or log[-1].event_id == self.last)

    def apply(
        self,
        entry: SchedStep,
        tasks: Mapping[int, PlanTask],
        outcomes: Mapping[int, TaskResult],
    ) -> Decision:
        """Fold one log entry in; return the decision it makes."""
        out = Decision()
        for tid in entry.admit:
            self._admit(tasks[tid], outcomes, out)
        if entry.settle is not None:
            self._settle(entry.settle, tasks, outcomes, out)
        self.events[entry.event_id] = self.n
        self.n += 1
        self.last = entry.event_id
        return out

    def _admit(self, task: PlanTask, outcomes: Mapping[int, TaskResult], out: Decision) -> None:
        self.admitted.add(task.id)
        error = task.error or self._bad_deps(task)
        if error is not None:
            self.failing.add(task.id)
            out.failed.append((task, error, False))
        elif all(d in self.settled for d in task.deps):
            self._ready(task, outcomes, out)
        else:
            self.blocked.append(task.id)

    def _bad_deps(self, task: PlanTask) -> str | None:
        """Why `task` could wait forever, if it could (defence in depth: the parser only
        makes references to earlier tasks of this run, and admits tasks in order)."""
        refs = set(iter_refs(task.args)) | set(iter_refs(list(task.kwargs.values())))
        deps = set(task.deps) | refs
        unknown = sorted(d for d in deps if d == task.id or d not in self.admitted)
        if unknown:
            which = ", ".join(str(d) for d in unknown)
            return f"Task {task.id} needs task {which}, which is not an earlier task of this run."
        if not refs <= set(task.deps):
            return f"Task {task.id} uses results it does not list as inputs."
        return None

    def _settle(
        self,
        task_id: int,
        tasks: Mapping[int, PlanTask],
        outcomes: Mapping[int, TaskResult],
        out: Decision,
    ) -> None:
        self.settled.add(task_id)
        self.running.pop(task_id, None)
        self.failing.discard(task_id)
        if self.blocked:
            still: list[int] = []
            for tid in self.blocked:
                task = tasks[tid]
                if all(d in self.settled for d in task.deps):
                    self._ready(task, outcomes, out)
                else:
                    still.append(tid)
            self.blocked = still
        while self.queued and (self.limit is None or len(self.running) < self.limit):
            self._dispatch(tasks[self.queued.pop(0)], outcomes, out)

    def _ready(self, task: PlanTask, outcomes: Mapping[int, TaskResult], out: Decision) -> None:
        failed = [d for d in task.deps if outcomes[d].is_error]
        if failed:
            which = ", ".join(str(d) for d in failed)
            self.failing.add(task.id)
            message = f"Skipped: it needs the result of task {which}, which failed."
            out.failed.append((task, message, True))
        elif self.limit is not None and len(self.running) >= self.limit:
            self.queued.append(task.id)
        else:
            self._dispatch(task, outcomes, out)

    def _dispatch(self, task: PlanTask, outcomes: Mapping[int, TaskResult], out: Decision) -> None:
        self.running[task.id] = None
        results = {d: outcomes[d].output for d in task.deps}
        out.dispatch.append((task, resolve_kwargs(task.kwargs, results)))


def fold(state: CompilerState, limit: int | None, upto: int | None = None) -> Book:
    """The bookkeeping after the first `upto` entries of `state.log` (all by default)."""
    book = Book(limit)
    for entry in state.log[:upto]:
        book.apply(entry, state.tasks, state.outcomes)
    return book


class Books:
    """The folded bookkeeping of recent runs, by run id (a memo, never the truth)."""

    def __init__(self, limit: int | None, kept: int = BOOKS_KEPT) -> None:
        self.limit, self.kept = limit, kept
        self._books: OrderedDict[str, Book] = OrderedDict()

    def get(self, state: CompilerState) -> Book:
        """The fold of `state.log`: the memo if it matches, else folded again."""
        book = self._books.get(state.run_id)
        if book is None or not book.matches(state.log):
            book = fold(state, self.limit)
            self._books[state.run_id] = book
            while len(self._books) > self.kept:
                self._books.popitem(last=False)
        self._books.move_to_end(state.run_id)
        return book

    def peek(self, state: CompilerState) -> Book | None:
        """The memo of `state`'s run if it matches `state.log` (nothing is folded)."""
        book = self._books.get(state.run_id)
        return book if book is not None and book.matches(state.log) else None

    def forget(self, run_id: str) -> None:
        """Drop a finished run's memo."""
        self._books.pop(run_id, None)


def runnable(state: CompilerState, task_id: int) -> bool:
    """Whether `task_id` may run now by the facts alone: planned without error, not
    settled, every input settled without error. (The fold also knows which of those a
    concurrency limit holds back; this check needs no fold.)"""
    task = state.tasks.get(task_id)
    if task is None or task.error is not None or task_id in state.outcomes:
        return False
    deps = [state.outcomes.get(d) for d in task.deps]
    return all(o is not None and not o.is_error for o in deps)


@dataclass
class Facts:
    """What one event adds to the run: its log entry and the facts it names."""

    entry: SchedStep
    tasks: list[PlanTask] = field(default_factory=list)
    outcome: TaskResult | None = None


def facts_of(ev: PlanEvent | TaskResult, state: CompilerState, book: Book) -> Facts | None:
    """The facts `ev` adds, or None if it adds none (it is ignored).

    A plan's tasks count for the current round only, each id once (the complete
    ``PlanEvent`` repeats the streamed tasks; a plan streamed again after a crash repeats
    the ones admitted before it). A result counts only for a task of the plan that is
    running or was decided not to run, and only the first time: a duplicate, late or
    forged ``TaskResult`` changes nothing.
    """
    entry = SchedStep(event_id=ev.event_id)
    if isinstance(ev, PlanEvent):
        if ev.round != state.round:
            return None
        new: dict[int, PlanTask] = {}
        for task in ev.tasks:
            if task.round == ev.round and task.id not in state.tasks and task.id not in new:
                new[task.id] = task
        record = state.rounds[ev.round] if ev.round < len(state.rounds) else None
        entry.complete = ev.complete and not (record is not None and record.complete)
        if not new and not entry.complete:
            return None
        entry.admit = list(new)
        return Facts(entry, list(new.values()))
    tid = ev.task_id
    planned = state.tasks.get(tid)
    if planned is None or planned.round != ev.round or tid in state.outcomes:
        return None
    if tid not in book.running and tid not in book.failing:
        return None
    entry.settle = tid
    return Facts(entry, outcome=ev)


def with_facts(state: CompilerState, facts: Facts, plan: PlanEvent | None) -> CompilerState:
    """A copy of `state` with `facts` added (`plan`: the complete plan they come from)."""
    update: dict[str, Any] = {"log": [*state.log, facts.entry]}
    if facts.tasks:
        update["tasks"] = {**state.tasks, **{t.id: t for t in facts.tasks}}
    if facts.outcome is not None and facts.entry.settle is not None:
        update["outcomes"] = {**state.outcomes, facts.entry.settle: facts.outcome}
    rounds = list(state.rounds)
    touched = {t.round for t in facts.tasks} | ({plan.round} if plan is not None else set())
    for round in sorted(touched):
        while len(rounds) <= round:
            rounds.append(RoundState())
        record = rounds[round].model_copy()
        record.n_tasks += sum(1 for t in facts.tasks if t.round == round)
        if plan is not None and plan.round == round:
            record.text, record.thoughts = plan.text, plan.thoughts
            record.errors, record.join_id = plan.errors, plan.join_id
            record.complete = True
            if plan.llm_call is not None:
                update["llm_calls"] = [*state.llm_calls, plan.llm_call]
        rounds[round] = record
    update["rounds"] = rounds
    return state.model_copy(update=update)

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

import json
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from llm_compiler.engine.policy import RunPolicies, Slot, remaining_paths
from llm_compiler.engine.state import (
    CompilerState,
    RoundState,
    SchedStep,
    TaskVerdict,
)
from llm_compiler.events import PlanEvent, TaskApprovalResponse, TaskResult
from llm_compiler.plan import PlanTask, iter_refs, resolve_kwargs
from llm_compiler.tools.results import REJECTED_CALL

#: Runs whose bookkeeping one workflow instance keeps folded (the rest fold again).
BOOKS_KEPT = 1024


@dataclass
class Decision:
    """What the scheduler step must emit after one event."""

    dispatch: list[tuple[PlanTask, dict[str, Any]]] = field(default_factory=list)
    """Tasks to run now, with resolved arguments."""
    failed: list[tuple[PlanTask, str, bool]] = field(default_factory=list)
    """Tasks that cannot run: (task, message, skipped)."""
    held: list[tuple[PlanTask, dict[str, Any]]] = field(default_factory=list)
    """Ready tasks whose tool requires approval, now waiting for a verdict."""
    waiting: list[tuple[PlanTask, str]] = field(default_factory=list)
    """Ready tasks that must wait for a slot: (task, the slot that binds)."""
    waited: dict[int, float] = field(default_factory=dict)
    """Seconds each task dispatched now waited for a slot once ready."""


@dataclass
class Book:
    """The bookkeeping after the first ``n`` entries of a run's log.

    A ready task is queued; after each entry the queue is filled into free slots (see
    :class:`~llm_compiler.engine.policy.RunPolicies`), the task with the longest chain
    behind it first (or in plan order), skipping those whose slots are taken.
    """

    limit: int | None
    rules: RunPolicies | None = None
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
    held: dict[int, str] = field(default_factory=dict)
    """Ready, waiting for a human's verdict (their tool requires approval): each
    task's call as text (its tool and arguments)."""
    rejected: set[str] = field(default_factory=set)
    """Calls a human rejected: the same call later in the run is not asked again."""
    edits: dict[int, dict[str, Any]] = field(default_factory=dict)
    """Arguments a verdict replaced, by task (approved tasks have an entry, maybe empty)."""
    using: dict[str, int] = field(default_factory=dict)
    """Slot name -> calls holding it."""
    holding: dict[int, tuple[str, ...]] = field(default_factory=dict)
    ready_at: dict[int, float] = field(default_factory=dict)
    told: set[int] = field(default_factory=set)
    """Queued tasks whose wait was reported."""
    _now: float = 0.0
    _ranks: dict[int, int] | None = None

    def __post_init__(self) -> None:
        if self.rules is None:
            self.rules = RunPolicies(self.limit)

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
        self._now = entry.at
        for tid in entry.admit:
            self._admit(tasks[tid], outcomes, out)
        if entry.admit:
            self._ranks = None
        if entry.verdict is not None:
            self._verdict(entry.verdict, tasks, out)
        if entry.settle is not None:
            self._settle(entry.settle, tasks, outcomes, out)
        self._fill(tasks, outcomes, out)
        self.events[entry.event_id] = self.n
        self.n += 1
        self.last = entry.event_id
        return out

    def only_held(self) -> list[int]:
        """The held tasks, if nothing else is running, queued or about to fail."""
        if self.running or self.queued or self.failing:
            return []
        return list(self.held)

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
        for slot in self.holding.pop(task_id, ()):
            self.using[slot] -= 1
        if self.blocked:
            still: list[int] = []
            for tid in self.blocked:
                task = tasks[tid]
                if all(d in self.settled for d in task.deps):
                    self._ready(task, outcomes, out)
                else:
                    still.append(tid)
            self.blocked = still

    def _ready(self, task: PlanTask, outcomes: Mapping[int, TaskResult], out: Decision) -> None:
        failed = [d for d in task.deps if outcomes[d].is_error]
        assert self.rules is not None
        if failed:
            which = ", ".join(str(d) for d in failed)
            self.failing.add(task.id)
            message = f"Skipped: it needs the result of task {which}, which failed."
            out.failed.append((task, message, True))
        elif self.rules.of(task.tool).requires_approval:
            args = self.arguments(task, outcomes)
            call = f"{task.tool} {json.dumps(args, sort_keys=True, default=repr)}"
            if call in self.rejected:
                self.failing.add(task.id)
                message = f"Error: {REJECTED_CALL} before; the same call is not asked again."
                out.failed.append((task, message, False))
                return
            self.held[task.id] = call
            out.held.append((task, args))
        else:
            self._queue(task.id)

    def _queue(self, task_id: int) -> None:
        self.queued.append(task_id)
        self.ready_at[task_id] = self._now

    def _verdict(self, verdict: TaskVerdict, tasks: Mapping[int, PlanTask], out: Decision) -> None:
        tid = verdict.task_id
        if tid not in self.held:
            return  # not held (facts_of lets no such verdict in)
        call = self.held.pop(tid)
        if verdict.action == "reject":
            self.rejected.add(call)
            self.failing.add(tid)
            why = f": {verdict.reason}" if verdict.reason else "."
            out.failed.append((tasks[tid], f"Error: {REJECTED_CALL}{why}", False))
            return
        self.edits[tid] = dict(verdict.args or {}) if verdict.action == "edit" else {}
        self._queue(tid)

    def arguments(self, task: PlanTask, outcomes: Mapping[int, TaskResult]) -> dict[str, Any]:
        """`task`'s arguments: its inputs' results put in, and a verdict's edits."""
        results = {d: outcomes[d].output for d in task.deps}
        return {**resolve_kwargs(task.kwargs, results), **self.edits.get(task.id, {})}

    def _fill(
        self, tasks: Mapping[int, PlanTask], outcomes: Mapping[int, TaskResult], out: Decision
    ) -> None:
        """Dispatch queued tasks whose slots are free, in priority order."""
        if not self.queued:
            return
        assert self.rules is not None
        cap = self.rules.limit
        if cap is not None and self.using.get("*", 0) >= cap:
            self._tell(self.queued, tasks, "*", out)
            return
        waiting: set[int] = set()
        for tid in self._by_priority(tasks):
            task = tasks[tid]
            kwargs = self.arguments(task, outcomes)
            slots = self.rules.slots(task, kwargs)
            full = next((name for name, n in slots if self.using.get(name, 0) >= n), None)
            if full is None:
                self._dispatch(task, kwargs, slots, out)
            else:
                waiting.add(tid)
                self._tell([tid], tasks, full, out)
        self.queued = [t for t in self.queued if t in waiting]

    def _by_priority(self, tasks: Mapping[int, PlanTask]) -> list[int]:
        assert self.rules is not None
        if self.rules.order == "plan":
            return sorted(self.queued)
        if self._ranks is None:
            # Over the tasks admitted so far: a fold replayed later decides the same.
            self._ranks = remaining_paths({t: tasks[t] for t in self.admitted})
        ranks = self._ranks
        return sorted(self.queued, key=lambda t: (-ranks.get(t, 1), t))

    def _tell(
        self, ids: list[int], tasks: Mapping[int, PlanTask], slot: str, out: Decision
    ) -> None:
        for tid in ids:
            if tid not in self.told:
                self.told.add(tid)
                out.waiting.append((tasks[tid], slot))

    def _dispatch(
        self, task: PlanTask, kwargs: dict[str, Any], slots: tuple[Slot, ...], out: Decision
    ) -> None:
        self.running[task.id] = None
        self.holding[task.id] = tuple(name for name, _ in slots)
        for name, _ in slots:
            self.using[name] = self.using.get(name, 0) + 1
        out.waited[task.id] = max(0.0, self._now - self.ready_at.pop(task.id, self._now))
        out.dispatch.append((task, kwargs))


def fold(
    state: CompilerState,
    limit: int | None,
    upto: int | None = None,
    rules: RunPolicies | None = None,
) -> Book:
    """The bookkeeping after the first `upto` entries of `state.log` (all by default),
    under `rules` (default: only the global `limit`)."""
    book = Book(limit, rules)
    for entry in state.log[:upto]:
        book.apply(entry, state.tasks, state.outcomes)
    return book


class Books:
    """The folded bookkeeping of recent runs, by run id (a memo, never the truth)."""

    def __init__(
        self,
        limit: int | None,
        kept: int = BOOKS_KEPT,
        rules: Callable[[CompilerState], RunPolicies] | None = None,
    ) -> None:
        self.limit, self.kept, self.rules = limit, kept, rules
        self._books: OrderedDict[str, Book] = OrderedDict()

    def get(self, state: CompilerState) -> Book:
        """The fold of `state.log`: the memo if it matches, else folded again."""
        book = self._books.get(state.run_id)
        if book is None or not book.matches(state.log):
            rules = self.rules(state) if self.rules is not None else None
            book = fold(state, self.limit, rules=rules)
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


def runnable(state: CompilerState, task_id: int, needs_approval: bool = False) -> bool:
    """Whether `task_id` may run now by the facts alone: planned without error, not
    settled, every input settled without error, and approved if it `needs_approval`.
    (The fold also knows which of those a limit holds back; this check needs no fold.)"""
    task = state.tasks.get(task_id)
    if task is None or task.error is not None or task_id in state.outcomes:
        return False
    if needs_approval:
        verdict = task_verdict(state, task_id)
        if verdict is None or verdict.action == "reject":
            return False
    deps = [state.outcomes.get(d) for d in task.deps]
    return all(o is not None and not o.is_error for o in deps)


def task_arguments(state: CompilerState, task: PlanTask) -> dict[str, Any]:
    """`task`'s arguments from the facts: its inputs' results put in, and the edits of
    the verdict it got (if it was held)."""
    results = {d: state.outcomes[d].output for d in task.deps}
    verdict = task_verdict(state, task.id)
    edits = (verdict.args or {}) if verdict is not None and verdict.action == "edit" else {}
    return {**resolve_kwargs(task.kwargs, results), **edits}


def task_verdict(state: CompilerState, task_id: int) -> TaskVerdict | None:
    """The verdict recorded on held task `task_id`, if any."""
    for entry in reversed(state.log):
        if entry.verdict is not None and entry.verdict.task_id == task_id:
            return entry.verdict
    return None


@dataclass
class Facts:
    """What one event adds to the run: its log entry and the facts it names."""

    entry: SchedStep
    tasks: list[PlanTask] = field(default_factory=list)
    outcome: TaskResult | None = None


def facts_of(
    ev: PlanEvent | TaskResult | TaskApprovalResponse, state: CompilerState, book: Book
) -> Facts | None:
    """The facts `ev` adds, or None if it adds none (it is ignored).

    A plan's tasks count for the current round only, each id once (the complete
    ``PlanEvent`` repeats the streamed tasks; a plan streamed again after a crash repeats
    the ones admitted before it). A result counts only for a task of the plan that is
    running or was decided not to run, and only the first time: a duplicate, late or
    forged ``TaskResult`` changes nothing. A verdict counts only for a task held for one,
    and only the first.
    """
    entry = SchedStep(event_id=ev.event_id, at=time.time())
    if isinstance(ev, TaskApprovalResponse):
        return _verdict_facts(ev, state, book, entry)
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


def _verdict_facts(
    ev: TaskApprovalResponse, state: CompilerState, book: Book, entry: SchedStep
) -> Facts | None:
    planned = state.tasks.get(ev.task_id)
    if ev.run_id != state.run_id or planned is None or planned.round != ev.round:
        return None
    if ev.task_id not in book.held:
        return None
    entry.verdict = TaskVerdict(
        task_id=ev.task_id, action=ev.action, args=ev.args, reason=ev.reason[:2000]
    )
    return Facts(entry)


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
            record.complete, record.cached_plan = True, plan.cached
            if plan.llm_call is not None:
                update["llm_calls"] = [*state.llm_calls, plan.llm_call]
        rounds[round] = record
    update["rounds"] = rounds
    return state.model_copy(update=update)

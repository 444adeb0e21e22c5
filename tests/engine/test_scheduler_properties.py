"""The scheduler's core on random DAGs, random result orders, duplicate and forged
results, and a crash after any step's write: every task is dispatched or failed exactly
once, never above the concurrency limit, dependents of failures are skipped, the
bookkeeping is always the fold of the journal, and a step made again from the journal
before it (a step run again after a crash) decides exactly what it decided."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from llm_compiler.engine.scheduler import Book, Decision, facts_of, fold, with_facts
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import PlanEvent, TaskResult
from llm_compiler.plan import PlanTask, ref


@st.composite
def dags(draw: st.DrawFn) -> list[PlanTask]:
    n = draw(st.integers(1, 25))
    tasks = []
    for i in range(1, n + 1):
        deps = sorted(draw(st.sets(st.integers(1, i - 1), max_size=3))) if i > 1 else []
        kwargs = {f"x{d}": ref(d) for d in deps}
        tasks.append(PlanTask(id=i, tool="t", kwargs=kwargs, deps=deps))
    return tasks


def decided(decision: Decision) -> list[tuple[str, int]]:
    return [("run", t.id) for t, _ in decision.dispatch] + [
        ("fail", t.id) for t, _, _ in decision.failed
    ]


@given(dags(), st.integers(0, 2**32 - 1), st.sampled_from([None, 1, 2, 3]))
def test_the_scheduler_is_the_fold_of_its_journal(tasks, seed, limit):
    rng = random.Random(seed)
    state, book = CompilerState(run_id="r"), Book(limit)
    decisions: list[list[tuple[str, int]]] = []
    pending: list[TaskResult] = []  # results of dispatched / failed tasks, not yet taken
    chunks, i = [], 0
    while i < len(tasks):  # the plan arrives in random bursts
        k = rng.randint(1, 4)
        chunks.append(tasks[i : i + k])
        i += k
    events: list[PlanEvent | TaskResult] = [
        PlanEvent(round=0, tasks=c, event_id=f"plan{j}") for j, c in enumerate(chunks)
    ]
    events.append(PlanEvent(round=0, tasks=tasks, complete=True, event_id="complete"))
    events.reverse()
    while events or pending:
        ev: PlanEvent | TaskResult
        forged = TaskResult(round=0, task_id=rng.randint(1, 30), tool_name="t", output="f")
        if rng.random() < 0.15 and facts_of(forged, state, book) is not None:
            # A forged result for a running task is indistinguishable from the tool's own:
            # it counts, and the tool's later one is a duplicate. For any other, no fact.
            assert forged.task_id in book.running or forged.task_id in book.failing
            ev = forged
        elif pending and (not events or rng.random() < 0.5):
            ev = pending.pop(rng.randrange(len(pending)))
        else:
            ev = events.pop()
        facts = facts_of(ev, state, book)
        if facts is None:
            continue
        state = with_facts(state, facts, ev if isinstance(ev, PlanEvent) and ev.complete else None)
        decision = book.apply(facts.entry, state.tasks, state.outcomes)
        # A crash right after this write: the step, run again, decides the same.
        again = fold(state, limit, upto=len(state.log) - 1)
        assert decided(again.apply(state.log[-1], state.tasks, state.outcomes)) == decided(decision)
        assert limit is None or len(book.running) <= limit
        decisions.append(decided(decision))
        for kind, tid in decided(decision):
            fails = kind == "fail" or rng.random() < 0.2
            result = TaskResult(round=0, task_id=tid, tool_name="t", output=tid, is_error=fails)
            pending.append(result)
            if rng.random() < 0.2:  # delivered twice
                pending.append(result.model_copy(update={"event_id": f"dup{tid}"}))
    flat = [d for ds in decisions for d in ds]
    assert sorted(tid for _, tid in flat) == [t.id for t in tasks]  # each decided once
    assert set(state.outcomes) == {t.id for t in tasks}  # each settled once
    failed_ids = {tid for tid, outcome in state.outcomes.items() if outcome.is_error}
    for t in tasks:
        if any(d in failed_ids for d in t.deps):
            assert ("fail", t.id) in flat  # a dependent of a failure never runs
    final = fold(state, limit)
    assert (final.blocked, final.queued, list(final.running)) == ([], [], [])
    assert final.settled == {t.id for t in tasks}

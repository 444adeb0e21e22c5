"""The scheduler under tool policies, on random DAGs, random policies, random result
orders and random verdicts on held tasks: no limit is ever exceeded (the global cap, a
tool's own, a shared one), no two tasks sharing a resource key overlap, no ready task
waits while every slot it needs is free, every task settles, and a step made again from
the journal before it decides exactly what it decided."""

from __future__ import annotations

import random
from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from llm_compiler.engine.policy import RunPolicies, remaining_paths
from llm_compiler.engine.scheduler import Book, Decision, facts_of, fold, with_facts
from llm_compiler.engine.state import CompilerState
from llm_compiler.events import PlanEvent, TaskApprovalResponse, TaskResult
from llm_compiler.plan import PlanTask, ref
from llm_compiler.tools.policy import ToolPolicy

TOOLS = ["t0", "t1", "t2", "t3"]
ACCOUNTS = ["a", "b", "c"]


@st.composite
def policies(draw: st.DrawFn) -> RunPolicies:
    found = {}
    for tool in TOOLS:
        found[tool] = ToolPolicy(
            side_effect=draw(st.sampled_from(["pure", "idempotent", "at_most_once"])),
            requires_approval=draw(st.booleans()),
            max_concurrency=draw(st.sampled_from([None, 1, 2])),
            resource_keys=draw(st.sampled_from([(), ("acct:{acct}",), ("acct:{acct}", "all")])),
            limits=draw(st.sampled_from([{}, {"server": 1}, {"server": 2}, {"server": 3}])),
        )
    limit = draw(st.sampled_from([None, 1, 2, 3]))
    order = draw(st.sampled_from(["critical_path", "plan"]))
    return RunPolicies(limit, found, order)


@st.composite
def dags(draw: st.DrawFn) -> list[PlanTask]:
    n = draw(st.integers(1, 20))
    tasks = []
    for i in range(1, n + 1):
        deps = sorted(draw(st.sets(st.integers(1, i - 1), max_size=3))) if i > 1 else []
        kwargs = {f"x{d}": ref(d) for d in deps}
        kwargs["acct"] = draw(st.sampled_from(ACCOUNTS))
        tool = draw(st.sampled_from(TOOLS))
        tasks.append(PlanTask(id=i, tool=tool, kwargs=kwargs, deps=deps))
    return tasks


def decided(decision: Decision) -> list[tuple[str, int]]:
    return (
        [("run", t.id) for t, _ in decision.dispatch]
        + [("fail", t.id) for t, _, _ in decision.failed]
        + [("hold", t.id) for t, _ in decision.held]
        + [("wait", t.id) for t, _ in decision.waiting]
    )


def check_slots(book: Book, state: CompilerState, rules: RunPolicies) -> None:
    """No slot is held beyond its capacity; a queued task always has a full slot."""
    used: Counter[str] = Counter()
    capacity: dict[str, int] = {}
    for tid in book.running:
        task = state.tasks[tid]
        for name, n in rules.slots(task, book.arguments(task, state.outcomes)):
            used[name] += 1
            capacity[name] = n
    assert all(used[name] <= capacity[name] for name in used)
    for tid in book.queued:  # work-conserving: it waits only for a slot that is full
        task = state.tasks[tid]
        slots = rules.slots(task, book.arguments(task, state.outcomes))
        assert any(used[name] >= n for name, n in slots)


@given(dags(), policies(), st.integers(0, 2**32 - 1))
def test_limits_and_keys_hold_and_every_task_settles(tasks, rules, seed):
    rng = random.Random(seed)
    state, book = CompilerState(run_id="r"), Book(rules.limit, rules)
    pending: list[TaskResult | TaskApprovalResponse] = []
    events: list[PlanEvent | TaskResult | TaskApprovalResponse] = [
        PlanEvent(round=0, tasks=tasks[i : i + 3], event_id=f"plan{i}")
        for i in range(0, len(tasks), 3)
    ]
    events.append(PlanEvent(round=0, tasks=tasks, complete=True, event_id="complete"))
    events.reverse()
    held_ever: set[int] = set()
    while events or pending:
        if pending and (not events or rng.random() < 0.6):
            ev = pending.pop(rng.randrange(len(pending)))
        else:
            ev = events.pop()
        facts = facts_of(ev, state, book)
        if facts is None:
            continue
        state = with_facts(state, facts, ev if isinstance(ev, PlanEvent) and ev.complete else None)
        decision = book.apply(facts.entry, state.tasks, state.outcomes)
        again = fold(state, rules.limit, upto=len(state.log) - 1, rules=rules)
        assert decided(again.apply(state.log[-1], state.tasks, state.outcomes)) == decided(decision)
        check_slots(book, state, rules)
        for task, _ in decision.held:
            assert rules.of(task.tool).requires_approval and task.id not in held_ever
            held_ever.add(task.id)
            action = rng.choice(["approve", "edit", "reject"])
            args = {"acct": rng.choice(ACCOUNTS)} if action == "edit" else None
            pending.append(
                TaskApprovalResponse(run_id="r", round=0, task_id=task.id, action=action, args=args)
            )
            if rng.random() < 0.2:  # a second verdict: ignored
                pending.append(TaskApprovalResponse(run_id="r", round=0, task_id=task.id))
        for task, _ in decision.dispatch:
            assert task.id not in held_ever or book.edits.get(task.id) is not None
            fails = rng.random() < 0.2
            pending.append(
                TaskResult(round=0, task_id=task.id, tool_name=task.tool, is_error=fails)
            )
        for task, _, _ in decision.failed:
            pending.append(TaskResult(round=0, task_id=task.id, tool_name=task.tool, is_error=True))
    assert set(state.outcomes) == {t.id for t in tasks}  # every task settles
    final = fold(state, rules.limit, rules=rules)
    assert (final.blocked, final.queued, list(final.running), final.held) == ([], [], [], {})
    assert all(v == 0 for v in final.using.values())


@given(dags())
def test_the_remaining_path_of_a_task_is_one_more_than_its_longest_dependent(tasks):
    by_id = {t.id: t for t in tasks}
    depth = remaining_paths(by_id)
    for t in tasks:
        dependents = [u.id for u in tasks if t.id in u.deps]
        assert depth[t.id] == 1 + max((depth[d] for d in dependents), default=0)


def test_when_the_cap_binds_the_longest_chain_goes_first():
    """Task 1 has nothing behind it; task 2 has a chain of two: with one slot, 2 runs first
    (and in plan order, 1)."""
    tasks = [
        PlanTask(id=1, tool="t0"),
        PlanTask(id=2, tool="t0"),
        PlanTask(id=3, tool="t0", kwargs={"x": ref(2)}, deps=[2]),
        PlanTask(id=4, tool="t0", kwargs={"x": ref(3)}, deps=[3]),
    ]
    for order, first in (("critical_path", 2), ("plan", 1)):
        rules = RunPolicies(1, {}, order)  # type: ignore[arg-type]
        state, book = CompilerState(run_id="r"), Book(1, rules)
        facts = facts_of(PlanEvent(round=0, tasks=tasks, complete=True), state, book)
        assert facts is not None
        state = with_facts(state, facts, None)
        decision = book.apply(facts.entry, state.tasks, state.outcomes)
        assert [t.id for t, _ in decision.dispatch] == [first]
        assert sorted(t.id for t, _ in decision.waiting) == sorted({1, 2} - {first})

"""Tool policies measured: which task gets a slot when a cap binds, and retries of a flaky tool.

Usage: ``python -m benchmarks.policies [--repeats N]``; writes ``results/policies.json``.

*Cap binds*: plans of equal-length tool calls (``UNIT`` s each) run under a global cap,
once with ``task_order="plan"`` (the lowest id first) and once with ``critical_path`` (the
ready task with the longest chain behind it first). The tool phase (first start to last
finish) is compared with its lower bound, ``max(longest chain, tasks / cap) x UNIT``, and
with the schedule itself (the scheduler's fold fed results in time order, every call one
UNIT: what the order decides, free of timer noise).

*Flaky tool*: eight fetches, three of which fail at their first try, under the ``cloud``
latency model for the planner and joiner. Without retries the failures reach the
joiner, which replans them (one more planner and joiner call); with a ``pure`` policy
of three tries they are retried at once. Compared with one round's bound (plan, one
fetch, join).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llama_index.core.agent.workflow import AgentStream

from benchmarks.model import CLOUD, LatencyLLM
from llm_compiler import LLMCompilerWorkflow, PlanEvent, TaskResult, ToolPolicy
from llm_compiler.engine.policy import RunPolicies
from llm_compiler.engine.scheduler import Book, facts_of, with_facts
from llm_compiler.engine.state import CompilerState
from llm_compiler.plan import PlanTask, ref
from llm_compiler.testing import ScriptedLLM

RESULTS = Path(__file__).parent / "results"
UNIT = 0.1
FINISH = "Thought: done.\nAction: Finish(done)"


@dataclass(frozen=True)
class Dag:
    """A plan: task id -> the ids it needs (ids in plan order)."""

    name: str
    deps: dict[int, tuple[int, ...]]
    cap: int

    def plan(self) -> str:
        lines = []
        for tid, deps in self.deps.items():
            inputs = ", ".join(f"${d}" for d in deps)
            lines.append(f'{tid}. work("t{tid}", [{inputs}])')
        lines.append(f"{len(self.deps) + 1}. join()")
        return "\n".join(lines)

    def bound(self) -> float:
        """No schedule under the cap beats this (every call takes UNIT)."""
        depth: dict[int, int] = {}
        for tid, deps in self.deps.items():
            depth[tid] = 1 + max((depth[d] for d in deps), default=0)
        return max(max(depth.values()), -(-len(self.deps) // self.cap)) * UNIT


def chain_after_leaves(leaves: int, chain: int, cap: int) -> Dag:
    """`leaves` independent calls planned first, then a chain of `chain` calls."""
    deps: dict[int, tuple[int, ...]] = {i: () for i in range(1, leaves + 1)}
    for i in range(leaves + 1, leaves + chain + 1):
        deps[i] = () if i == leaves + 1 else (i - 1,)
    return Dag(f"{leaves} leaves, then a chain of {chain}; cap {cap}", deps, cap)


def random_dag(seed: int, n: int, cap: int) -> Dag:
    """`n` calls, each needing up to two earlier ones at random."""
    rng = random.Random(seed)
    deps: dict[int, tuple[int, ...]] = {}
    for i in range(1, n + 1):
        k = rng.choice([0, 0, 1, 1, 2]) if i > 1 else 0
        deps[i] = tuple(sorted(rng.sample(range(1, i), min(k, i - 1))))
    return Dag(f"random DAG of {n} (seed {seed}); cap {cap}", deps, cap)


DAGS = [
    chain_after_leaves(4, 4, 2),
    chain_after_leaves(6, 3, 3),
    Dag(
        "two chains (3 and 2) after 4 leaves; cap 2",
        {1: (), 2: (), 3: (), 4: (), 5: (), 6: (5,), 7: (6,), 8: (), 9: (8,)},
        2,
    ),
    random_dag(1, 16, 2),
    random_dag(2, 16, 3),
    random_dag(3, 24, 4),
]


def simulated(dag: Dag, order: str) -> int:
    """The tool phase in UNITs of the schedule the scheduler makes for `dag` (every call
    exactly one UNIT long, no overhead): the scheduler's own fold, fed in time order."""
    tasks = [
        PlanTask(id=t, tool="work", kwargs={f"x{d}": ref(d) for d in deps}, deps=list(deps))
        for t, deps in dag.deps.items()
    ]
    rules = RunPolicies(dag.cap, {}, order)  # type: ignore[arg-type]
    state, book = CompilerState(run_id="sim"), Book(dag.cap, rules)
    running: list[int] = []
    event: PlanEvent | TaskResult = PlanEvent(round=0, tasks=tasks, complete=True)
    clock, pending = 0, []
    while True:
        facts = facts_of(event, state, book)
        assert facts is not None
        state = with_facts(state, facts, None)
        running += [t.id for t, _ in book.apply(facts.entry, state.tasks, state.outcomes).dispatch]
        if not pending:
            if not running:
                return clock
            clock += 1  # the calls running now all end one UNIT later
            pending, running = running, []
        event = TaskResult(round=0, task_id=pending.pop(0), tool_name="work", output="x")


def random_schedules(count: int) -> dict[str, int]:
    """Both orders' schedules on `count` random DAGs (8-24 calls, cap 2-4): how often
    critical path first is shorter, the same or longer, and how often it meets the bound."""
    out = {"dags": count, "shorter": 0, "same": 0, "longer": 0, "at_bound": 0}
    for seed in range(count):
        rng = random.Random(seed)
        dag = random_dag(seed, rng.randint(8, 24), rng.choice([2, 3, 4]))
        plan, cp = simulated(dag, "plan"), simulated(dag, "critical_path")
        out["shorter" if cp < plan else "same" if cp == plan else "longer"] += 1
        out["at_bound"] += round(cp * UNIT, 6) == round(dag.bound(), 6)
    return out


async def work(name: str, inputs: list[str] | None = None) -> str:
    """One call of fixed length."""
    await asyncio.sleep(UNIT)
    return name


async def run(wf: LLMCompilerWorkflow) -> tuple[list[TaskResult], float]:
    """Run to the end: its task results and its wall time."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    handler = wf.run(user_msg="go")
    events = [e async for e in handler.stream_events() if not isinstance(e, AgentStream)]
    await handler
    return [e for e in events if isinstance(e, TaskResult)], loop.time() - start


async def tool_phase(dag: Dag, order: str) -> float:
    """The tool phase of one run of `dag` under `order`."""
    wf = LLMCompilerWorkflow(
        tools=[work],
        llm=ScriptedLLM([dag.plan(), FINISH]),
        max_concurrency=dag.cap,
        task_order=order,
        tool_policies={"work": ToolPolicy(side_effect="pure")},
    )
    results, _ = await run(wf)
    assert len(results) == len(dag.deps) and not any(r.is_error for r in results)
    return max(r.finished_at for r in results) - min(r.started_at for r in results)


async def cap_binds(repeats: int) -> list[dict[str, Any]]:
    rows = []
    for dag in DAGS:
        times: dict[str, list[float]] = {"plan": [], "critical_path": []}
        for _ in range(repeats):  # interleaved, so both orders see the same machine load
            for order in times:
                times[order].append(await tool_phase(dag, order))
        plan, cp = (statistics.median(times[o]) for o in ("plan", "critical_path"))
        rows.append(
            {
                "scenario": dag.name,
                "bound": dag.bound(),
                "plan_order": plan,
                "critical_path": cp,
                "simulated_plan_order": simulated(dag, "plan") * UNIT,
                "simulated_critical_path": simulated(dag, "critical_path") * UNIT,
            }
        )
    return rows


FLAKY = {2, 5, 7}


def flaky_plans() -> tuple[str, str]:
    first = [f'{i}. fetch("p{i}")' for i in range(1, 9)]
    again = [f'{10 + k}. fetch("p{i}")' for k, i in enumerate(sorted(FLAKY))]
    return "\n".join([*first, "9. join()"]), "\n".join([*again, f"{10 + len(FLAKY)}. join()"])


async def flaky_run(retries: bool) -> dict[str, Any]:
    failed: set[str] = set()

    async def fetch(page: str) -> str:
        """Fetch a page (some fail at their first try)."""
        await asyncio.sleep(UNIT)
        if int(page[1:]) in FLAKY and page not in failed:
            failed.add(page)
            raise ConnectionError(f"{page}: connection reset")
        return f"<{page}>"

    first, again = flaky_plans()
    replan = "Thought: three pages failed.\nAction: Replan(fetch the failed pages again)"
    script = [first, FINISH] if retries else [first, replan, again, FINISH]
    policy = ToolPolicy(side_effect="pure", retry={"attempts": 3 if retries else 1})
    wf = LLMCompilerWorkflow(
        tools=[fetch], llm=LatencyLLM(script, CLOUD), tool_policies={"fetch": policy}
    )
    results, wall = await run(wf)
    return {"wall": wall, "llm_calls": len(script), "results": len(results)}


async def flaky(repeats: int) -> dict[str, Any]:
    first, _ = flaky_plans()
    bound = CLOUD.duration(first) + UNIT + CLOUD.duration(FINISH)
    out: dict[str, Any] = {"bound": bound}
    for name, retries in (("no_retries", False), ("retries", True)):
        runs = [await flaky_run(retries) for _ in range(repeats)]
        out[name] = {
            "wall": statistics.median(r["wall"] for r in runs),
            "llm_calls": runs[0]["llm_calls"],
        }
    return out


def table(rows: list[dict[str, Any]], flaky_row: dict[str, Any], schedules: dict[str, int]) -> str:
    lines = [
        "| cap binds | bound (s) | plan order: schedule / measured (s) "
        "| critical path first: schedule / measured (s) |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['scenario']} | {r['bound']:.2f} "
            f"| {r['simulated_plan_order']:.2f} / {r['plan_order']:.3f} "
            f"| {r['simulated_critical_path']:.2f} / {r['critical_path']:.3f} |"
        )
    lines += [
        "",
        "| flaky tool (3 of 8 fail once) | bound (s) | wall (s) | LLM calls |",
        "|---|---|---|---|",
    ]
    for name in ("no_retries", "retries"):
        r = flaky_row[name]
        label = "no retries (the joiner replans)" if name == "no_retries" else "pure, 3 tries"
        lines.append(f"| {label} | {flaky_row['bound']:.2f} | {r['wall']:.3f} | {r['llm_calls']} |")
    lines.append(
        f"\nSchedules of {schedules['dags']} random DAGs: critical path first shorter than plan "
        f"order on {schedules['shorter']}, the same on {schedules['same']}, longer on "
        f"{schedules['longer']}; at the bound on {schedules['at_bound']}."
    )
    return "\n".join(lines)


async def main(repeats: int) -> None:
    rows = await cap_binds(repeats)
    flaky_row = await flaky(repeats)
    schedules = random_schedules(400)
    print(table(rows, flaky_row, schedules))  # noqa: T201
    RESULTS.mkdir(exist_ok=True)
    data = {
        "unit_s": UNIT,
        "repeats": repeats,
        "cap_binds": rows,
        "flaky": flaky_row,
        "random_schedules": schedules,
    }
    (RESULTS / "policies.json").write_text(json.dumps(data, indent=2) + "\n")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    asyncio.run(main(parser.parse_args().repeats))

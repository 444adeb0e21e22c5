"""The plan cache on question families: 5 shapes x 10 fillings, with and without it.

Usage: ``python -m benchmarks.plan_cache``; writes ``benchmarks/results/plan_cache.json``.

The planner is the latency-modelled cloud model of :mod:`benchmarks.model` answering with
the right plan for each question (what a good planner writes), the joiner finishes. Each
shape's 10 questions run one after another on one workflow (the shapes side by side), once
with ``cache_plans`` off and once on. Per mode: planner calls, planner tokens, mean time to
the first task and to the answer, and answers right (every tool call the question needs,
with its arguments in place: a swapped operand counts as wrong). A measurement: it asserts
nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.model import CLOUD, LatencyLLM
from llm_compiler import LLMCompilerWorkflow, TaskReady
from llm_compiler.testing import LLMCall

RESULTS = Path(__file__).parent / "results"
CITIES = ["Paris", "Lima", "Oslo", "Quito", "Hanoi", "Dakar", "Perth", "Tokyo", "Cairo", "Bern"]
Filling = dict[str, Any]
#: Each shape: the question, its plan and the calls a right plan makes.
SHAPES: list[tuple[str, str, Callable[[Filling], list[tuple[str, Any]]]]] = [
    (
        "What is the population of {c1}?",
        '1. lookup(query="{c1}")\n2. join()<END_OF_PLAN>',
        lambda f: [("lookup", f["c1"])],
    ),
    (
        "What is {a} minus {b}?",
        "1. subtract(a={a}, b={b})\n2. join()<END_OF_PLAN>",
        lambda f: [("subtract", (f["a"], f["b"]))],
    ),
    (
        "How many more people live in {c1} than in {c2}?",
        '1. lookup(query="{c1}")\n2. lookup(query="{c2}")\n3. subtract(a=$1, b=$2)\n'
        "4. join()<END_OF_PLAN>",
        lambda f: [("lookup", f["c1"]), ("lookup", f["c2"]), ("subtract", None)],
    ),
    (
        "Take {a}, subtract {b}, then subtract {c}.",
        "1. subtract(a={a}, b={b})\n2. subtract(a=$1, b={c})\n3. join()<END_OF_PLAN>",
        lambda f: [("subtract", (f["a"], f["b"])), ("subtract", None)],
    ),
    (
        "Which is larger, {c1} or {c2}, by population?",
        '1. lookup(query="{c1}")\n2. lookup(query="{c2}")\n3. join()<END_OF_PLAN>',
        lambda f: [("lookup", f["c1"]), ("lookup", f["c2"])],
    ),
]


def fillings(n: int, seed: int) -> list[Filling]:
    """`n` fillings whose values are all different (no value stated twice)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        c1, c2 = rng.sample(CITIES, 2)
        a, b, c = rng.sample(range(10, 999), 3)
        out.append({"c1": c1, "c2": c2, "a": a, "b": b, "c": c})
    return out


def tools(log: list[tuple[str, Any]]) -> list[Any]:
    async def lookup(query: str) -> int:
        """The population of a city."""
        log.append(("lookup", query))
        return len(query) * 1000

    async def subtract(a: int, b: int) -> int:
        """a - b."""
        log.append(("subtract", (a, b)))
        return a - b

    return [lookup, subtract]


def right(calls: list[tuple[str, Any]], expected: list[tuple[str, Any]]) -> bool:
    """Whether `calls` are the expected ones (None: any argument, it is a result)."""
    if len(calls) != len(expected):
        return False
    return all(
        c[0] == e[0] and (e[1] is None or c[1] == e[1])
        for c, e in zip(calls, expected, strict=True)
    )


async def family(shape: int, cache: bool, n: int) -> list[dict[str, Any]]:
    """`n` questions of `shape` in a row on one workflow."""
    question, plan, expect = SHAPES[shape]
    plans: dict[str, str] = {}

    def script(call: LLMCall) -> str:
        """The planner's prompt ends with the question: its plan; else the joiner's."""
        for q, p in plans.items():
            if (call.prompt or "").rstrip().endswith(f"Question: {q}"):
                return p
        return "Thought: I have it.\nAction: Finish(done)"

    llm = LatencyLLM(script, CLOUD)
    log: list[tuple[str, Any]] = []
    wf = LLMCompilerWorkflow(tools=tools(log), llm=llm, cache_plans=cache, timeout=120)
    rows = []
    for f in fillings(n, seed=shape):
        q = question.format(**f)
        plans[q] = plan.format(**f)
        before, log[:] = len(llm.records), []
        t0 = time.perf_counter()
        handler = wf.run(user_msg=q)
        first = None
        async for ev in handler.stream_events():
            if first is None and isinstance(ev, TaskReady):
                first = time.perf_counter() - t0
        out = await handler
        records = llm.records[before:]
        rows.append(
            {
                "answer_s": time.perf_counter() - t0,
                "first_task_s": first,
                "planner_calls": len(records) - 1,
                "planner_tokens": sum(r.prompt_tokens + r.completion_tokens for r in records[:-1]),
                "saved": out.summary.planner_calls_saved,
                "right": right(log, expect(f)),
            }
        )
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    firsts = [r["first_task_s"] for r in rows if r["first_task_s"] is not None]
    return {
        "questions": len(rows),
        "planner_calls": sum(r["planner_calls"] for r in rows),
        "planner_tokens": sum(r["planner_tokens"] for r in rows),
        "planner_calls_saved": sum(r["saved"] for r in rows),
        "first_task_s_mean": round(statistics.mean(firsts), 3) if firsts else None,
        "answer_s_mean": round(statistics.mean(r["answer_s"] for r in rows), 3),
        "answers_right": sum(r["right"] for r in rows),
    }


async def main() -> None:
    n = 10
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_avg_1_5_15": [round(x, 2) for x in os.getloadavg()],
        "model": CLOUD.describe(),
    }
    for cache in (False, True):
        per_shape = await asyncio.gather(*(family(s, cache, n) for s in range(len(SHAPES))))
        report["cache_plans" if cache else "no_cache"] = summary([r for x in per_shape for r in x])
    print(json.dumps(report, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "plan_cache.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

"""The plan cache and the result cache on question families, on a stream of repeating
shapes, and on a stream of new shapes (the cost of a miss).

Usage: ``python -m benchmarks.plan_cache``; writes ``benchmarks/results/plan_cache.json``.
The embedded model's side is :mod:`benchmarks.plan_cache_embedded`.

- **Families**: 5 shapes x 10 fillings on the latency-modelled cloud model of
  :mod:`benchmarks.model`, whose planner writes the right plan for each question (what a
  good planner writes) and whose joiner finishes. Three modes, each a workflow per shape
  (the shapes side by side), interleaved filling by filling, ``lookup`` and ``subtract``
  declared ``pure``: no cache; the plan cache; the plan cache and the result cache
  (lookups kept 600 s, one store per mode). Per mode: planner calls and tokens, mean time
  to the first task and to the answer, answers right (every tool call the question needs,
  with its arguments in place: a swapped operand counts as wrong), tool calls made and
  served from cache.
- **Speculation**: the same families with ``lookup`` taking 0.5 s and declared ``pure``
  without a TTL, the result cache on and the plan cache off, with and without
  ``speculate``: what starting the predicted lookups while the planner writes saves.
- **Repeating shapes**: 300 questions whose shapes (40, worded differently) are drawn from
  a Zipf distribution (s = 1.1), fillings at random, on an instant model, with and without
  the plan cache: the share of questions planned from a template, and the planner tokens.
- **New shapes**: 120 questions each of a shape never seen, on the cloud model, asked of a
  workflow with the plan cache and one without in turn: mean answer time and CPU seconds
  per question (every question misses; the cache learns a template from each).

A measurement: it asserts nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import platform
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.model import CLOUD, INSTANT, LatencyLLM, LatencyModel
from llm_compiler import LLMCompilerWorkflow, TaskReady, ToolPolicy
from llm_compiler.engine.cache import MemoryCache
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


def tools(log: list[tuple[str, Any]], delay: float = 0.0) -> list[Any]:
    async def lookup(query: str) -> int:
        """The population of a city."""
        log.append(("lookup", query))
        if delay:
            await asyncio.sleep(delay)  # the modelled latency of a lookup
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


MODES = {
    "no_cache": {"cache_plans": False, "cache_results": False},
    "plan_cache": {"cache_plans": True, "cache_results": False},
    "plan_and_result_cache": {"cache_plans": True, "cache_results": True},
}
#: Both tools are pure (the plan cache reuses only plans of pure tools); with the result
#: cache, lookups are kept 600 s.
PLAIN = {"lookup": ToolPolicy(side_effect="pure"), "subtract": ToolPolicy(side_effect="pure")}
PURE = PLAIN | {"lookup": ToolPolicy(side_effect="pure", cache_ttl=600)}
#: Speculation against the result cache alone, both with ``lookup`` pure without a TTL
#: (so only calls within a run are served) and taking 0.5 s.
SPECULATION = {
    "result_cache": {"cache_plans": False, "cache_results": True},
    "speculate": {"cache_plans": False, "cache_results": True, "speculate": True},
}
PURE_IN_RUN = {"lookup": ToolPolicy(side_effect="pure")}


class Asker:
    """A workflow on a scripted planner that answers each registered question's plan."""

    def __init__(
        self,
        model: LatencyModel,
        store: MemoryCache | None = None,
        policies: dict[str, ToolPolicy] | None = None,
        delay: float = 0.0,
        tool_list: list[Any] | None = None,
        **config: Any,
    ):
        self.plans: dict[str, str] = {}
        self.log: list[tuple[str, Any]] = []
        self.llm = LatencyLLM(self.script, model)
        if policies is None:
            policies = PURE if config.get("cache_results") else PLAIN
        self.wf = LLMCompilerWorkflow(
            tools=tools(self.log, delay) if tool_list is None else tool_list,
            llm=self.llm,
            timeout=120,
            tool_policies=policies,
            result_cache=store or MemoryCache(),
            **config,
        )

    def script(self, call: LLMCall) -> str:
        """The planner's prompt ends with the question: its plan; else the joiner's."""
        prompt = (call.prompt or "").rstrip()
        marker = "Question: "
        at = prompt.rfind(marker)
        if at >= 0 and prompt[at + len(marker) :] in self.plans:
            return self.plans[prompt[at + len(marker) :]]
        return "Thought: I have it.\nAction: Finish(done)"

    async def ask(self, question: str, plan: str) -> dict[str, Any]:
        """One question; its timings, planner use and tool calls."""
        self.plans[question] = plan
        before, start_log = len(self.llm.records), len(self.log)
        cpu, t0 = time.process_time(), time.perf_counter()
        handler = self.wf.run(user_msg=question)
        first = None
        async for ev in handler.stream_events():
            if first is None and isinstance(ev, TaskReady):
                first = time.perf_counter() - t0
        out = await handler
        records = self.llm.records[before:]
        planner = records[:-1]
        calls = self.log[start_log:]
        return {
            "answer_s": time.perf_counter() - t0,
            "cpu_s": time.process_time() - cpu,
            "first_task_s": first,
            "planner_calls": len(planner),
            "planner_tokens": sum(r.prompt_tokens + r.completion_tokens for r in planner),
            "planner_calls_saved": out.summary.planner_calls_saved,
            "tool_calls": len(calls),
            "cached_calls": out.summary.cached_calls,
            "calls": calls,
            "tasks": [(t.tool, t.args) for t in out.summary.tasks],
            "results": [(t.tool, t.args, t.status, t.output) for t in out.summary.tasks],
        }


def made_right(row: dict[str, Any], expected: list[tuple[str, Any]]) -> bool:
    """Whether the run's tasks, made or served from a cache, are the `expected` calls."""
    calls = [
        (tool, args.get("query") if tool == "lookup" else (args.get("a"), args.get("b")))
        for tool, args in row["tasks"]
    ]
    return right(calls, expected)


async def families(
    n: int, modes: dict[str, dict[str, Any]] = MODES, **options: Any
) -> dict[str, Any]:
    """Every shape's `n` fillings in each mode, interleaved filling by filling (`options`:
    the askers' policies and tool delay)."""
    askers = {
        mode: [Asker(CLOUD, store, **options, **config) for _ in SHAPES]
        for mode, config in modes.items()
        for store in [MemoryCache()]
    }
    fills = [fillings(n, seed=shape) for shape in range(len(SHAPES))]
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for i in range(n):
        order = list(modes)[i % len(modes) :] + list(modes)[: i % len(modes)]
        for mode in order:

            async def one(shape: int, mode: str = mode, i: int = i) -> dict[str, Any]:
                question, plan, expect = SHAPES[shape]
                f = fills[shape][i]
                row = await askers[mode][shape].ask(question.format(**f), plan.format(**f))
                row["right"] = made_right(row, expect(f))
                return row

            rows[mode] += await asyncio.gather(*(one(s) for s in range(len(SHAPES))))
    return {mode: summary(r) for mode, r in rows.items()}


def summary(rows: list[dict[str, Any]], cpu: bool = False) -> dict[str, Any]:
    """Totals and means of `rows` (with `cpu`: CPU ms per question, for runs one at a time)."""
    firsts = [r["first_task_s"] for r in rows if r["first_task_s"] is not None]
    return {
        "questions": len(rows),
        "planner_calls": sum(r["planner_calls"] for r in rows),
        "planner_tokens": sum(r["planner_tokens"] for r in rows),
        "planner_calls_saved": sum(r["planner_calls_saved"] for r in rows),
        "first_task_s_mean": round(statistics.mean(firsts), 3) if firsts else None,
        "first_task_s_median": round(statistics.median(firsts), 3) if firsts else None,
        "answer_s_mean": round(statistics.mean(r["answer_s"] for r in rows), 3),
        "answers_right": sum(r.get("right", True) for r in rows),
        "tool_calls": sum(r["tool_calls"] for r in rows),
        "cached_calls": sum(r["cached_calls"] for r in rows),
    } | ({"cpu_ms_mean": round(1000 * statistics.mean(r["cpu_s"] for r in rows), 2)} if cpu else {})


OPENERS = ["What is", "Tell me", "Give me", "Look up", "Find"]
NOUNS = [
    "population", "area", "mayor", "altitude", "founding year", "time zone",
    "currency", "climate", "main river", "largest airport", "oldest bridge", "motto",
]  # fmt: skip
ENDINGS = ["?", ", please.", " today?"]


def shape(k: int) -> tuple[str, str]:
    """The `k`-th generated shape (distinct wording for every k < 180): a question about
    one city, or (odd k) two, and its plan."""
    opener = OPENERS[k % len(OPENERS)]
    noun = NOUNS[(k // len(OPENERS)) % len(NOUNS)]
    ending = ENDINGS[(k // (len(OPENERS) * len(NOUNS))) % len(ENDINGS)]
    if k % 2:
        return (
            f"{opener} the {noun} of {{c1}} and of {{c2}}{ending}",
            '1. lookup(query="{c1}")\n2. lookup(query="{c2}")\n3. join()<END_OF_PLAN>',
        )
    return (
        f"{opener} the {noun} of {{c1}}{ending}",
        '1. lookup(query="{c1}")\n2. join()<END_OF_PLAN>',
    )


async def zipf_stream(questions: int, shapes: int, s: float, seed: int) -> dict[str, Any]:
    """A stream whose shapes repeat with a Zipf distribution, with and without the plan
    cache (instant model: the share of planner calls saved does not depend on timing)."""
    rng = random.Random(seed)
    weights = [1 / (k + 1) ** s for k in range(shapes)]
    drawn = rng.choices(range(shapes), weights, k=questions)
    askers = {mode: Asker(INSTANT, **MODES[mode]) for mode in ("no_cache", "plan_cache")}
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in askers}
    for k in drawn:
        question, plan = shape(k)
        c1, c2 = rng.sample(CITIES, 2)
        for mode, asker in askers.items():
            q, p = question.format(c1=c1, c2=c2), plan.format(c1=c1, c2=c2)
            rows[mode].append(await asker.ask(q, p))
    seen = len(set(drawn))
    out: dict[str, Any] = {
        "questions": questions,
        "shapes_drawn": seen,
        "zipf_s": s,
        "repeat_share": round(1 - seen / questions, 3),
    }
    for mode, r in rows.items():
        out[mode] = {k: v for k, v in summary(r).items() if "_s_" not in k}
    plan = out["plan_cache"]
    out["hit_rate"] = round(plan["planner_calls_saved"] / questions, 3)
    return out


async def miss_stream(questions: int) -> dict[str, Any]:
    """Every question of a new shape, asked of a workflow with and one without the plan
    cache in turn (the order alternating): what a miss costs end to end."""
    askers = {mode: Asker(CLOUD, **MODES[mode]) for mode in ("no_cache", "plan_cache")}
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in askers}
    rng = random.Random(7)
    for k in range(questions):
        question, plan = shape(k)
        c1, c2 = rng.sample(CITIES, 2)
        for mode in list(askers)[k % 2 :] + list(askers)[: k % 2]:
            q, p = question.format(c1=c1, c2=c2), plan.format(c1=c1, c2=c2)
            rows[mode].append(await askers[mode].ask(q, p))
    out = {mode: summary(r, cpu=True) for mode, r in rows.items()}
    off, on = out["no_cache"], out["plan_cache"]
    out["answer_overhead_pct"] = round(100 * (on["answer_s_mean"] / off["answer_s_mean"] - 1), 2)
    out["cpu_overhead_pct"] = round(100 * (on["cpu_ms_mean"] / off["cpu_ms_mean"] - 1), 2)
    out["templates_kept"] = len(askers["plan_cache"].wf._plans)
    return out


async def main() -> None:
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "load_avg_1_5_15_start": [round(x, 2) for x in os.getloadavg()],
        "model": CLOUD.describe(),
    }
    report["families"] = await families(10)
    report["speculation"] = await families(10, SPECULATION, policies=PURE_IN_RUN, delay=0.5)
    report["zipf_stream"] = await zipf_stream(300, 40, 1.1, seed=1)
    report["new_shapes"] = await miss_stream(120)
    report["load_avg_1_5_15_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "plan_cache.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

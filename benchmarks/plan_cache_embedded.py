"""The plan cache on the embedded model: 5 question families on the demo tools, with and
without it, interleaved in one run; then the warm prompt across workflows.

Usage: ``python -m benchmarks.plan_cache_embedded [--fillings N]`` (needs
``make install-local``); writes ``benchmarks/results/plan_cache_embedded.json`` and a
line per question to ``plan_cache_embedded.jsonl`` as it goes.

Two workflows of the demo (tools, few-shot examples, no replan) share the process's
embedded Gemma 3 270M server, one with ``cache_plans`` and one without; each has its own
result cache. Filling ``i`` of every family is asked of both in turn (which goes first
alternates), so both see the same load and the same warm prompt. Answers are judged
against the encyclopedia's known values (:func:`evals.answers.is_right`). Per mode:
planner calls and tokens, mean first-task and answer time, answers right, tool calls
served from cache; all questions and "seen shapes" (each family's fillings after its
first). Then the first task of a question on the same workflow against a new workflow
(a new client of the shared server, the same tools), alternating. A measurement: it
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import statistics
import time
from itertools import pairwise
from pathlib import Path
from typing import Any

from benchmarks.plan_cache import summary
from evals.answers import is_right
from llm_compiler import LLMCompilerWorkflow, TaskReady
from llm_compiler.demo import demo_compiler
from llm_compiler.demo.tools import find_entry
from llm_compiler.engine.cache import MemoryCache
from llm_compiler.models.resolve import embedded_llm

RESULTS = Path(__file__).parent / "results"
COUNTRIES = ["France", "Japan", "Italy", "Norway", "Canada", "Egypt", "Brazil", "Spain"]
RIVERS = ["Nile", "Amazon", "Yangtze", "Mississippi", "Danube", "Rhine", "Seine", "Thames"]
MOUNTAINS = ["K2", "Kangchenjunga", "Aconcagua", "Denali", "Matterhorn"]  # highest first
PEOPLE = ["Albert Einstein", "Marie Curie", "Isaac Newton", "Charles Darwin", "Alan Turing"]


def _capital(name: str) -> str:
    entry = find_entry(name)
    found = re.search(r"Capital: ([^.]+)\.", entry["text"]) if entry else None
    assert found is not None, name
    return found.group(1)


def _fact(name: str, field: str) -> float:
    entry = find_entry(name)
    assert entry is not None, name
    return float(entry["facts"][field])


def _pairs(names: list[str]) -> list[tuple[str, str]]:
    """Ordered pairs (larger first, as listed), interleaved so neighbours differ."""
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]


Question = tuple[str, list[str | float]]


def family(shape: int, n: int) -> list[Question]:
    """`n` questions of family `shape` with their known answers."""
    if shape == 0:
        return [(f"What is the capital of {c}?", [_capital(c)]) for c in COUNTRIES[:n]]
    if shape == 1:
        pairs = list(pairwise(COUNTRIES))[:n]
        return [
            (f"What are the capitals of {a} and {b}?", [_capital(a), _capital(b)]) for a, b in pairs
        ]
    if shape == 2:
        return [
            (
                f"How much longer is the {a} than the {b}?",
                [_fact(a, "length_km") - _fact(b, "length_km")],
            )
            for a, b in _pairs(RIVERS)[::3][:n]
        ]
    if shape == 3:
        return [
            (f"How much higher is {a} than {b}?", [_fact(a, "height_m") - _fact(b, "height_m")])
            for a, b in _pairs(MOUNTAINS)[:n]
        ]
    return [(f"In what year was {p} born?", [_fact(p, "birth_year")]) for p in PEOPLE[:n]]


SHAPES = 5


async def ask(
    wf: LLMCompilerWorkflow, question: str, others: list[LLMCompilerWorkflow]
) -> dict[str, Any]:
    """One question: first task and answer time, the summary's counts. Timed once the
    warm-up requests of `others` are done (as between a user's questions)."""
    await asyncio.gather(*(w.warmed() for w in others))
    t0 = time.perf_counter()
    handler = wf.run(user_msg=question)
    first = None
    async for ev in handler.stream_events():
        if first is None and isinstance(ev, TaskReady):
            first = time.perf_counter() - t0
    out = await handler
    s = out.summary
    planner = [c for c in s.llm_calls if c.phase == "planner"]
    return {
        "first_task_s": None if first is None else round(first, 3),
        "answer_s": round(time.perf_counter() - t0, 3),
        "planner_calls": len(planner),
        "planner_tokens": sum(c.prompt_tokens + c.completion_tokens for c in planner),
        "planner_calls_saved": s.planner_calls_saved,
        "tool_calls": sum(1 for t in s.tasks if not t.cached),
        "cached_calls": s.cached_calls,
        "answer": str(out),
    }


async def families(n: int, log: Path) -> dict[str, Any]:
    """Every family's fillings on both workflows, interleaved."""
    llm = embedded_llm()
    wfs = {
        mode: demo_compiler(
            llm, max_replans=0, cache_plans=mode == "cache_plans", result_cache=MemoryCache()
        )
        for mode in ("no_cache", "cache_plans")
    }
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in wfs}
    questions = [family(s, n) for s in range(SHAPES)]
    turn = 0
    for i in range(n):
        for shape in range(SHAPES):
            question, expect = questions[shape][i]
            order = list(wfs) if turn % 2 == 0 else list(reversed(wfs))
            turn += 1
            for mode in order:
                try:
                    row = await ask(wfs[mode], question, list(wfs.values()))
                except Exception as e:  # noqa: BLE001 - a failed run is a wrong answer
                    row = {"error": f"{type(e).__name__}: {e}", "answer": "", "first_task_s": None}
                    row |= dict.fromkeys(("planner_calls", "planner_tokens"), 0)
                    row |= dict.fromkeys(("planner_calls_saved", "tool_calls", "cached_calls"), 0)
                    row["answer_s"] = 0.0
                row |= {"mode": mode, "shape": shape, "filling": i, "question": question}
                row["right"] = is_right(row["answer"], expect)
                rows[mode].append(row)
                with log.open("a") as f:
                    f.write(json.dumps(row) + "\n")
    return {
        mode: {
            "all": summary(r),
            "seen_shapes": summary([x for x in r if x["filling"] > 0]),
        }
        for mode, r in rows.items()
    }


async def warm_across(rounds: int) -> dict[str, Any]:
    """First task of a question on the workflow that answered the last one, and on a new
    workflow (new client of the shared server, same tools), alternating."""
    same = demo_compiler(embedded_llm(), max_replans=0, result_cache=MemoryCache())
    made: list[LLMCompilerWorkflow] = [same]
    await ask(same, "What is the capital of Germany?", made)
    times: dict[str, list[float]] = {"same_workflow": [], "new_workflow": []}
    questions = [f"What is the population of {c}?" for c in COUNTRIES]
    for i in range(rounds):
        for kind in (
            ("same_workflow", "new_workflow") if i % 2 == 0 else ("new_workflow", "same_workflow")
        ):
            wf = (
                same
                if kind == "same_workflow"
                else demo_compiler(embedded_llm(), max_replans=0, result_cache=MemoryCache())
            )
            row = await ask(wf, questions[len(made) % len(questions)], [*made, wf])
            made.append(wf)
            if row["first_task_s"] is not None:
                times[kind].append(row["first_task_s"])
    return {
        k: {"each_s": v, "median_s": statistics.median(v) if v else None} for k, v in times.items()
    }


async def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fillings", type=int, default=5, help="questions per family")
    parser.add_argument("--warm-rounds", type=int, default=3)
    args = parser.parse_args(argv)
    RESULTS.mkdir(exist_ok=True)
    log = RESULTS / "plan_cache_embedded.jsonl"
    log.write_text("")
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores (shared)",
        "load_avg_1_5_15_start": [round(x, 2) for x in os.getloadavg()],
        "model": "Gemma 3 270M, embedded llama.cpp server (shared by both workflows)",
        "shapes": SHAPES,
        "fillings": args.fillings,
    }
    started = time.perf_counter()
    report["families"] = await families(args.fillings, log)
    report["warm_prompt"] = await warm_across(args.warm_rounds)
    report["load_avg_1_5_15_end"] = [round(x, 2) for x in os.getloadavg()]
    report["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(report, indent=2))
    (RESULTS / "plan_cache_embedded.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

"""Run every scenario on every system; print a Markdown table; write results/latest.{json,md}.

Usage: ``python -m benchmarks.run [--quick] [--only NAME[,NAME]] [--no-baselines]``.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks.model import CLOUD, INSTANT, LOCAL_SLOW
from benchmarks.scenarios import Scenario, Task, per_task_overhead, scenarios
from benchmarks.systems import COMPILER, Measurement, compiler, compiler_run, measure
from benchmarks.tools import ToolSpec

RESULTS = Path(__file__).parent / "results"
PACKAGES = (
    "llm-compiler",
    "llama-index-core",
    "llama-index-workflows",
    "pydantic",
    "pydantic-core",
)


def machine() -> dict[str, Any]:
    """Where the numbers come from."""
    cpu = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        nproc = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        nproc = os.cpu_count() or 0
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "nproc": nproc,
        "cpu": cpu,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "packages": versions,
        "git": _git(),
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
    }


def _git() -> str | None:
    root = Path(__file__).resolve().parent.parent
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "src"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return None
    return f"{head}{' (src modified)' if dirty else ''}" if head else None


async def cold_start() -> dict[str, Any]:
    """The first LLMCompiler run in this process vs later ones (instant LLM and tools)."""
    s = Scenario(
        "cold-start",
        "Look up 4 items.",
        (ToolSpec("lookup", "lookup", 0.0),),
        tuple(Task(i, "lookup", f"item {i}") for i in range(1, 5)),
        model=INSTANT,
    )
    openai_before = "llama_index.llms.openai" in sys.modules
    wf, llm, _ = compiler(s)
    cold = await compiler_run(wf, llm, s, "cold")
    warm = [await compiler_run(wf, llm, s, f"warm-{i}") for i in range(5)]
    return {
        "cold_s": round(cold.latency, 4),
        "warm_s": round(statistics.median(r.latency for r in warm), 4),
        "imported_llama_index_llms_openai": (
            not openai_before and "llama_index.llms.openai" in sys.modules
        ),
    }


def _fmt(x: float | None, digits: int = 2) -> str:
    return "-" if x is None else f"{x:.{digits}f}"


def scenario_record(s: Scenario, ms: list[Measurement]) -> dict[str, Any]:
    """JSON record of one scenario."""
    systems = [m.summary() for m in ms]
    comp = next(x for x in systems if x["system"] == COMPILER)
    for x in systems:
        if x["system"] != COMPILER:
            x["llm_compiler_speedup"] = round(x["latency_s"] / comp["latency_s"], 2)
    record: dict[str, Any] = {
        "name": s.name,
        "title": s.title,
        "model": s.model.describe(),
        "tasks": len(s.tasks),
        "rounds": s.rounds,
        "notes": s.notes,
        "systems": systems,
    }
    if s.name == "tasks-500":
        record["per_task_overhead_us"] = round(
            1e6 * per_task_overhead(comp["latency_s"], comp["bound_s"], len(s.tasks)), 1
        )
    return record


HEADER = (
    "| scenario | system | latency s | bound s | ratio | LLMCompiler speedup | LLM calls "
    "| prompt tok | completion tok | 1st tool start s (bound) | plan streamed s (bound) |\n"
    "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
)


def table(records: list[dict[str, Any]]) -> str:
    """The main Markdown table."""
    lines = [HEADER]
    for rec in records:
        for x in rec["systems"]:
            speedup = x.get("llm_compiler_speedup")
            lat = x["latency_s"]
            if rec["name"] == "concurrent-50":
                lat = x["p50_s"]
            lines.append(
                f"| {rec['name']} | {x['system']} | {_fmt(lat)} | {_fmt(x['bound_s'])} "
                f"| {_fmt(x['ratio'])} | {'-' if speedup is None else f'{speedup:.2f}x'} "
                f"| {x['llm_calls']:g} | {x['prompt_tokens']:g} | {x['completion_tokens']:g} "
                f"| {_fmt(x['first_task_s'])} ({_fmt(x['first_task_bound_s'])}) "
                f"| {_fmt(x['plan_done_s'])} ({_fmt(x['plan_done_bound_s'])}) |"
            )
    return "\n".join(lines)


def extras(records: list[dict[str, Any]], cold: dict[str, Any]) -> str:
    """The throughput, per-task overhead and cold-start lines."""
    out = []
    for rec in records:
        comp = rec["systems"][0]
        if rec["name"] == "concurrent-50":
            out.append(
                f"- **concurrent-50**: {comp['concurrency']} runs at once on one instance: "
                f"{comp['throughput_runs_per_s']:.1f} runs/s (best batch wall "
                f"{comp['wall_s']:.2f} s), p50 {comp['p50_s']:.2f} s, p95 {comp['p95_s']:.2f} s; "
                f"single-run bound {comp['bound_s']:.2f} s."
            )
        if rec["name"] == "tasks-500":
            out.append(
                f"- **tasks-500**: {comp['latency_s']:.2f} s for 500 tasks with an instant LLM "
                f"and tools: **{rec['per_task_overhead_us']:.0f} us per task** "
                f"((latency - bound) / 500)."
            )
    for system in ("react", "function_agent"):
        ups = [
            x["llm_compiler_speedup"]
            for rec in records
            for x in rec["systems"]
            if x["system"] == system and rec["name"] != "replan"
        ]
        if ups:
            gmean = math.exp(sum(math.log(u) for u in ups) / len(ups))
            out.append(
                f"- **LLMCompiler vs {system}**: geometric-mean speedup {gmean:.2f}x over "
                f"{len(ups)} single-round scenarios (range {min(ups):.2f}x to {max(ups):.2f}x)."
            )
    out.append(
        f"- **cold start**: the first run in a process took {cold['cold_s']:.2f} s, later "
        f"runs {cold['warm_s']:.3f} s (4 instant tasks); it imported "
        f"llama_index.llms.openai: {cold['imported_llama_index_llms_openai']}."
    )
    return "\n".join(out)


def early_bounds(records: list[dict[str, Any]]) -> str:
    """LLMCompiler's latency against the call-end dispatch bound."""
    rows = ["| scenario | latency s | bound (line) s | bound (call end) s | ratio (call end) |",
            "|---|---:|---:|---:|---:|"]  # fmt: skip
    for rec in records:
        c = rec["systems"][0]
        if rec["name"] == "concurrent-50":
            continue
        rows.append(
            f"| {rec['name']} | {_fmt(c['latency_s'])} | {_fmt(c['bound_s'])} "
            f"| {_fmt(c['early_bound_s'])} | {_fmt(c['early_ratio'])} |"
        )
    return "\n".join(rows)


def markdown(result: dict[str, Any]) -> str:
    """The whole report."""
    m = result["machine"]
    pk = ", ".join(f"{k} {v}" for k, v in m["packages"].items())
    models = "; ".join(x.describe() for x in (CLOUD, LOCAL_SLOW, INSTANT))
    scen = "\n".join(
        f"- **{r['name']}** ({r['model'].split(':')[0]}): {' '.join(r['notes'])}"
        for r in result["scenarios"]
    )
    return f"""# LLMCompiler latency benchmarks

Date: {result["date"]} (total {result["total_s"]:.0f} s)
Machine: nproc {m["nproc"]}, {m["cpu"]}, {m["platform"]}, Python {m["python"]},
load average at start {m["loadavg_start"]}; git {m["git"]}.
Packages: {pk}.

LLM latency models (token = word-like token of `split_tokens`; token i arrives at
ttft + i / tok/s): {models}.

## Results (median of runs)

{result["table"]}

- *latency*: `run()` to result; concurrent-50 shows the p50 of its runs.
- *bound*: critical-path lower bound from the plan and the latency model. LLMCompiler:
  a task starts when the newline ending its line has streamed and its inputs are done, the
  joiner when the plan has streamed and every task is done, plus the joiner's reply time
  and replan rounds. ReAct: every reply and tool call in sequence. FunctionAgent: per
  dependency level, the reply then its slowest call, plus the answer.
- *LLMCompiler speedup*: the baseline's latency / LLMCompiler's on the same scenario.
- *1st tool start* and *plan streamed*: seconds after `run()`; the plan is streamed when
  the planner's last token arrived.

Baseline modelling: ReAct writes one `Thought/Action/Action Input` per LLM call and a
final `Answer:`; FunctionAgent gets all calls of one dependency level in one reply (tool-call
tokens counted as `name({{json args}})` lines; prompt tokens include the tool schemas), then
the answer. Note that llama-index's `FunctionAgent.call_tool` step runs at most 4 tools at
once (`@step` default `num_workers=4`), while its bound assumes no limit. LLMCompiler's
joiner must write `Thought: ...` and `Action: Finish(...)`, and its plan numbers lines and
ends with `join()<END_OF_PLAN>`: those tokens count against it on slow models. Runs per
system: LLMCompiler 4 (after a warm-up; 3 on slow-local-8), FunctionAgent 2, ReAct 1 (its
time is almost all modelled sleep).

## Extras

{result["extras"]}

## LLMCompiler vs the call-end bound

The parser dispatches a task when its call's `)` arrives, one token before the newline, so
LLMCompiler can beat the line bound above; this is the tighter bound.

{result["early_table"]}

## Scenarios

{scen}
"""


async def run_all(args: argparse.Namespace) -> dict[str, Any]:
    """Measure everything; return the JSON result."""
    t0 = time.perf_counter()
    info = machine()
    cold = await cold_start()
    todo = scenarios(quick=args.quick)
    if args.only:
        names = set(args.only.split(","))
        todo = [s for s in todo if s.name in names]
    records = []
    for s in todo:
        t = time.perf_counter()
        ms = await measure(s, baselines=not args.no_baselines)
        records.append(scenario_record(s, ms))
        print(f"  {s.name}: {time.perf_counter() - t:.1f} s", file=sys.stderr, flush=True)
    info["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    result: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "total_s": round(time.perf_counter() - t0, 1),
        "machine": info,
        "cold_start": cold,
        "scenarios": records,
    }
    result["table"] = table(records)
    result["extras"] = extras(records, cold)
    result["early_table"] = early_bounds(records)
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.run``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer runs (a smoke test)")
    parser.add_argument("--only", help="comma-separated scenario names")
    parser.add_argument("--no-baselines", action="store_true", help="LLMCompiler only")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory")
    args = parser.parse_args(argv)
    result = asyncio.run(run_all(args))
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    (args.out / "latest.md").write_text(text)
    data = {k: v for k, v in result.items() if k not in ("table", "extras", "early_table")}
    (args.out / "latest.json").write_text(json.dumps(data, indent=2) + "\n")
    print(result["table"])
    print()
    print(result["extras"])
    print()
    print(result["early_table"])
    print(f"\nWrote {args.out / 'latest.md'} and latest.json ({result['total_s']:.0f} s).")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

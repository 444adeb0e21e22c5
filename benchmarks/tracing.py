"""Tracing overhead per task: LLMCompiler's spans on and off, with and without an exporter.

Usage: ``python -m benchmarks.tracing [--runs N]`` (part of ``make bench``). The scenario
is ``tasks-500`` (500 tasks, instant LLM and tools), so the run time is the runtime's own
work and a ratio against tracing off is the overhead. Four settings, each on a fresh
workflow after one warm-up run:

- ``off``: ``tracing=False``, no span handler (the dispatcher's spans of llama-index itself
  still go to its null handler, as always);
- ``on``: our spans on, no handler listening (what every user pays);
- ``exported, off`` / ``exported, on``: OpenInference's instrumentor with an OpenTelemetry
  in-memory exporter (needs the ``tracing`` extra), our spans off / on. The first shows
  what llama-index's generic spans cost; the ratio of the two is what ours add.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.model import LatencyLLM
from benchmarks.scenarios import Scenario, scenario
from benchmarks.tools import ToolLog, make_tools
from llm_compiler import LLMCompilerWorkflow
from llm_compiler.tracing import Tracer

RESULTS = Path(__file__).parent / "results"


def workflow(s: Scenario, tracing: bool) -> LLMCompilerWorkflow:
    """A fresh workflow for `s` with our spans on or off."""
    return LLMCompilerWorkflow(
        tools=make_tools(s.tools, ToolLog()),
        llm=LatencyLLM(s.compiler_script(), s.model),
        max_tasks=s.max_tasks,
        timeout=300,
        tracing=tracing,
    )


async def alternate(
    s: Scenario, runs: int, count: Callable[[], int] | None = None
) -> tuple[dict[bool, list[float]], dict[bool, int]]:
    """Seconds per run with our spans off and on, runs alternating (so that the load of a
    shared machine weighs on both alike), after a warm-up run of each; and the spans
    `count` saw per run."""
    wfs = {tracing: workflow(s, tracing) for tracing in (False, True)}
    times: dict[bool, list[float]] = {False: [], True: []}
    spans: dict[bool, int] = {}
    for i in range(runs + 1):
        for tracing, wf in wfs.items():
            t0 = time.perf_counter()
            await wf.run(user_msg=s.question(f"{tracing}-{i}"))
            elapsed = time.perf_counter() - t0
            if count is not None:
                spans[tracing] = count()
            if i:  # the first is the warm-up
                times[tracing].append(elapsed)
    return times, spans


def span_cost(n: int = 2000) -> float:
    """Seconds per task of the tracer's own task hooks (open, then close a task span),
    measured directly: independent of the machine's load, unlike the runs above."""
    tracer = Tracer("bench")
    with tracer.start_run("run"):  # opens the run's span (none if no handler listens)
        pass
    tracer.start_round("run", 0)
    t0 = time.perf_counter()
    for i in range(n):
        tracer.start_task("run", i, 0, "lookup", [], {"query": f"item {i}"}, None)
        tracer.end_task("run", i, f"value {i}", False, False)
    elapsed = time.perf_counter() - t0
    tracer.end_run("run")
    return elapsed / n


def exporter() -> tuple[Callable[[], int], Callable[[], None]] | None:
    """Instrument with OpenInference into an in-memory exporter: (count spans, stop)."""
    try:
        from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    except ImportError:
        return None
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)

    def count() -> int:
        n = len(memory.get_finished_spans())
        memory.clear()
        return n

    def stop() -> None:
        instrumentor.uninstrument()
        provider.shutdown()

    return count, stop


async def measure(runs: int) -> dict[str, Any]:
    """Median seconds per task of each setting, and the ratios."""
    s = scenario("tasks-500")
    n = len(s.tasks)
    per_task: dict[str, float] = {}
    spans: dict[str, int] = {}
    hook_us = {"task span, no handler": span_cost() * 1e6}
    times, _ = await alternate(s, runs)
    for tracing in (False, True):
        per_task["on" if tracing else "off"] = statistics.median(times[tracing]) / n
    hooks = exporter()
    if hooks is not None:
        count, stop = hooks
        try:
            times, counted = await alternate(s, runs, count)
            hook_us["task span, exported"] = span_cost() * 1e6
            count()
        finally:
            stop()
        for tracing in (False, True):
            key = "exported, on" if tracing else "exported, off"
            per_task[key] = statistics.median(times[tracing]) / n
            spans[key] = counted[tracing]
    ratios = {"on / off": per_task["on"] / per_task["off"]}
    if hooks is not None:
        ratios["exported on / exported off"] = per_task["exported, on"] / per_task["exported, off"]
        ratios["exported on / off"] = per_task["exported, on"] / per_task["off"]
    return {
        "tasks": n,
        "runs": runs,
        "per_task_us": {k: round(v * 1e6, 1) for k, v in per_task.items()},
        "spans_per_run": spans,
        "task_span_us": {k: round(v, 1) for k, v in hook_us.items()},
        "ratios": {k: round(v, 3) for k, v in ratios.items()},
    }


def markdown(result: dict[str, Any]) -> str:
    """The report."""
    rows = "\n".join(f"| {k} | {v:.1f} |" for k, v in result["per_task_us"].items())
    ratios = "\n".join(f"- **{k}**: {v:.2f}" for k, v in result["ratios"].items())
    hooks = ", ".join(f"{k} {v:.1f} us" for k, v in result["task_span_us"].items())
    spans = ", ".join(f"{k} {v}" for k, v in result["spans_per_run"].items()) or "none"
    return f"""# Tracing overhead per task

tasks-500 (instant LLM and tools), median of {result["runs"]} runs per setting (off and on
alternating), {os.cpu_count()} CPUs, load average (1, 5, 15 min) at start and end
{result["loadavg"]}. Spans exported per run: {spans}.

| setting | us per task |
|---|---:|
{rows}

{ratios}

The task span's own cost, timed directly (2000 task spans opened and closed): {hooks}.
"""


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.tracing``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=3, help="runs per setting (default 3)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="output directory")
    args = parser.parse_args(argv)
    load = os.getloadavg()
    result = asyncio.run(measure(args.runs))
    result["loadavg"] = [round(x, 2) for x in (*load, *os.getloadavg())]
    args.out.mkdir(parents=True, exist_ok=True)
    text = markdown(result)
    (args.out / "tracing.md").write_text(text)
    (args.out / "tracing.json").write_text(json.dumps(result, indent=2) + "\n")
    print(text)
    print(f"Wrote {args.out / 'tracing.md'}.", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

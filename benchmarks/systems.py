"""Run one scenario on each system and measure: LLMCompiler, ReActAgent, FunctionAgent.

Every run checks (and raises ``AssertionError`` if not) that the system made exactly the
scenario's tool calls, with the right arguments, and returned the expected answer. Timing
is only measured, never asserted.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent, ReActAgent

from benchmarks.model import LatencyFunctionLLM, LatencyLLM, Usage
from benchmarks.scenarios import Bound, Scenario
from benchmarks.tools import ToolCall, ToolLog, make_tools
from llm_compiler import LLMCompilerWorkflow, TaskResult
from llm_compiler.tracing.prices import OPENAI_PRICES

COMPILER, REACT, FUNCTION_AGENT = "llm_compiler", "react", "function_agent"
#: Every system's tokens are priced as this model's (the default OpenAI model of ``resolve_llm()``).
PRICED_AS = "gpt-4o-mini"


def cost(usage: Usage) -> float:
    """USD of `usage` at :data:`PRICED_AS`'s list prices (no prompt caching)."""
    return OPENAI_PRICES[PRICED_AS].cost(usage.prompt_tokens, usage.completion_tokens)


@dataclass
class Run:
    """One measured run."""

    latency: float
    """Seconds from ``run()`` to the awaited result."""
    usage: Usage
    first_task: float | None
    """Seconds until the first tool started."""
    plan_done: float | None = None
    """Seconds until the planner's last token (LLMCompiler)."""


@dataclass
class Measurement:
    """All runs of one system on one scenario, summarized."""

    system: str
    bound: Bound
    early_bound: Bound | None = None
    """LLMCompiler's bound when a task is dispatched at its call's ``)``, not the newline."""
    runs: list[Run] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def latency(self) -> float:
        """Median latency."""
        return statistics.median(r.latency for r in self.runs)

    def summary(self) -> dict[str, Any]:
        """JSON-ready medians."""

        def med(values: Sequence[float | None]) -> float | None:
            vals = [v for v in values if v is not None]
            return round(statistics.median(vals), 4) if vals else None

        lat = [r.latency for r in self.runs]
        return {
            "system": self.system,
            "runs": len(self.runs),
            "latency_s": round(self.latency, 4),
            "latency_min_s": round(min(lat), 4),
            "latency_max_s": round(max(lat), 4),
            "bound_s": round(self.bound.total, 4),
            "ratio": _ratio(self.latency, self.bound),
            "llm_calls": med([r.usage.calls for r in self.runs]),
            "prompt_tokens": med([r.usage.prompt_tokens for r in self.runs]),
            "completion_tokens": med([r.usage.completion_tokens for r in self.runs]),
            "cost_usd": round(statistics.median(cost(r.usage) for r in self.runs), 7),
            "first_task_s": med([r.first_task for r in self.runs]),
            "first_task_bound_s": _round(self.bound.first_task),
            "early_bound_s": _round(self.early_bound.total) if self.early_bound else None,
            "early_ratio": _ratio(self.latency, self.early_bound),
            "first_task_early_bound_s": (
                _round(self.early_bound.first_task) if self.early_bound else None
            ),
            "plan_done_s": med([r.plan_done for r in self.runs]),
            "plan_done_bound_s": _round(self.bound.plan_done),
            **self.extra,
        }


def _ratio(latency: float, bound: Bound | None) -> float | None:
    return round(latency / bound.total, 3) if bound is not None and bound.total > 0 else None


def _round(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def check_calls(scenario: Scenario, calls: Sequence[ToolCall], system: str, times: int = 1) -> None:
    """Raise if `calls` are not exactly the scenario's expected calls (`times` over)."""
    got = Counter((c.tool, c.arg) for c in calls)
    want = Counter({k: v * times for k, v in scenario.expected_calls().items()})
    if got != want:
        raise AssertionError(
            f"{system} on {scenario.name}: wrong tool calls; "
            f"missing {dict(want - got)}, unexpected {dict(got - want)}"
        )


def check_answer(scenario: Scenario, answer: str, system: str) -> None:
    """Raise if `answer` is not the scenario's answer."""
    if answer.strip() != scenario.answer():
        raise AssertionError(f"{system} on {scenario.name}: answer {answer!r}")


# ---------------------------------------------------------------------- LLMCompiler


def compiler(scenario: Scenario) -> tuple[LLMCompilerWorkflow, LatencyLLM, ToolLog]:
    """A workflow (one instance serves every run) with its LLM and tool log."""
    log = ToolLog()
    llm = LatencyLLM(scenario.compiler_script(), scenario.model)
    wf = LLMCompilerWorkflow(
        tools=make_tools(scenario.tools, log),
        llm=llm,
        max_tasks=scenario.max_tasks,
        timeout=300,
    )
    return wf, llm, log


async def compiler_run(
    wf: LLMCompilerWorkflow, llm: LatencyLLM, scenario: Scenario, tag: object
) -> Run:
    """One LLMCompiler run, measured from ``run()`` to the result."""
    wall0, t0 = time.time(), time.perf_counter()
    handler = wf.run(user_msg=scenario.question(tag))
    started: list[float] = []
    async for ev in handler.stream_events():
        if isinstance(ev, TaskResult) and ev.started_at:
            started.append(ev.started_at)
    output = await handler
    latency = time.perf_counter() - t0
    check_answer(scenario, str(output), COMPILER)
    marker = f"[run {tag}]"
    records = [r for r in llm.records if marker in r.prompt]
    return Run(
        latency=latency,
        usage=Usage.of(records),
        first_task=min(started) - wall0 if started else None,
        plan_done=records[0].last_token - wall0 if records else None,
    )


async def measure_compiler(scenario: Scenario) -> Measurement:
    """Warm up once, then `scenario.runs` sequential runs on one workflow instance."""
    wf, llm, log = compiler(scenario)
    out = Measurement(COMPILER, scenario.compiler_bound(), scenario.compiler_bound(True))
    await compiler_run(wf, llm, scenario, "warm-up")
    check_calls(scenario, log.take(), COMPILER)
    for i in range(scenario.runs):
        out.runs.append(await compiler_run(wf, llm, scenario, i))
        check_calls(scenario, log.take(), COMPILER)
    return out


async def measure_concurrent(scenario: Scenario) -> Measurement:
    """`scenario.concurrency` runs at once on one instance, `scenario.runs` times.

    Each run's latency is a sample; ``extra`` has throughput and p50/p95 per batch.
    """
    wf, llm, log = compiler(scenario)
    out = Measurement(COMPILER, scenario.compiler_bound(), scenario.compiler_bound(True))
    await compiler_run(wf, llm, scenario, "warm-up")
    check_calls(scenario, log.take(), COMPILER)
    batches = []
    for b in range(scenario.runs):
        t0 = time.perf_counter()
        runs = await asyncio.gather(
            *(compiler_run(wf, llm, scenario, f"{b}-{i}") for i in range(scenario.concurrency))
        )
        wall = time.perf_counter() - t0
        check_calls(scenario, log.take(), COMPILER, times=scenario.concurrency)
        out.runs += runs
        lat = sorted(r.latency for r in runs)
        batches.append(
            {
                "wall_s": round(wall, 4),
                "throughput_runs_per_s": round(len(runs) / wall, 2),
                "p50_s": round(_pct(lat, 50), 4),
                "p95_s": round(_pct(lat, 95), 4),
            }
        )
    best = min(batches, key=lambda x: x["wall_s"])
    out.extra = {"concurrency": scenario.concurrency, "batches": batches, **best}
    return out


def _pct(sorted_values: Sequence[float], p: float) -> float:
    k = (len(sorted_values) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo)


# ---------------------------------------------------------------------- baselines


async def _agent_run(agent: Any, scenario: Scenario, log: ToolLog, system: str) -> Run:
    wall0, t0 = time.time(), time.perf_counter()
    handler = agent.run(user_msg=scenario.question(0))
    async for _ in handler.stream_events():
        pass
    output = await handler
    latency = time.perf_counter() - t0
    check_answer(scenario, str(output), system)
    calls = log.take()
    check_calls(scenario, calls, system)
    return Run(
        latency=latency,
        usage=Usage.of(agent.llm.records),
        first_task=min(c.started for c in calls) - wall0 if calls else None,
    )


async def measure_react(scenario: Scenario) -> Measurement:
    """llama-index ReActAgent: one tool per LLM call. A fresh agent per run."""
    out = Measurement(REACT, scenario.react_bound())
    log = ToolLog()
    tools = make_tools(scenario.tools, log)
    for _ in range(scenario.react_runs):
        llm = LatencyLLM(scenario.react_script(), scenario.model)
        agent = ReActAgent(tools=tools, llm=llm, streaming=True)
        out.runs.append(await _agent_run(agent, scenario, log, REACT))
    return out


async def measure_function_agent(scenario: Scenario) -> Measurement:
    """llama-index FunctionAgent: parallel tool calls per level. A fresh agent per run."""
    out = Measurement(FUNCTION_AGENT, scenario.fc_bound())
    log = ToolLog()
    tools = make_tools(scenario.tools, log)
    for _ in range(scenario.fc_runs):
        llm = LatencyFunctionLLM(scenario.fc_script(), scenario.model)
        agent = FunctionAgent(tools=tools, llm=llm, streaming=True)
        out.runs.append(await _agent_run(agent, scenario, log, FUNCTION_AGENT))
    return out


async def measure(scenario: Scenario, baselines: bool = True) -> list[Measurement]:
    """Every system on `scenario`."""
    if scenario.concurrency > 1:
        return [await measure_concurrent(scenario)]
    out = [await measure_compiler(scenario)]
    if baselines and scenario.react_runs:
        out.append(await measure_react(scenario))
    if baselines and scenario.fc_runs:
        out.append(await measure_function_agent(scenario))
    return out

"""Profile one warm run of the 500-task scenario with pyinstrument.

Usage: ``python -m benchmarks.profile`` writes ``benchmarks/results/profile.txt``: the run's
latency, self time grouped by package and by function, micro-timings of the objects the
hot path builds, and pyinstrument's call tree.
"""

from __future__ import annotations

import argparse
import asyncio
import time
import timeit
from collections import Counter, defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyinstrument import Profiler
from pyinstrument.frame import Frame

from benchmarks.floor import floor_latency
from benchmarks.scenarios import Scenario, scenario
from benchmarks.systems import compiler, compiler_run

RESULTS = Path(__file__).parent / "results"

GROUPS = (
    ("llm_compiler", "/llm_compiler/"),
    ("benchmarks harness", "/benchmarks/"),
    ("workflows runtime", "/workflows/"),
    ("llama-index instrumentation", "/llama_index_instrumentation/"),
    ("llama-index core", "/llama_index/core/"),
    ("pydantic", "/pydantic"),
    ("asyncio", "/asyncio/"),
)


def _group(path: str) -> str:
    for name, marker in GROUPS:
        if marker in path:
            return name
    if path.startswith("<") or "/lib/python3" in path:
        return "stdlib / builtins"
    return "other"


def _real(frame: Frame) -> Frame:
    """The function a synthetic ``[self]``/``[await]`` frame stands for."""
    while frame.is_synthetic and frame.parent is not None:
        frame = frame.parent
    return frame


def self_times(root: Frame) -> tuple[dict[str, float], dict[str, float]]:
    """Self seconds by package group and by ``function (file:line)``."""
    groups: dict[str, float] = defaultdict(float)
    funcs: dict[str, float] = defaultdict(float)
    stack = [root]
    while stack:
        frame = stack.pop()
        stack.extend(frame.children)
        own = frame.time - sum(c.time for c in frame.children)
        if own <= 0:
            continue
        real = _real(frame)
        path = real.file_path or "<builtin>"
        groups[_group(path)] += own
        short = "/".join(path.split("/")[-2:])
        funcs[f"{real.function} ({short}:{real.line_no})"] += own
    return dict(groups), dict(funcs)


def owner_times(root: Frame) -> dict[str, float]:
    """Self time split by who is responsible for it.

    * ``our code``: under an llm_compiler frame, and the nearest project-or-framework
      frame is ours (pydantic/stdlib work our code asks for counts as ours);
    * ``framework API called by our steps``: under an llm_compiler frame, inside a
      workflows call (event constructors, ``send_event``, ``write_event_to_stream``,
      the state store);
    * ``workflows runtime``: no llm_compiler frame on the stack (ticks, routing, state
      copies, step bookkeeping);
    * the harness (scripted LLM, tools, stream consumer) and the bare event loop.
    """
    owners: dict[str, float] = defaultdict(float)

    def walk(frame: Frame, owner: str, ours: bool) -> None:
        group = _group(_real(frame).file_path or "")
        if group == "llm_compiler":
            owner, ours = "our code (llm_compiler)", True
        elif group == "workflows runtime":
            owner = "framework API called by our steps" if ours else "workflows runtime"
        elif group == "benchmarks harness":
            owner = "benchmark harness (scripted LLM, tools, consumer)"
        own = frame.time - sum(c.time for c in frame.children)
        if own > 0:
            owners[owner] += own
        for c in frame.children:
            walk(c, owner, ours)

    walk(root, "event loop / other", False)
    return dict(owners)


def micro() -> list[tuple[str, float]]:
    """Microseconds to build the objects the per-task path builds."""
    from llama_index.core.agent.workflow import AgentStream

    from llm_compiler import PlanEvent, PlanTask, TaskReady, TaskResult
    from llm_compiler.engine.state import CompilerState

    task = PlanTask(id=1, tool="lookup", kwargs={"query": "x"})
    big = CompilerState(
        tasks={i: PlanTask(id=i, tool="lookup", kwargs={"query": str(i)}) for i in range(500)},
        outcomes={
            i: TaskResult(round=0, task_id=i, tool_name="lookup", output=i) for i in range(500)
        },
    )
    cases: list[tuple[str, Callable[[], Any]]] = [
        ("TaskResult(...)", lambda: TaskResult(round=0, task_id=1, tool_name="lookup", output=1)),
        ("TaskReady(...)", lambda: TaskReady(round=0, task_id=1, tool_name="x", args={"q": 1})),
        ("PlanEvent(tasks=[1 task])", lambda: PlanEvent(round=0, tasks=[task])),
        ("AgentStream(...)", lambda: AgentStream(delta="x", response="y", current_agent_name="a")),
        ("PlanTask.model_copy()", lambda: task.model_copy()),
        ("CompilerState(500 tasks).model_copy()", lambda: big.model_copy()),
        ("CompilerState(500 tasks).model_dump()", lambda: big.model_dump()),
        (
            "CompilerState.model_validate(dump of 500 tasks)",
            lambda: CompilerState.model_validate(big.model_dump()),
        ),
    ]
    out = []
    for name, fn in cases:
        n, t = timeit.Timer(fn).autorange()
        out.append((name, 1e6 * t / n))
    return out


async def unprofiled(s: Scenario, runs: int = 2) -> tuple[float, Counter[str]]:
    """Best latency of `runs` warm runs, and Event constructions by class in one run."""
    from workflows.events import Event

    wf, llm, _ = compiler(s)
    await compiler_run(wf, llm, s, "warm-up")
    best = min([(await compiler_run(wf, llm, s, f"plain-{i}")).latency for i in range(runs)])
    counts: Counter[str] = Counter()
    original = Event.__init__

    def counting(self: Event, *args: Any, **kwargs: Any) -> None:
        counts[type(self).__name__] += 1
        original(self, *args, **kwargs)

    Event.__init__ = counting  # type: ignore[method-assign]
    try:
        await compiler_run(wf, llm, s, "counted")
    finally:
        Event.__init__ = original  # type: ignore[method-assign]
    return best, counts


async def _profiled(s: Scenario, interval: float) -> tuple[Profiler, float]:
    wf, llm, log = compiler(s)
    await compiler_run(wf, llm, s, "warm-up")
    log.take()
    profiler = Profiler(interval=interval, async_mode="disabled")
    profiler.start()
    t0 = time.perf_counter()
    await compiler_run(wf, llm, s, "profiled")
    latency = time.perf_counter() - t0
    profiler.stop()
    return profiler, latency


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m benchmarks.profile``."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--scenario", default="tasks-500")
    parser.add_argument("--interval", type=float, default=0.001)
    parser.add_argument("--out", type=Path, default=RESULTS / "profile.txt")
    args = parser.parse_args(argv)
    s = scenario(args.scenario)
    n = len(s.tasks)
    plain, counts = asyncio.run(unprofiled(s))
    floor = asyncio.run(floor_latency(n))
    profiler, latency = asyncio.run(_profiled(s, args.interval))
    session = profiler.last_session
    assert session is not None
    root = session.root_frame()
    assert root is not None
    total = root.time
    groups, funcs = self_times(root)
    owners = owner_times(root)
    lines = [
        f"Profile of one warm {s.name} run ({n} tasks, {s.model.describe()}).",
        "",
        f"Without the profiler: {plain:.3f} s = {1e6 * plain / n:.0f} us per task (best of 2).",
        f"Framework floor (benchmarks/floor.py: same steps and events, empty bodies): "
        f"{floor:.3f} s = {1e6 * floor / n:.0f} us per task.",
        f"Event constructions in one run: {sum(counts.values())} "
        f"({sum(counts.values()) / n:.1f} per task): "
        + ", ".join(f"{k} {v}" for k, v in counts.most_common()),
        "",
        f"Profiled run: {latency:.3f} s (pyinstrument, interval {args.interval * 1e3:g} ms; "
        "its per-call hook inflates call-heavy code, so read shares, not seconds).",
        "",
        "Self time by package:",
    ]
    for name, t in sorted(groups.items(), key=lambda x: -x[1]):
        lines.append(f"  {100 * t / total:5.1f}%  {t:7.3f} s  {name}")
    lines += [
        "",
        "Time by owner (see owner_times; us/task = share x the unprofiled latency / tasks):",
    ]
    for name, t in sorted(owners.items(), key=lambda x: -x[1]):
        per_task = 1e6 * plain * (t / total) / n
        lines.append(f"  {100 * t / total:5.1f}%  {per_task:7.0f} us/task  {name}")
    lines += ["", "Top 30 functions by self time:"]
    for name, t in sorted(funcs.items(), key=lambda x: -x[1])[:30]:
        lines.append(f"  {100 * t / total:5.1f}%  {t:7.3f} s  {name}")
    lines += ["", "Micro-timings (us per call, this machine):"]
    for name, us in micro():
        lines.append(f"  {us:9.1f}  {name}")
    lines += ["", "Call tree:", ""]
    lines.append(profiler.output_text(unicode=False, color=False, show_all=False))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines[: lines.index("Call tree:")]))
    print(f"Wrote {args.out}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

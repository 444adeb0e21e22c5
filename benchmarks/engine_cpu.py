"""The engine's own CPU per task, and many runs at once in one process.

Usage: ``python -m benchmarks.engine_cpu [--runs N] [--k K] [--profile]``; writes
``benchmarks/results/engine_cpu.json``.

* **CPU per task**: a fan-out of 50 instant tools under an instant scripted model, one run
  at a time on one workflow instance (after a warm-up): the process CPU seconds of a run
  over its 50 tasks, and the marginal cost per task ``(CPU(50) - CPU(1)) / 49`` (the run's
  own fixed cost taken out). The median of ``--runs`` runs of each size, taking turns.
* **K runs at once**: K runs (default 100) of an 8-task fan-out (0.5 s tools, the
  cloud-like latency model of :mod:`benchmarks.model`) started together on one instance:
  p50 and p95 latency over the critical path a run would take alone, and CPU per run.
* ``--profile``: pyinstrument over 20 fan-out-50 runs: self time by function, top 25.
* ``--what-if``: CPU per task again after giving every workflows event class the plain
  ``_data`` default the project's own events have (what that upstream change would
  give; the runtime's per-tick state copies stay).

A measurement, not a test: it asserts only that each run answered right. The numbers
depend on the machine and its load; ``uptime`` is recorded with them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.model import CLOUD, INSTANT
from benchmarks.scenarios import Scenario, _lookups
from benchmarks.systems import check_answer, compiler
from benchmarks.tools import ToolSpec

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).parent.parent
LANGGRAPH_PYTHON = ROOT / ".venv-langgraph" / "bin" / "python"


def fanout(n: int, latency: float, model: Any = INSTANT) -> Scenario:
    """`n` independent lookups of `latency` seconds each."""
    return Scenario(
        f"fanout-{n}",
        f"What are the populations of {n} places?",
        (ToolSpec("lookup", "lookup", latency),),
        tuple(_lookups(n)),
        model=model,
        max_tasks=max(100, n + 1),
    )


@dataclass
class Sample:
    """One run's process CPU and wall seconds."""

    cpu: float
    wall: float


class Tutorial:
    """LangGraph's LLMCompiler tutorial (``benchmarks/langgraph_compiler.py``) in a
    subprocess of ``.venv-langgraph``, one run per request."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    @classmethod
    async def start(cls) -> Tutorial | None:
        """The subprocess, or None (with the reason printed) without the venv."""
        if not LANGGRAPH_PYTHON.exists():
            print("LangGraph tutorial skipped: no .venv-langgraph (make bench-langgraph-venv)")
            return None
        proc = await asyncio.create_subprocess_exec(
            str(LANGGRAPH_PYTHON),
            "-m",
            "benchmarks.langgraph_compiler",
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        return cls(proc)

    async def run(self, scenario: Scenario, tag: object, latency: float = 0.0) -> Sample:
        """One run of `scenario`'s plan (keyword arguments: the tutorial's parser reads
        only ``name=value``); raises unless every result and the answer are right."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        tasks = scenario.round_tasks(0)
        lines = [f"{t.id}. {t.tool}(query={json.dumps(t.arg)})" for t in tasks]
        lines.append(f"{len(tasks) + 1}. join()<END_OF_PLAN>")
        request = {
            "plan": "\n".join(lines),
            "answer": scenario.answer(),
            "question": scenario.title,
            "tag": tag,
            "latency": latency,
        }
        self.proc.stdin.write((json.dumps(request) + "\n").encode())
        await self.proc.stdin.drain()
        line = await self.proc.stdout.readline()
        if not line:
            raise RuntimeError("benchmarks/langgraph_compiler.py ended; see its error above")
        reply = json.loads(line)
        if reply["tasks"] != len(tasks):
            raise AssertionError(f"LangGraph tutorial: {reply['tasks']} of {len(tasks)} tasks ran")
        return Sample(reply["cpu_s"], reply["wall_s"])

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def ours(wf: Any, scenario: Scenario, tag: object) -> Sample:
    """One run of the engine, checked."""
    c0, t0 = time.process_time(), time.perf_counter()
    out = await wf.run(user_msg=scenario.question(tag))
    sample = Sample(time.process_time() - c0, time.perf_counter() - t0)
    check_answer(scenario, str(out), "llm-compiler")
    return sample


def per_task(samples: dict[int, list[Sample]], runs: int) -> dict[str, Any]:
    """Medians of `samples` (by fan-out size 1 and 50) as CPU per run and per task."""
    one = statistics.median(s.cpu for s in samples[1])
    fifty = statistics.median(s.cpu for s in samples[50])
    return {
        "runs": runs,
        "cpu_ms_per_run_1_task": round(one * 1e3, 3),
        "cpu_ms_per_run_50_tasks": round(fifty * 1e3, 3),
        "cpu_ms_per_task": round(fifty / 50 * 1e3, 3),
        "cpu_ms_per_added_task": round((fifty - one) / 49 * 1e3, 3),
        "wall_ms_per_run_50_tasks": round(statistics.median(s.wall for s in samples[50]) * 1e3, 3),
    }


async def cpu_per_task(runs: int, tutorial: Tutorial | None = None) -> dict[str, Any]:
    """CPU seconds per run of fan-outs of 1 and 50 instant tasks (see the module doc),
    ours and, taking turns run by run, the LangGraph tutorial's if given."""
    sizes = (1, 50)
    systems = {n: compiler(fanout(n, 0.0)) for n in sizes}
    for n, (wf, _, _) in systems.items():
        await wf.run(user_msg=fanout(n, 0.0).question("warm-up"))
        if tutorial is not None:
            await tutorial.run(fanout(n, 0.0), "warm-up")
    samples: dict[str, dict[int, list[Sample]]] = {
        "ours": {1: [], 50: []},
        "tutorial": {1: [], 50: []},
    }
    for i in range(runs):
        for n in sizes if i % 2 == 0 else sizes[::-1]:
            wf, _, log = systems[n]
            scenario = fanout(n, 0.0)
            samples["ours"][n].append(await ours(wf, scenario, i))
            log.take()
            if tutorial is not None:
                samples["tutorial"][n].append(await tutorial.run(scenario, i))
    report = per_task(samples["ours"], runs)
    if tutorial is not None:
        report["langgraph_tutorial"] = per_task(samples["tutorial"], runs)
    return report


async def slow_tools(tutorial: Tutorial, runs: int = 3) -> dict[str, Any]:
    """Wall seconds of an 8-task fan-out of 0.5 s tools under the instant model, ours and
    the tutorial's, taking turns (its tasks run one after another)."""
    scenario = fanout(8, 0.5)
    wf, _, log = compiler(scenario)
    walls: dict[str, list[float]] = {"ours": [], "tutorial": []}
    for i in range(runs):
        walls["ours"].append((await ours(wf, scenario, f"slow-{i}")).wall)
        log.take()
        walls["tutorial"].append((await tutorial.run(scenario, f"slow-{i}", 0.5)).wall)
    return {
        "tasks": 8,
        "tool_s": 0.5,
        **{k: round(statistics.median(v), 3) for k, v in walls.items()},
    }


async def concurrent(k: int, batches: int) -> dict[str, Any]:
    """K 8-task fan-outs at once (0.5 s tools, cloud-like model): latency over the
    critical path, p50 and p95, best of `batches` batches by p50."""
    scenario = fanout(8, 0.5, CLOUD)
    wf, _, log = compiler(scenario)
    await wf.run(user_msg=scenario.question("warm-up"))
    log.take()
    bound = scenario.compiler_bound().total
    rows = []
    for b in range(batches):

        async def one(i: int, b: int = b) -> float:
            t0 = time.perf_counter()
            out = await wf.run(user_msg=scenario.question(f"{b}-{i}"))
            check_answer(scenario, str(out), "llm-compiler")
            return time.perf_counter() - t0

        c0, t0 = time.process_time(), time.perf_counter()
        lat = sorted(await asyncio.gather(*(one(i) for i in range(k))))
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        log.take()
        rows.append(
            {
                "p50_x": round(statistics.median(lat) / bound, 3),
                "p95_x": round(lat[int(0.95 * (len(lat) - 1))] / bound, 3),
                "wall_s": round(wall, 3),
                "cpu_ms_per_run": round(cpu / k * 1e3, 2),
            }
        )
    best = min(rows, key=lambda r: r["p50_x"])
    return {"k": k, "critical_path_s": round(bound, 3), "batches": rows, **best}


async def profile(runs: int = 20) -> str:
    """pyinstrument over `runs` fan-out-50 runs: the top 25 functions by self time."""
    from pyinstrument import Profiler

    from benchmarks.profile import self_times

    scenario = fanout(50, 0.0)
    wf, _, _ = compiler(scenario)
    await wf.run(user_msg=scenario.question("warm-up"))
    profiler = Profiler(interval=0.0005, async_mode="disabled")
    profiler.start()
    for i in range(runs):
        await wf.run(user_msg=scenario.question(i))
    profiler.stop()
    session = profiler.last_session
    assert session is not None
    root = session.root_frame()
    assert root is not None
    groups, funcs = self_times(root)
    total = sum(funcs.values()) or 1.0
    lines = [f"{s / total:6.1%}  {name}" for name, s in sorted(groups.items(), key=lambda x: -x[1])]
    lines.append("")
    top = sorted(funcs.items(), key=lambda x: -x[1])[:25]
    lines += [f"{s / total:6.1%}  {name}" for name, s in top]
    return "\n".join(lines)


def plain_event_data() -> int:
    """Give every loaded workflows ``Event`` class a plain ``_data`` default instead of
    ``default_factory=dict`` (measurement only: the what-if of an upstream change).
    Returns how many classes changed."""
    from pydantic import PrivateAttr
    from workflows.events import Event

    changed, todo = 0, [Event]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        attr = cls.__private_attributes__.get("_data")
        if attr is not None and attr.default_factory is not None:
            cls.__private_attributes__["_data"] = PrivateAttr(default={})  # type: ignore[assignment]
            changed += 1
    return changed


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--what-if", action="store_true")
    args = parser.parse_args()
    load = os.getloadavg()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
    }
    tutorial = await Tutorial.start()
    try:
        report["cpu_per_task"] = await cpu_per_task(args.runs, tutorial)
        if tutorial is not None:
            report["wall_s_fanout_8_tools_0_5s"] = await slow_tools(tutorial)
    finally:
        if tutorial is not None:
            await tutorial.close()
    report["concurrent"] = await concurrent(args.k, args.batches)
    if args.what_if:
        report["what_if_plain_event_data"] = {
            "classes_changed": plain_event_data(),
            **(await cpu_per_task(args.runs)),
        }
    print(json.dumps(report, indent=2))
    if args.profile:
        print(await profile())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "engine_cpu.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

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
from pathlib import Path
from typing import Any

from benchmarks.model import CLOUD, INSTANT
from benchmarks.scenarios import Scenario, _lookups
from benchmarks.systems import check_answer, compiler
from benchmarks.tools import ToolSpec

RESULTS = Path(__file__).parent / "results"


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


async def cpu_per_task(runs: int) -> dict[str, Any]:
    """CPU seconds per run of fan-outs of 1 and 50 instant tasks (see the module doc)."""
    sizes = (1, 50)
    systems = {n: compiler(fanout(n, 0.0)) for n in sizes}
    for n, (wf, _, _) in systems.items():
        await wf.run(user_msg=fanout(n, 0.0).question("warm-up"))
    cpu: dict[int, list[float]] = {n: [] for n in sizes}
    for i in range(runs):
        for n in sizes if i % 2 == 0 else sizes[::-1]:
            wf, _, log = systems[n]
            scenario = fanout(n, 0.0)
            c0 = time.process_time()
            out = await wf.run(user_msg=scenario.question(i))
            cpu[n].append(time.process_time() - c0)
            check_answer(scenario, str(out), "llm-compiler")
            log.take()
    one, fifty = statistics.median(cpu[1]), statistics.median(cpu[50])
    return {
        "runs": runs,
        "cpu_ms_per_run_1_task": round(one * 1e3, 3),
        "cpu_ms_per_run_50_tasks": round(fifty * 1e3, 3),
        "cpu_ms_per_task": round(fifty / 50 * 1e3, 3),
        "cpu_ms_per_added_task": round((fifty - one) / 49 * 1e3, 3),
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
        "cpu_per_task": await cpu_per_task(args.runs),
        "concurrent": await concurrent(args.k, args.batches),
    }
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

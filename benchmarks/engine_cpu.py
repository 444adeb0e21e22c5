"""The engine's own CPU per task, and many runs at once in one process.

Usage: ``python -m benchmarks.engine_cpu [--runs N] [--k K ...] [--batches B] [--profile]
[--what-if] [--without-tokens] [--gc-modes MODE ...] [--not-served] [--only-concurrent]``;
writes ``benchmarks/results/engine_cpu.json`` and prints the K-at-once table.

* **CPU per task**: a fan-out of 50 instant tools (no two calls alike: the engine runs a
  call repeated within a plan once) under an instant scripted model, one run at a time
  (after a warm-up): the process CPU seconds of a run over its 50 tasks, and the
  marginal cost per task ``(CPU(50) - CPU(1)) / 49`` (the run's fixed cost taken out);
  medians of ``--runs`` runs of each size. Three systems take turns run by run: the
  engine; the upstream floor (:mod:`benchmarks.floor`: the engine's step and event
  topology with empty step bodies, on the same llama-index-workflows runtime); and
  LangGraph's LLMCompiler tutorial (:mod:`benchmarks.langgraph_compiler`, in
  ``.venv-langgraph``; skipped without it), whose tasks run one after another, so its
  wall time on an 8-task fan-out of 0.5 s tools is measured too. Garbage collection's
  CPU is measured alongside (``gc.callbacks``).
* **K runs at once** (``--k``, default 50 100 200): K runs of an 8-task fan-out (0.5 s
  tools, the cloud-like latency model of :mod:`benchmarks.model`) started together on one
  instance: p50 and p95 latency over the critical path a run would take alone, CPU and
  garbage collection per run, and the median times of the run's phases; each K in
  ``--batches`` batches in a plain process as it is, as many with its start-up heap
  frozen (``gc.freeze()``), as many after :func:`llm_compiler.tune_for_many_runs`
  (``--gc-modes`` picks among these), and as many through ``llm-compiler serve``'s HTTP
  API (a subprocess that makes the same call; its CPU per run; ``--not-served`` skips
  it), taking turns; the best of each. With ``--without-tokens`` also tuned with
  ``stream_tokens=False``: all that fewer token events could save.
* ``--profile``: pyinstrument over 20 fan-out-50 runs: self time by owner (our code, the
  framework API our steps call, the workflows runtime), by package and by function.
* ``--what-if``: CPU per task of the engine and the floor also with every workflows event
  class given the plain ``_data`` default the project's own events have, taking turns
  with the plain runs (what that upstream change would give; the runtime's per-tick
  state copies stay).

A measurement, not a test: it asserts only that each run answered right. The numbers
depend on the machine and its load; ``os.getloadavg()`` is recorded with them.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks.floor import FloorWorkflow
from benchmarks.model import CLOUD, INSTANT
from benchmarks.scenarios import Scenario, Task
from benchmarks.systems import check_answer, compiler
from benchmarks.tools import ToolSpec
from llm_compiler import LLMCompilerWorkflow, tune_for_many_runs

RESULTS = Path(__file__).parent / "results"
ROOT = Path(__file__).parent.parent
LANGGRAPH_PYTHON = ROOT / ".venv-langgraph" / "bin" / "python"


def fanout(n: int, latency: float, model: Any = INSTANT) -> Scenario:
    """`n` independent lookups of `latency` seconds each, no two alike (the engine runs a
    call repeated within a plan once)."""
    return Scenario(
        f"fanout-{n}",
        f"What are the populations of {n} places?",
        (ToolSpec("lookup", "lookup", latency),),
        tuple(Task(i, "lookup", f"population of place {i}") for i in range(1, n + 1)),
        model=model,
        max_tasks=max(100, n + 1),
    )


@dataclass
class Sample:
    """One run's process CPU and wall seconds (and the CPU seconds of garbage
    collections, where measured)."""

    cpu: float
    wall: float
    gc: float = 0.0


class GcMeter:
    """CPU seconds spent in garbage collections while it is installed (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds, self.full, self._start = 0.0, 0, 0.0

    def __enter__(self) -> GcMeter:
        gc.callbacks.append(self._on)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self._on)

    def _on(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
            return
        self.seconds += time.process_time() - self._start
        self.full += info["generation"] == 2


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
        return Sample(reply["cpu_s"], reply["wall_s"], reply["gc_s"])

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()


async def ours(wf: Any, scenario: Scenario, tag: object) -> Sample:
    """One run of the engine, checked."""
    with GcMeter() as meter:
        c0, t0 = time.process_time(), time.perf_counter()
        out = await wf.run(user_msg=scenario.question(tag))
        sample = Sample(time.process_time() - c0, time.perf_counter() - t0, meter.seconds)
    check_answer(scenario, str(out), "llm-compiler")
    return sample


async def floor(wf: FloorWorkflow) -> Sample:
    """One run of the upstream floor (:mod:`benchmarks.floor`: the engine's step and
    event topology with empty step bodies, no tokens, no state)."""
    with GcMeter() as meter:
        c0, t0 = time.process_time(), time.perf_counter()
        if await wf.run() != "ok":
            raise AssertionError("the floor workflow did not finish")
        return Sample(time.process_time() - c0, time.perf_counter() - t0, meter.seconds)


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
        "gc_ms_per_run_50_tasks": round(statistics.mean(s.gc for s in samples[50]) * 1e3, 3),
    }


async def cpu_per_task(
    runs: int, tutorial: Tutorial | None = None, what_if: bool = False
) -> dict[str, Any]:
    """CPU seconds per run of fan-outs of 1 and 50 instant tasks (see the module doc):
    ours, the upstream floor and, if given, the LangGraph tutorial's, taking turns run
    by run; with `what_if`, the engine and the floor under :func:`plain_event_data` too."""
    sizes = (1, 50)
    systems = {n: compiler(fanout(n, 0.0)) for n in sizes}
    floors = {n: FloorWorkflow(n, timeout=300) for n in sizes}
    for n, (wf, _, _) in systems.items():
        await wf.run(user_msg=fanout(n, 0.0).question("warm-up"))
        await floors[n].run()
        if tutorial is not None:
            await tutorial.run(fanout(n, 0.0), "warm-up")
    names = ("ours", "floor", "tutorial", "ours_what_if", "floor_what_if")
    samples: dict[str, dict[int, list[Sample]]] = {name: {n: [] for n in sizes} for name in names}
    for i in range(runs):
        for n in sizes if i % 2 == 0 else sizes[::-1]:
            wf, _, log = systems[n]
            scenario = fanout(n, 0.0)
            for suffix in ("", "_what_if") if what_if else ("",):
                with plain_event_data() if suffix else nullcontext():
                    samples["ours" + suffix][n].append(await ours(wf, scenario, f"{i}{suffix}"))
                    log.take()
                    samples["floor" + suffix][n].append(await floor(floors[n]))
            if tutorial is not None:
                samples["tutorial"][n].append(await tutorial.run(scenario, i))
    report = per_task(samples["ours"], runs)
    report["upstream_floor"] = per_task(samples["floor"], runs)
    if tutorial is not None:
        report["langgraph_tutorial"] = per_task(samples["tutorial"], runs)
    if what_if:
        report["what_if_plain_event_data"] = {
            "ours": per_task(samples["ours_what_if"], runs),
            "upstream_floor": per_task(samples["floor_what_if"], runs),
        }
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


def _median_since(stamps: list[float], t0: float) -> float:
    return round(statistics.median(stamps) - t0, 3)


async def batch(system: tuple[Any, Any, Any], scenario: Scenario, k: int, tag: str) -> dict:
    """One batch of `k` runs of `scenario` at once on `system` (workflow, LLM, tool log):
    latency over the critical path, p50 and p95; CPU and garbage collection per run; and
    when, in the median, planner calls started, plans ended, tools finished and joiner
    calls started (seconds from the batch's start: where the time went)."""
    wf, llm, log = system
    bound = scenario.compiler_bound().total

    async def one(i: int) -> float:
        t0 = time.perf_counter()
        out = await wf.run(user_msg=scenario.question(f"{tag}-{i}"))
        check_answer(scenario, str(out), "llm-compiler")
        return time.perf_counter() - t0

    llm.records.clear()
    with GcMeter() as meter:
        c0, t0, epoch = time.process_time(), time.perf_counter(), time.time()
        lat = sorted(await asyncio.gather(*(one(i) for i in range(k))))
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
    calls = log.take()
    by_run: dict[str, list[Any]] = {}
    for record in llm.records:  # each run's calls in order: its plan, then its join
        run_tag = record.prompt[record.prompt.rindex("[run ") :].split("]")[0]
        by_run.setdefault(run_tag, []).append(record)
    plans = [r[0] for r in by_run.values()]
    joins = [r[1] for r in by_run.values() if len(r) > 1]
    return {
        "p50_x": round(statistics.median(lat) / bound, 3),
        "p95_x": round(lat[int(0.95 * (len(lat) - 1))] / bound, 3),
        "wall_s": round(wall, 3),
        "cpu_ms_per_run": round(cpu / k * 1e3, 2),
        "gc_ms_per_run": round(meter.seconds / k * 1e3, 2),
        "full_collections": meter.full,
        "cpu_over_critical_path": round(cpu / bound, 2),
        "median_s": {
            "plan_started": _median_since([r.started for r in plans], epoch),
            "plan_streamed": _median_since([r.last_token for r in plans], epoch),
            "tool_finished": _median_since([c.finished for c in calls], epoch),
            "joiner_started": _median_since([r.started for r in joins], epoch),
            "run_ended": round(statistics.median(lat), 3),
        },
    }


#: How a batch of :func:`concurrent` runs: in a plain process with Python's collector as is,
#: with the start-up heap frozen only, or after :func:`llm_compiler.tune_for_many_runs`
#: (what ``llm-compiler serve`` calls at start-up).
GC_MODES = ("as_is", "start_up_heap_frozen", "tuned")


@contextmanager
def gc_mode(mode: str) -> Iterator[None]:
    """While open, the collector as the process is (after a collection), with its heap
    frozen (``gc.freeze()``), or tuned (:func:`llm_compiler.tune_for_many_runs`)."""
    threshold = gc.get_threshold()
    gc.collect()
    if mode == "start_up_heap_frozen":
        gc.freeze()
    elif mode == "tuned":
        tune_for_many_runs()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*threshold)


async def concurrent(
    k: int,
    batches: int,
    without_tokens: bool = False,
    server: Server | None = None,
    gc_modes: tuple[str, ...] = GC_MODES,
) -> dict[str, Any]:
    """K 8-task fan-outs at once (0.5 s tools, cloud-like model), `batches` batches in
    each of :data:`GC_MODES` taking turns (and tuned with ``stream_tokens=False`` if
    `without_tokens`: what no token events at all would save; and through `server`'s
    HTTP API if given): the best batch of each by p50 (see :func:`batch`), and every
    batch's p50."""
    scenario = fanout(8, 0.5, CLOUD)
    modes: dict[str, Any] = {mode: compiler(scenario) for mode in gc_modes}
    if without_tokens:
        system = compiler(scenario)
        system[0].config = system[0].config.model_copy(update={"stream_tokens": False})
        modes["tuned_without_token_events"] = system
    for mode, (wf, _, log) in modes.items():
        await wf.run(user_msg=scenario.question(f"warm-up-{mode}"))
        log.take()
    if server is not None:
        modes["served"] = server
    rows: dict[str, list[dict[str, Any]]] = {mode: [] for mode in modes}
    for b in range(batches):
        for mode in list(modes) if b % 2 == 0 else list(modes)[::-1]:
            tag = f"{k}-{b}-{mode}"
            if mode == "served":
                rows[mode].append(await served_batch(server, scenario, k, tag))  # type: ignore[arg-type]
                continue
            with gc_mode("tuned" if mode.startswith("tuned") else mode):
                rows[mode].append(await batch(modes[mode], scenario, k, tag))
    bound = scenario.compiler_bound()
    alone = {"plan_streamed": round(bound.plan_done or 0.0, 3), "run_ended": round(bound.total, 3)}
    report: dict[str, Any] = {"k": k, "critical_path_s": round(bound.total, 3), "alone_s": alone}
    for mode, done in rows.items():
        best = min(done, key=lambda r: r["p50_x"])
        report[mode] = {**best, "every_p50_x": [r["p50_x"] for r in done]}
    return report


def served_workflow() -> LLMCompilerWorkflow:
    """:func:`concurrent`'s workflow, for ``llm-compiler serve --workflow`` (a factory)."""
    return compiler(fanout(8, 0.5, CLOUD))[0]


class Server:
    """``llm-compiler serve`` of :func:`served_workflow` in a subprocess (which tunes its
    collector with :func:`llm_compiler.tune_for_many_runs` at start-up)."""

    def __init__(self, proc: asyncio.subprocess.Process, url: str) -> None:
        self.proc, self.url = proc, url

    @classmethod
    async def start(cls) -> Server:
        """The server, once it listens on a free loopback port."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            *("-c", "import sys; from llm_compiler.cli import main; sys.exit(main())"),
            *("serve", "--port", "0", "--workflow", "benchmarks.engine_cpu:served_workflow"),
            *("--no-access-log", "--log-level", "warning"),
            cwd=ROOT,
            stdout=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None
        while line := (await proc.stdout.readline()).decode():
            if "Serving the live plan page at " in line:
                url = line.split(" at ", 1)[1].split()[0].rstrip("/")
                asyncio.get_running_loop().create_task(proc.stdout.read())  # drained
                return cls(proc, url)
        raise RuntimeError("llm-compiler serve ended before it listened; see its error above")

    def cpu(self) -> float:
        """The server's CPU seconds so far (Linux ``/proc``)."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    async def stop(self) -> None:
        self.proc.send_signal(signal.SIGINT)
        await self.proc.wait()


async def served_run(client: httpx.AsyncClient, scenario: Scenario, tag: str) -> float:
    """One run through the HTTP API, from its request to its stream's end; checked."""
    t0 = time.perf_counter()
    body = {"start_event": {"user_msg": scenario.question(tag)}}
    r = await client.post("/workflows/compiler/run-nowait", json=body)
    r.raise_for_status()
    params = {"after_sequence": -1}
    last = ""
    async with client.stream("GET", f"/events/{r.json()['handler_id']}", params=params) as s:
        async for line in s.aiter_lines():
            last = line if line.startswith("data: ") else last
    if '"type":"StopEvent"' not in last or scenario.answer() not in last:
        raise AssertionError(f"served run {tag} did not answer right: {last[:300]}")
    return time.perf_counter() - t0


async def served_batch(server: Server, scenario: Scenario, k: int, tag: str) -> dict:
    """K runs at once through the server's HTTP API: latency over the critical path (p50,
    p95) and the server's CPU per run."""
    bound = scenario.compiler_bound().total
    limits = httpx.Limits(max_connections=None, max_keepalive_connections=None)
    async with httpx.AsyncClient(base_url=server.url, timeout=300, limits=limits) as client:
        c0, t0 = server.cpu(), time.perf_counter()
        runs = (served_run(client, scenario, f"{tag}-{i}") for i in range(k))
        lat = sorted(await asyncio.gather(*runs))
        cpu, wall = server.cpu() - c0, time.perf_counter() - t0
    return {
        "p50_x": round(statistics.median(lat) / bound, 3),
        "p95_x": round(lat[int(0.95 * (len(lat) - 1))] / bound, 3),
        "wall_s": round(wall, 3),
        "cpu_ms_per_run": round(cpu / k * 1e3, 2),
    }


async def profile(runs: int = 20) -> str:
    """pyinstrument over `runs` fan-out-50 runs: the top 25 functions by self time."""
    from pyinstrument import Profiler

    from benchmarks.profile import owner_times, self_times

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
    owners = sorted(owner_times(root).items(), key=lambda x: -x[1])
    lines = [f"{s / total:6.1%}  {name}" for name, s in owners] + [""]
    lines += [
        f"{s / total:6.1%}  {name}" for name, s in sorted(groups.items(), key=lambda x: -x[1])
    ]
    lines.append("")
    top = sorted(funcs.items(), key=lambda x: -x[1])[:25]
    lines += [f"{s / total:6.1%}  {name}" for name, s in top]
    return "\n".join(lines)


@contextmanager
def plain_event_data() -> Iterator[int]:
    """While open, every loaded workflows ``Event`` class has a plain ``_data`` default
    instead of ``default_factory=dict`` (measurement only: the what-if of an upstream
    change; pydantic < 2.14 inspects a default factory's signature on every
    construction). Yields how many classes changed; restores them on exit."""
    from pydantic import PrivateAttr
    from workflows.events import Event

    changed, todo = [], [Event]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        attr = cls.__private_attributes__.get("_data")
        if attr is not None and attr.default_factory is not None:
            changed.append((cls, attr))
            cls.__private_attributes__["_data"] = PrivateAttr(default={})  # type: ignore[assignment]
    try:
        yield len(changed)
    finally:
        for cls, attr in changed:
            cls.__private_attributes__["_data"] = attr


def at_once_table(rows: list[dict[str, Any]]) -> str:
    """The K-runs-at-once figures as a Markdown table (in process by collector mode, and
    served)."""
    lines = [
        "| K | how | p50 | p95 | CPU per run | GC per run |",
        "|---:|---|---:|---:|---:|---:|",
    ]
    for row in rows:
        for mode, r in row.items():
            if isinstance(r, dict) and "p50_x" in r:
                gc_ms = f"{r['gc_ms_per_run']} ms" if "gc_ms_per_run" in r else "-"
                lines.append(
                    f"| {row['k']} | {mode} | {r['p50_x']}x | {r['p95_x']}x "
                    f"| {r['cpu_ms_per_run']} ms | {gc_ms} |"
                )
    return "\n".join(lines)


async def per_task_report(report: dict[str, Any], runs: int, what_if: bool) -> None:
    """CPU per task (and the tutorial's wall time, if it runs) into `report`."""
    tutorial = await Tutorial.start()
    try:
        report["cpu_per_task"] = await cpu_per_task(runs, tutorial, what_if)
        if tutorial is not None:
            report["wall_s_fanout_8_tools_0_5s"] = await slow_tools(tutorial)
    finally:
        if tutorial is not None:
            await tutorial.close()


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--k", type=int, nargs="+", default=[50, 100, 200])
    parser.add_argument("--batches", type=int, default=2)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--what-if", action="store_true")
    parser.add_argument("--without-tokens", action="store_true")
    parser.add_argument("--not-served", action="store_true", help="skip the served batches")
    parser.add_argument("--gc-modes", nargs="+", choices=GC_MODES, default=list(GC_MODES))
    parser.add_argument("--only-concurrent", action="store_true", help="skip CPU per task")
    args = parser.parse_args()
    load = os.getloadavg()
    report: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "load_avg_1_5_15": [round(x, 2) for x in load],
        "cpus": os.cpu_count(),
    }
    if not args.only_concurrent:
        await per_task_report(report, args.runs, args.what_if)
    server = None if args.not_served else await Server.start()
    try:
        if server is not None:  # its workflow's first run, as the in-process ones have
            async with httpx.AsyncClient(base_url=server.url, timeout=300) as client:
                await served_run(client, fanout(8, 0.5, CLOUD), "warm-up")
        report["concurrent"] = [
            await concurrent(k, args.batches, args.without_tokens, server, tuple(args.gc_modes))
            for k in args.k
        ]
    finally:
        if server is not None:
            await server.stop()
    report["load_avg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(report, indent=2))
    print(at_once_table(report["concurrent"]))
    if args.profile:
        print(await profile())
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "engine_cpu.json").write_text(json.dumps(report, indent=2) + "\n")


if __name__ == "__main__":
    asyncio.run(main())

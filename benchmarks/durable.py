"""Durable runs: what the journal costs per run and per parallel task, and scale-out.

``python -m benchmarks.durable [--runs N] [--scale-total N]``

Every server is a real ``llm-compiler serve`` process (the memory store too, so all pay the
same HTTP and process costs); Postgres is a throwaway cluster on this machine, once with
``fsync=off`` and once with ``fsync=on`` (every commit flushed, as in production).

* **Cost** (served and in-process): one client runs plans of 1 and of 9 parallel instant
  lookups, one run at a time, round by round: each round runs every store and plan size
  once (each its own server process, or its own runtime in this process), in a rotating
  order, so the drift of a shared machine lands on all alike. Per store, the median run
  latency L(1), L(9); per extra parallel task = (L(9) - L(1)) / 8; per run = L(1) - per
  task. The durable store's extra is its figure minus memory's; the 1-task ratio is L(1) /
  L(1) in memory. In brackets, a 90 % interval of each: a bootstrap over the rounds.
* **CPU per run**, per process: the server's (user + system, from /proc) and, on Postgres,
  the database's (the postmaster and its backends), over the 9-task runs; runs/s per
  core = 1 / (the sum).
* **Scale-out**: tools that sleep (I/O-bound), ``--max-runs`` per worker, many clients:
  runs/s of one worker and of two sharing one Postgres.
* **LangGraph** on the same fan-out, in process, for comparison (``benchmarks/langgraph_pg.py``
  in ``.venv-langgraph``; skipped without it): no checkpointer, ``InMemorySaver`` and
  ``AsyncPostgresSaver`` on both clusters, derived the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import functools
import itertools
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, ExitStack, contextmanager
from pathlib import Path
from typing import IO, Any

import httpx

from benchmarks.costs import WARM_UP, Point, interleave, summarize, table
from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import LLMCall, ScriptedLLM

ROOT = Path(__file__).resolve().parents[1]
FINISH = "Thought: done.\nAction: Finish(all values)"
TICK = os.sysconf("SC_CLK_TCK")


async def fetch(name: str) -> str:
    """A lookup taking ``BENCH_SLEEP`` seconds (0: instant)."""
    await asyncio.sleep(float(os.environ.get("BENCH_SLEEP", "0")))
    return f"value of {name}"


def make(tasks: int | None = None, **options: Any) -> LLMCompilerWorkflow:
    """The served workflow: a plan of ``BENCH_TASKS`` parallel fetches (default 3), of the
    side-effect class ``BENCH_SIDE_EFFECT`` (default ``pure``)."""
    n = tasks if tasks is not None else int(os.environ.get("BENCH_TASKS", "3"))
    lines = [f'{i}. fetch("v{i}")' for i in range(1, n + 1)]
    plan = "\n".join([*lines, f"{n + 1}. join()<END_OF_PLAN>"])

    def reply(call: LLMCall) -> str:
        return FINISH if "Answer a question from the results" in call.prompt else plan

    llm = ScriptedLLM(reply, tokens_per_chunk=4)
    # A lookup is pure; BENCH_SIDE_EFFECT=at_most_once measures the committed start per call.
    side_effect = os.environ.get("BENCH_SIDE_EFFECT", "pure")
    options.setdefault("tool_policies", {"fetch": {"side_effect": side_effect}})
    return LLMCompilerWorkflow(tools=[fetch], llm=llm, max_replans=0, timeout=120, **options)


# ----------------------------------------------------------------------------- CPU


def cpu(pid: int, children: bool = False) -> float:
    """CPU seconds of `pid` (user + system; with reaped children's if `children`)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    used = int(fields[11]) + int(fields[12])
    if children:
        used += int(fields[13]) + int(fields[14])
    return used / TICK


def tree_cpu(pid: int) -> float:
    """CPU seconds of a postmaster, its live backends and those it reaped."""
    total = cpu(pid, children=True)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(stat[1]) == pid:
                total += (int(stat[11]) + int(stat[12])) / TICK
    return total


# ----------------------------------------------------------------------------- servers


@contextmanager
def server(store: str, tasks: int = 3, *extra: str, sleep: float = 0) -> Iterator[tuple[str, int]]:
    """An ``llm-compiler serve`` process of :func:`make`; yields its URL and pid."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "BENCH_TASKS": str(tasks),
        "BENCH_SLEEP": str(sleep),
    }
    cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0", "--store", store]
    cmd += ["--workflow", "benchmarks.durable:make", *extra]
    with serving(cmd, env, f"the server for {store}") as served:
        yield served


@contextmanager
def serving(
    cmd: list[str], env: dict[str, str], name: str, stderr: IO[str] | None = None
) -> Iterator[tuple[str, int]]:
    """`cmd`, an ``llm-compiler serve`` command, run until the block ends (SIGINT, then a
    kill after 30 s); yields its URL and pid once it serves. Its stdout is drained after."""
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Serving the live plan page at " in line:
                threading.Thread(target=proc.stdout.read, daemon=True).start()  # never blocks it
                yield line.split(" at ")[1].split()[0].rstrip("/"), proc.pid
                break
        else:
            raise RuntimeError(f"{name} did not start")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def one_run(client: httpx.AsyncClient, question: str | int) -> None:
    r = await client.post(
        "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": f"q{question}"}}
    )
    r.raise_for_status()
    handler_id = r.json()["handler_id"]
    last = ""
    params = {"after_sequence": -1, "sse": "false"}
    async with client.stream("GET", f"/events/{handler_id}", params=params) as stream:
        async for line in stream.aiter_lines():
            if line.strip():
                last = line
    if '"type":"StopEvent"' not in last.replace(" ", ""):
        raise RuntimeError(f"run {handler_id} did not finish: {last[:200]}")


def served_costs(
    stores: dict[str, tuple[Callable[[int], str], int | None]], runs: int
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """Run latencies of every store's 1- and 9-task server (each its own process and store,
    given by the store's function of the plan size), interleaved; and per store the 9-task
    runs' CPU per run (ms) of the server and of the database (pid None: no database)."""
    with ExitStack() as stack:
        procs = {
            (name, tasks): stack.enter_context(server(spec(tasks), tasks))
            for name, (spec, _) in stores.items()
            for tasks in (1, 9)
        }
        probes = {
            (name, 9): functools.partial(tree_cpu, db_pid)
            for name, (_, db_pid) in stores.items()
            if db_pid
        }
        before = {key: cpu(pid) for key, (_, pid) in procs.items()}

        async def measure() -> tuple[dict[Point, list[float]], dict[Point, float]]:
            async with AsyncExitStack() as clients:
                points: dict[Point, Callable[[str], Awaitable[None]]] = {}
                for key, (url, _) in procs.items():
                    client = await clients.enter_async_context(
                        httpx.AsyncClient(base_url=url, timeout=120)
                    )
                    points[key] = functools.partial(one_run, client)
                return await interleave(points, runs, probes)

        samples, db_cpu = asyncio.run(measure())
        counted = runs + WARM_UP  # the warm-up runs are in the server's CPU, so count them
        cpu_rows = {
            name: {
                "worker_cpu_ms": (cpu(procs[name, 9][1]) - before[name, 9]) * 1000 / counted,
                "db_cpu_ms": db_cpu.get((name, 9), 0.0) * 1000 / runs,
            }
            for name in stores
        }
    rows = summarize(samples)
    for name, extra in cpu_rows.items():
        rows[name].update(extra)
        rows[name]["runs_per_s_per_core"] = 1000 / (extra["worker_cpu_ms"] + extra["db_cpu_ms"])
    return rows, cpu_rows


# ----------------------------------------------------------------------------- in process


async def in_process(
    stores: dict[str, tuple[Callable[[int], str] | None, int | None]], runs: int
) -> dict[str, dict[str, float]]:
    """Run latencies in this process (the memory runtime, or a journal per store and plan
    size, all launched together; a store is its function of the plan size and its database's
    pid), interleaved like the served ones, and the 9-task runs' CPU per run of this
    process and the database. A run's lazy commit (its record, after the answer) is flushed
    before the next run, untimed: in one process it would otherwise land in another store's
    run."""
    from workflows.plugins.basic import BasicRuntime

    from llm_compiler.durable import durable_runtime

    runtimes: list[Any] = []
    points: dict[Point, Callable[[str], Awaitable[None]]] = {}
    settle: dict[Point, Callable[[], Awaitable[None]]] = {}
    for name, (spec, _) in stores.items():
        for tasks in (1, 9):
            runtime: Any = durable_runtime(spec(tasks)) if callable(spec) else BasicRuntime()
            if callable(spec):
                await runtime.launch()
                runtimes.append(runtime)
                settle[name, tasks] = runtime.journal.commit
            wf = make(tasks, runtime=runtime, workflow_name=f"bench{tasks}")
            points[name, tasks] = functools.partial(_local_run, wf)
    try:
        probes = {(name, 9): time.process_time for name in stores}
        samples, used = await interleave(points, runs, probes, settle)
        db_probes = {
            (name, 9): functools.partial(tree_cpu, pid) for name, (_, pid) in stores.items() if pid
        }
        _, db_used = await interleave(
            {key: points[key] for key in db_probes}, runs, db_probes, settle
        )
    finally:
        for runtime in runtimes:
            await runtime.destroy()
    rows = summarize(samples)
    for name in stores:
        worker = used[name, 9] * 1000 / runs
        db = db_used.get((name, 9), 0.0) * 1000 / runs
        rows[name].update(worker_cpu_ms=worker, db_cpu_ms=db)
        rows[name]["runs_per_s_per_core"] = 1000 / (worker + db)
    return rows


async def _local_run(wf: LLMCompilerWorkflow, label: str) -> None:
    await wf.run(user_msg=label, run_id=f"{label}-{time.time_ns()}")


# ----------------------------------------------------------------------------- scale-out


async def throughput(urls: list[str], concurrency: int, total: int) -> float:
    """Completed runs per second with `concurrency` clients spread over `urls`."""
    queue = iter(range(total))
    clients = [httpx.AsyncClient(base_url=u, timeout=300) for u in urls]
    try:

        async def client_loop(client: httpx.AsyncClient) -> None:
            for i in queue:
                await one_run(client, i)

        start = time.perf_counter()
        spread = itertools.islice(itertools.cycle(clients), concurrency)
        await asyncio.gather(*(client_loop(c) for c in spread))
        return total / (time.perf_counter() - start)
    finally:
        for c in clients:
            await c.aclose()


def scale_out(pg: Any, total: int, sleep: float, cap: int, clients: int) -> dict[str, float]:
    """Runs/s of one worker and of two on one Postgres, with tools that sleep."""
    out: dict[str, float] = {}
    for workers in (1, 2):
        db = pg.new_database()
        with ExitStack() as stack:
            urls = [
                stack.enter_context(server(db, 3, "--max-runs", str(cap), sleep=sleep))[0]
                for _ in range(workers)
            ]
            out[f"runs_per_s_{workers}w"] = asyncio.run(throughput(urls, clients, total))
    out["scale_out"] = out["runs_per_s_2w"] / out["runs_per_s_1w"]
    return out


# ----------------------------------------------------------------------------- LangGraph

LANGGRAPH_PYTHON = ROOT / ".venv-langgraph" / "bin" / "python"


def langgraph_rows(dsn_off: str, dsn_on: str, runs: int) -> dict[str, Any]:
    """LangGraph's checkpointers on the same fan-out in process (``benchmarks/langgraph_pg.py``
    in ``.venv-langgraph``, on fresh databases of the fsync off and on clusters): its JSON
    report (``versions``, ``rows`` as :func:`derive` makes them, over LangGraph without a
    checkpointer), or {} without that venv or when the script fails (said in one line)."""
    if not LANGGRAPH_PYTHON.exists():
        print("LangGraph comparison skipped: no .venv-langgraph (make bench-langgraph-venv)")
        return {}
    cmd = [str(LANGGRAPH_PYTHON), "-m", "benchmarks.langgraph_pg"]
    cmd += ["--runs", str(runs), "--dsn", f"fsync off={dsn_off}", "--dsn", f"fsync on={dsn_on}"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        print(f"LangGraph comparison skipped: benchmarks/langgraph_pg.py failed: {last}")
        return {}
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.durable", description=__doc__)
    parser.add_argument("--runs", type=int, default=80, help="runs per latency point")
    parser.add_argument("--scale-total", type=int, default=48, help="runs per scale-out point")
    parser.add_argument("--scale-sleep", type=float, default=2.0, help="tool seconds")
    parser.add_argument("--scale-cap", type=int, default=4, help="--max-runs per worker")
    parser.add_argument("--scale-clients", type=int, default=16)
    parser.add_argument("--only-scale-out", action="store_true", help="skip the cost tables")
    args = parser.parse_args(argv)
    if args.only_scale_out:
        from llm_compiler.durable.cluster import throwaway_postgres

        with throwaway_postgres() as pg:
            scale = scale_out(
                pg, args.scale_total, args.scale_sleep, args.scale_cap, args.scale_clients
            )
        print(json.dumps(scale, indent=2))
        return 0
    from llm_compiler.durable.cluster import throwaway_postgres

    load = os.getloadavg()
    started = datetime.datetime.now(datetime.UTC)
    with (
        tempfile.TemporaryDirectory() as tmp,
        throwaway_postgres() as pg,
        throwaway_postgres(fsync=True) as pg_sync,
    ):
        served, _ = served_costs(
            {
                "memory": (lambda _: "memory", None),
                "SQLite": (lambda tasks: f"sqlite:///{Path(tmp) / f's{tasks}.db'}", None),
                "Postgres, fsync off": (lambda _: pg.new_database(), pg.pid),
                "Postgres, fsync on": (lambda _: pg_sync.new_database(), pg_sync.pid),
            },
            args.runs,
        )
        local = asyncio.run(
            in_process(
                {
                    "memory": (None, None),
                    "SQLite": (lambda tasks: f"sqlite:///{Path(tmp) / f'l{tasks}.db'}", None),
                    "Postgres, fsync off": (lambda _: pg.new_database(), pg.pid),
                    "Postgres, fsync on": (lambda _: pg_sync.new_database(), pg_sync.pid),
                },
                args.runs,
            )
        )
        # LangGraph on the same fan-out, in its own venv (its own table below).
        langgraph = langgraph_rows(pg.new_database(), pg_sync.new_database(), args.runs)
        scale = scale_out(
            pg, args.scale_total, args.scale_sleep, args.scale_cap, args.scale_clients
        )
    print(
        f"Served ({started:%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} cores, "
        f"load {load[0]:.1f}):"
    )
    print(table(served))
    print("\nIn process:")
    print(table(local, "process"))
    print(
        f"\nScale-out ({args.scale_sleep:g} s tools, --max-runs {args.scale_cap}, "
        f"{args.scale_clients} clients): 1 worker {scale['runs_per_s_1w']:.2f} runs/s, "
        f"2 workers {scale['runs_per_s_2w']:.2f} runs/s ({scale['scale_out']:.2f}x)"
    )
    if langgraph:
        versions = ", ".join(f"{k} {v}" for k, v in langgraph["versions"].items())
        print(f"\nLangGraph, same fan-out, in process ({versions}; over no checkpointer):")
        print(table(langgraph["rows"]))
    results = {
        "date": started.isoformat(timespec="minutes"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cores",
        "load_1min_at_start": load[0],
        "served": served,
        "in_process": local,
        "scale_out": scale,
        "langgraph": langgraph,
    }
    out = Path(__file__).parent / "results" / "durable.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

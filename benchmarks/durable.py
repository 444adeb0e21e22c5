"""Durable serving: the cost of checkpointing, and runs/s with SQLite and Postgres workers.

``python -m benchmarks.durable [--total N] [--concurrency C ...]``

Every server is a real ``llm-compiler serve`` process (the memory store too, so all pay the
same HTTP and process costs); Postgres is a throwaway cluster on this machine.

* **Overhead**: one client runs plans of 1 and of 9 parallel short tasks (20 ms I/O each)
  one after another. Per store, the mean run latency L(1), L(9); per task = (L(9) - L(1)) / 8
  (what each extra parallel task adds to a run: ~0 in memory, where they overlap); per
  run = L(1) - per task. Durable overhead = the durable store's figure minus memory's, and
  the ratio of their 1-task run latencies.
* **Throughput**: C clients each start runs (``run-nowait``) and read their SSE streams to
  the end; completed runs per second. With two workers the clients alternate between them.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from llm_compiler import LLMCompilerWorkflow
from llm_compiler.testing import LLMCall, ScriptedLLM

ROOT = Path(__file__).resolve().parents[1]
FINISH = "Thought: done.\nAction: Finish(all values)"


async def fetch(name: str) -> str:
    """A short I/O-bound tool."""
    await asyncio.sleep(0.02)
    return f"value of {name}"


def make() -> LLMCompilerWorkflow:
    """The served workflow: a plan of ``BENCH_TASKS`` parallel fetches (default 3)."""
    n = int(os.environ.get("BENCH_TASKS", "3"))
    lines = [f'{i}. fetch("v{i}")' for i in range(1, n + 1)]
    plan = "\n".join([*lines, f"{n + 1}. join()<END_OF_PLAN>"])

    def reply(call: LLMCall) -> str:
        return FINISH if "Answer a question from the results" in call.prompt else plan

    llm = ScriptedLLM(reply, tokens_per_chunk=4)
    return LLMCompilerWorkflow(tools=[fetch], llm=llm, max_replans=0, timeout=120)


@contextmanager
def server(store: str, tasks: int = 3) -> Iterator[str]:
    """An ``llm-compiler serve`` process of :func:`make`; yields its URL."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "BENCH_TASKS": str(tasks),
    }
    cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0", "--store", store]
    cmd += ["--workflow", "benchmarks.durable:make"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if "Serving the live plan page at " in line:
                yield line.split(" at ")[1].split()[0].rstrip("/")
                break
        else:
            raise RuntimeError(f"the server for {store} did not start")
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def one_run(client: httpx.AsyncClient, i: int) -> None:
    r = await client.post(
        "/workflows/compiler/run-nowait", json={"start_event": {"user_msg": f"q{i}"}}
    )
    r.raise_for_status()
    handler_id = r.json()["handler_id"]
    last = ""
    params = {"after_sequence": -1}
    async with client.stream("GET", f"/events/{handler_id}", params=params) as stream:
        async for line in stream.aiter_lines():
            if line.startswith("data: "):
                last = line
    if '"type":"StopEvent"' not in last:
        raise RuntimeError(f"run {handler_id} did not finish: {last[:200]}")


async def throughput(urls: list[str], concurrency: int, total: int) -> float:
    """Completed runs per second with `concurrency` clients spread over `urls`."""
    queue = iter(range(total))
    clients = [httpx.AsyncClient(base_url=u, timeout=120) for u in urls]
    try:
        await one_run(clients[0], -1)  # warm up (first-run imports and connections)

        async def worker(client: httpx.AsyncClient) -> None:
            for i in queue:
                await one_run(client, i)

        start = time.perf_counter()
        spread = itertools.islice(itertools.cycle(clients), concurrency)
        await asyncio.gather(*(worker(c) for c in spread))
        return total / (time.perf_counter() - start)
    finally:
        for c in clients:
            await c.aclose()


async def latency(url: str, runs: int) -> float:
    """Mean seconds per run, one client, after a warm-up run."""
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:
        await one_run(client, -1)
        start = time.perf_counter()
        for i in range(runs):
            await one_run(client, i)
        return (time.perf_counter() - start) / runs


def overhead(stores: dict[str, str], runs: int) -> dict[str, float]:
    """Per-run and per-task latency per store (ms), and durable minus memory."""
    out: dict[str, float] = {}
    for name, store in stores.items():
        means = {}
        for tasks in (1, 9):
            with server(store, tasks) as url:
                means[tasks] = asyncio.run(latency(url, runs))
        per_task = (means[9] - means[1]) / 8
        out[f"{name}_per_task_ms"] = per_task * 1000
        out[f"{name}_per_run_ms"] = (means[1] - per_task) * 1000
        out[f"{name}_run_latency_ms"] = means[1] * 1000
    for name in stores:
        if name != "memory":
            for what in ("per_task", "per_run"):
                out[f"{name}_{what}_overhead_ms"] = (
                    out[f"{name}_{what}_ms"] - out[f"memory_{what}_ms"]
                )
            out[f"{name}_latency_ratio"] = (
                out[f"{name}_run_latency_ms"] / out["memory_run_latency_ms"]
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.durable", description=__doc__)
    parser.add_argument("--total", type=int, default=60, help="runs per throughput point")
    parser.add_argument("--runs", type=int, default=20, help="runs per latency point")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 10, 30])
    args = parser.parse_args(argv)
    from llm_compiler.durable.cluster import throwaway_postgres

    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp, throwaway_postgres() as pg:
        sqlite = f"sqlite:///{Path(tmp) / 'runs.db'}"
        stores = {"memory": "memory", "sqlite": sqlite, "postgres": pg.new_database()}
        results.update(overhead(stores, args.runs))
        for name in ("sqlite", "postgres"):
            print(
                f"durability ({name}): each extra parallel task adds "
                f"{results[f'{name}_per_task_overhead_ms']:+.1f} ms more than in memory; a "
                f"1-task run takes {results[f'{name}_latency_ratio']:.2f}x the memory store's time"
            )
        setups = {
            "memory": ["memory"],
            "sqlite": [f"sqlite:///{Path(tmp) / 'tp.db'}"],
            "postgres_1w": [pg.new_database()],
        }
        shared = pg.new_database()
        setups["postgres_2w"] = [shared, shared]
        for name, stores_of_workers in setups.items():
            with ExitStack() as stack:
                urls = [stack.enter_context(server(s)) for s in stores_of_workers]
                for c in args.concurrency:
                    rate = asyncio.run(throughput(urls, c, args.total))
                    results[f"throughput_{name}_c{c}"] = rate
                    print(f"server ({name}): {c:>3} concurrent clients -> {rate:.1f} runs/s")
    out = Path(__file__).parent / "results" / "durable.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())

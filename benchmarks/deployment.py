"""Sizing numbers for docs/deployment.md: Postgres connections per worker, runs per second
per core, memory per run in flight. ``python -m benchmarks.deployment``.

Real ``llm-compiler serve`` processes on a throwaway Postgres, serving
``examples.served_scripted`` (a scripted model: no model time, so what is measured is the
server, the engine and the journal).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from llm_compiler.durable.cluster import Cluster, throwaway_postgres

ROOT = Path(__file__).resolve().parents[1]
TICK = os.sysconf("SC_CLK_TCK")


def start(store: str, folder: Path, *args: str, tool_seconds: float = 0.0) -> tuple[Any, str]:
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}",
        "LLM_COMPILER_STORE": store,
        "LLM_COMPILER_WORKFLOW": "examples.served_scripted:make",
        "SCRIPTED_TOOL_SECONDS": str(tool_seconds),
        "LLM_COMPILER_LOG_LEVEL": "warning",
    }
    out = folder / f"out{time.monotonic_ns()}"
    with open(out, "w") as f:
        proc = subprocess.Popen(
            [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0", *args],
            env=env,
            stdout=f,
            stderr=subprocess.DEVNULL,
        )
    while "Serving the live plan page at " not in out.read_text():
        time.sleep(0.05)
    line = next(x for x in out.read_text().splitlines() if "Serving the live" in x)
    return proc, line.split(" at ")[1].split()[0].rstrip("/")


def cpu(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except FileNotFoundError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / TICK


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def postgres_pids(cluster: Cluster) -> list[int]:
    out = subprocess.run(["pgrep", "-P", str(cluster.pid)], capture_output=True, text=True)
    return [cluster.pid, *(int(p) for p in out.stdout.split())]


def connections(database: str) -> int:
    import psycopg

    name = database.rsplit("/", 1)[1]
    with psycopg.connect(database) as db:
        row = db.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
            (name,),
        ).fetchone()
    return int(row[0]) if row else 0


def ask(url: str, question: str = "How warm is it in Oslo?") -> dict:
    r = httpx.post(
        f"{url}/workflows/compiler/run", json={"start_event": {"user_msg": question}}, timeout=120
    )
    r.raise_for_status()
    return dict(r.json())


def main() -> None:
    results: dict[str, object] = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    results["load_before"] = os.getloadavg()[0]
    folder = Path(tempfile.mkdtemp())
    with throwaway_postgres(fsync=True) as cluster:
        # Connections: one worker idle, then under load; then three workers.
        db = cluster.new_database()
        procs = [start(db, folder)]
        ask(procs[0][1])
        results["connections_1_worker_idle"] = connections(db)
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda _: ask(procs[0][1]), range(64)))
        results["connections_1_worker_after_load"] = connections(db)
        # Throughput and CPU per run, one worker.
        n, clients = 300, 16
        pids, pg = [procs[0][0].pid], postgres_pids(cluster)
        cpu0, pg0, t0 = cpu(pids), cpu(pg), time.monotonic()
        with ThreadPoolExecutor(clients) as pool:
            list(pool.map(lambda _: ask(procs[0][1]), range(n)))
        wall = time.monotonic() - t0
        server_cpu, db_cpu = cpu(pids) - cpu0, cpu(postgres_pids(cluster)) - pg0
        results.update(
            runs=n,
            clients=clients,
            runs_per_s=round(n / wall, 1),
            server_cpu_ms_per_run=round(1000 * server_cpu / n, 1),
            db_cpu_ms_per_run=round(1000 * db_cpu / n, 1),
            runs_per_s_per_core=round(n / (server_cpu + db_cpu), 1),
        )
        procs += [start(db, folder), start(db, folder)]
        for _, url in procs[1:]:
            ask(url)
        results["connections_3_workers"] = connections(db)
        for proc, _ in procs:
            proc.terminate()
            proc.wait(60)
        # Memory per run in flight: runs whose tools wait 60 s; the slope between 20 and
        # 220 runs in flight (the first runs also load what any run needs).
        db = cluster.new_database()
        proc, url = start(db, folder, tool_seconds=60)
        body = {"start_event": {"user_msg": "How warm is it in Oslo and Lima?"}}
        sizes = []
        with httpx.Client(base_url=url, timeout=60) as c:
            for count in (20, 200):
                for _ in range(count):
                    c.post("/workflows/compiler/run-nowait", json=body).raise_for_status()
                time.sleep(5)  # every run planned, its tools waiting
                sizes.append(rss_kb(proc.pid))
        results.update(
            rss_20_runs_mb=round(sizes[0] / 1024, 1),
            rss_220_runs_mb=round(sizes[1] / 1024, 1),
            kb_per_run_in_flight=round((sizes[1] - sizes[0]) / 200, 1),
        )
        proc.kill()
        proc.wait(10)
    results["load_after"] = os.getloadavg()[0]
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()

"""Soak: many short runs on two workers while one run waits for a verdict the whole time.

``python -m benchmarks.soak [--runs N] [--concurrency C] [--retain AGE] [--minutes M]``

Two real ``llm-compiler serve`` processes share one throwaway Postgres, with ``--retain``
short and ``--idle-release`` long (the held run stays in its worker's memory). First one run
is started whose plan calls a tool that requires approval; once it waits, N short runs (one
instant lookup each) are spread over both workers, C at a time. After every 500 runs the
benchmark samples each worker's resident memory (``VmRSS``) and the row counts of the
store's tables; then it sends the held run's verdict and checks that the run finishes with
its answer. Results: ``benchmarks/results/soak.json``.

The workflow has no timeout: a run's timeout counts the time it waits for a verdict in
memory (the default 600 s would fail the held run of a long soak).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import re
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx

from benchmarks.durable import fetch, one_run, serving
from llm_compiler import LLMCompilerWorkflow, policy
from llm_compiler.durable.admin import parse_age
from llm_compiler.durable.cluster import throwaway_postgres
from llm_compiler.testing import LLMCall, ScriptedLLM, by_role

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "results" / "soak.json"
HOLD = "soak-held-order"  # the held run's question names it; no other run does
TABLES = ("llmc_runs", "llmc_facts", "llmc_events", "llmc_inbox", "llmc_workers")


@policy(requires_approval=True)
async def confirm(order: str) -> str:
    """Confirm an order (waits for a person's verdict)."""
    return f"confirmed {order}"


def plan(call: LLMCall) -> str:
    """The held run confirms its order; every other run makes one instant lookup."""
    if HOLD in call.prompt.rpartition("Question:")[2]:
        return f'1. confirm("{HOLD}")\n2. join()<END_OF_PLAN>'
    return '1. fetch("v1")\n2. join()<END_OF_PLAN>'


def answer(call: LLMCall) -> str:
    """Finish with the last observation the joiner was shown (the run's own)."""
    said = (re.findall(r"Observation: (.*)", call.prompt) or ["no result"])[-1]
    return f"Thought: done.\nAction: Finish({said})"


def make() -> LLMCompilerWorkflow:
    """The served workflow: a scripted model over `fetch` and `confirm`."""
    llm = ScriptedLLM(by_role(planner=plan, joiner=answer))
    policies = {"fetch": {"side_effect": "pure"}}
    return LLMCompilerWorkflow(
        tools=[fetch, confirm], llm=llm, max_replans=0, timeout=None, tool_policies=policies
    )


# ----------------------------------------------------------------------------- workers


@contextmanager
def worker(store: str, log: Path, *extra: str) -> Iterator[tuple[str, int]]:
    """An ``llm-compiler serve`` process of :func:`make` (stderr to `log`, stdout drained);
    yields its URL and pid."""
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}", "BENCH_SLEEP": "0"}
    cmd = [sys.executable, "-m", "llm_compiler.cli", "serve", "--port", "0", "--store", store]
    cmd += ["--workflow", "benchmarks.soak:make", *extra]
    with log.open("a") as err, serving(cmd, env, f"a worker (see {log})", err) as served:
        yield served


def rss_mb(pid: int) -> float:
    """Resident memory of `pid` in MB (``VmRSS``)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def rows(database: str) -> dict[str, int]:
    """Row counts of the store's tables."""
    import psycopg

    with psycopg.connect(database) as db:
        return {t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}  # type: ignore[index]


# ----------------------------------------------------------------------------- the held run


async def hold(client: httpx.AsyncClient) -> tuple[str, dict[str, Any]]:
    """Start the held run; its handler id and approval request once it waits."""
    body = {"start_event": {"user_msg": f"Please confirm {HOLD}."}}
    r = await client.post("/workflows/compiler/run-nowait", json=body)
    r.raise_for_status()
    handler_id = r.json()["handler_id"]
    params = {"after_sequence": -1, "sse": "false"}
    request: dict[str, Any] = {}
    async with client.stream("GET", f"/events/{handler_id}", params=params) as stream:
        async for line in stream.aiter_lines():
            event = json.loads(line) if line.strip() else {}
            if event.get("type") == "TaskApprovalRequest":
                request = event["value"]
            if event.get("type") == "AwaitingApproval":
                return handler_id, request
    raise RuntimeError(f"the held run {handler_id} never waited for a verdict")


async def release(client: httpx.AsyncClient, handler_id: str, request: dict[str, Any]) -> dict:
    """Send the held run's verdict; its outcome (status before, status and answer after)."""
    before = (await client.get(f"/handlers/{handler_id}")).json().get("status")
    value = {key: request[key] for key in ("run_id", "round", "task_id")}
    verdict = {"event": {"type": "TaskApprovalResponse", "value": {**value, "action": "approve"}}}
    sent = await client.post(f"/events/{handler_id}", json=verdict)
    out: dict[str, Any] = {"status_before": before, "verdict_http": sent.status_code}
    deadline = time.monotonic() + 120
    handler: dict[str, Any] = {"status": "running"}
    while handler.get("status") == "running" and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        handler = (await client.get(f"/handlers/{handler_id}")).json()
    out["verdict_answer"] = sent.text[:300]
    out["status_after"] = handler.get("status")
    try:
        out["answer"] = handler["result"]["value"]["result"]["response"]["blocks"][0]["text"]
    except (KeyError, IndexError, TypeError):
        out["answer"] = None
        out["handler"] = handler
    out["completed"] = out["status_after"] == "completed" and f"confirmed {HOLD}" in str(
        out["answer"]
    )
    return out


# ----------------------------------------------------------------------------- the soak


async def soak(
    database: str, urls: list[str], pids: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    """The held run, the short runs with samples, then the verdict."""
    clients = [httpx.AsyncClient(base_url=u, timeout=300) for u in urls]
    try:
        handler_id, request = await hold(clients[0])
        marks = {*range(args.every, args.runs + 1, args.every), args.runs}
        samples: list[dict[str, Any]] = []
        done, failed = 0, []
        queue = iter(range(args.runs))
        start = time.monotonic()
        deadline = start + args.minutes * 60

        def sample() -> None:
            row = {"runs": done, "seconds": round(time.monotonic() - start, 1)}
            row.update({f"rss_mb_w{i}": round(rss_mb(p), 1) for i, p in enumerate(pids)})
            row.update(rows(database))
            samples.append(row)
            print(json.dumps(row), flush=True)

        sample()
        sample_lock = asyncio.Lock()

        async def client_loop(k: int) -> None:
            nonlocal done
            for i in queue:
                if time.monotonic() > deadline:
                    return
                try:
                    await one_run(clients[(i + k) % len(clients)], i)
                except (httpx.HTTPError, RuntimeError) as e:
                    failed.append(f"{type(e).__name__}: {e}"[:300])
                done += 1
                if done in marks:
                    async with sample_lock:
                        sample()

        await asyncio.gather(*(client_loop(k) for k in range(args.concurrency)))
        elapsed = time.monotonic() - start
        outcome = await release(clients[0], handler_id, request)
        return {
            "runs_done": done,
            "runs_failed": len(failed),
            "failures": failed[:5],
            "seconds": round(elapsed, 1),
            "runs_per_s": round(done / elapsed, 2),
            "samples": samples,
            "held_run": outcome,
            "rows_after_verdict": rows(database),
            "rows_after_retain": await drained(database, args.retain),
        }
    finally:
        for c in clients:
            await c.aclose()


async def drained(database: str, retain: str) -> dict[str, int]:
    """Row counts once every finished run is older than `retain` and a prune interval."""
    await asyncio.sleep(parse_age(retain) * 1.25 + 5)
    return rows(database)


def table(result: dict[str, Any]) -> str:
    """The samples as a text table."""
    cols = ["runs", "seconds", "rss_mb_w0", "rss_mb_w1", *TABLES]
    lines = ["  ".join(f"{c:>12}" for c in cols)]
    for s in result["samples"]:
        lines.append("  ".join(f"{s[c]:>12}" for c in cols))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--concurrency", type=int, default=12)
    p.add_argument("--retain", default="10s", help="the workers' --retain (default: 10s)")
    p.add_argument("--every", type=int, default=500, help="sample after every K runs")
    p.add_argument("--out", type=Path, default=OUT, help=f"results (default: {OUT})")
    p.add_argument("--minutes", type=float, default=40, help="stop starting runs after this")
    args = p.parse_args(argv)
    load = os.getloadavg()
    with throwaway_postgres() as pg, ExitStack() as stack:
        database = pg.new_database()
        log = Path(tempfile.mkdtemp(prefix="soak-")) / "workers.log"
        print(f"workers' logs: {log}", flush=True)
        extra = ("--retain", args.retain, "--idle-release", "3600")
        started = [stack.enter_context(worker(database, log, *extra)) for _ in range(2)]
        result = asyncio.run(soak(database, [u for u, _ in started], [p for _, p in started], args))
    result = {
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores",
        "load_at_start": [round(x, 2) for x in load],
        "load_at_end": [round(x, 2) for x in os.getloadavg()],
        "runs_asked": args.runs,
        "concurrency": args.concurrency,
        "retain": args.retain,
        **result,
    }
    args.out.write_text(json.dumps(result, indent=2) + "\n")
    print(table(result))
    held = result["held_run"]
    print(
        f"{result['runs_done']} runs ({result['runs_failed']} failed) in {result['seconds']} s; "
        f"held run: {held['status_before']} -> {held['status_after']}, answer {held['answer']!r}; "
        f"load {result['load_at_start']} -> {result['load_at_end']}"
    )
    return 0 if held["completed"] and not result["runs_failed"] else 1


if __name__ == "__main__":
    raise SystemExit(main())

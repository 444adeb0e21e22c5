"""Cold and warm first task and answer on the embedded model, interleaved with another tree.

``python -m benchmarks.warm_prompt [--base TREE] [--rounds 3]`` runs, in each round and for
each tree (this one, and `TREE`'s ``src`` if given; the order alternates between rounds),
a child process that starts a fresh embedded server and asks three questions in a row,
each with a new workflow on the demo tools (as a request handler builds one): the first
is cold, the next two find the server as the one before left it. Times run from
``run()`` to the first ``TaskReady`` and to the answer; the server's start is apart.
Where the server reports them (``GET /llm_compiler/timings``), the prompt tokens each
request evaluated are kept. The load average is read before and after every child.
Results: ``benchmarks/results/warm_prompt.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).parent / "results" / "warm_prompt.json"
QUESTIONS = (
    "What are the capitals of France and Japan?",
    "What are the capitals of Spain and Italy?",
    "What are the capitals of France and Japan?",
)
HERE = Path(__file__).resolve().parents[1]


def _server_timings(base_url: str) -> list[dict[str, Any]]:
    """The server's recent completions' timings, or [] where it has none."""
    url = base_url.removesuffix("/v1") + "/llm_compiler/timings"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:  # noqa: S310 - loopback
            recent: list[dict[str, Any]] = json.load(response).get("recent", [])
            return recent
    except (OSError, ValueError):
        return []


async def _ask(llm: Any, question: str) -> dict[str, Any]:
    from llm_compiler import TaskReady
    from llm_compiler.demo import demo_compiler

    workflow = demo_compiler(llm, max_replans=0)
    started = time.perf_counter()
    handler = workflow.run(user_msg=question)
    first = None
    async for ev in handler.stream_events():
        if isinstance(ev, TaskReady) and first is None:
            first = time.perf_counter() - started
    answer = await handler
    return {"question": question, "first_task_s": first, "answer_s": time.perf_counter() - started,
            "answer": str(answer)}  # fmt: skip


async def child() -> dict[str, Any]:
    """One fresh server, three questions in a row."""
    from llm_compiler.models.resolve import embedded_llm
    from llm_compiler.models.server import LocalLLMServer

    server = LocalLLMServer()
    async with embedded_llm(server) as llm:
        started = time.perf_counter()
        await asyncio.to_thread(llm.ensure_started)
        start_s = time.perf_counter() - started
        asked = []
        for question in QUESTIONS:
            seen = len(_server_timings(server.base_url))
            result = await _ask(llm, question)
            result["requests"] = _server_timings(server.base_url)[seen:]
            asked.append(result)
    return {"server_start_s": start_s, "questions": asked}


def run_tree(src: Path) -> dict[str, Any]:
    """:func:`child` with `src` first on the path; the load around it."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    load_before = os.getloadavg()[0]
    out = subprocess.run(
        [sys.executable, str(Path(__file__).resolve()), "--child"],
        env=env, capture_output=True, text=True, check=True, timeout=900,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return {**result, "load_before": load_before, "load_after": os.getloadavg()[0]}


def summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians of the cold question and the two warm ones."""

    def median(key: str, warm: bool) -> float:
        qs = [q for r in runs for q in (r["questions"][1:] if warm else r["questions"][:1])]
        return round(statistics.median(q[key] or float("nan") for q in qs), 2)

    return {
        "cold_first_task_s": median("first_task_s", warm=False),
        "cold_answer_s": median("answer_s", warm=False),
        "warm_first_task_s": median("first_task_s", warm=True),
        "warm_answer_s": median("answer_s", warm=True),
        "server_start_s": round(statistics.median(r["server_start_s"] for r in runs), 2),
    }


def main(trees: dict[str, Path], rounds: int) -> dict[str, Any]:
    """Every tree once per round, the order alternating; medians per tree."""
    labels = list(trees)
    samples: dict[str, list[dict[str, Any]]] = {label: [] for label in labels}
    for r in range(rounds):
        for label in labels if r % 2 == 0 else labels[::-1]:
            result = run_tree(trees[label])
            samples[label].append(result)
            times = [(round(q["first_task_s"] or -1, 1), round(q["answer_s"], 1))
                     for q in result["questions"]]  # fmt: skip
            load = f"{result['load_before']:.1f}->{result['load_after']:.1f}"
            print(f"round {r + 1} {label}: (first task, answer) {times} load {load}", flush=True)
    return {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cores": os.cpu_count(),
            "rounds": rounds, "median": {k: summary(v) for k, v in samples.items()},
            "samples": samples}  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another tree to interleave with (its src/)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child())))
        raise SystemExit(0)
    trees = {"this": HERE / "src"}
    if args.base:
        trees["base"] = args.base.resolve() / "src"
    report = main(trees, args.rounds)
    print(json.dumps(report["median"], indent=1))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")

"""The embedded model server's own speed: prompt and generation tokens/s, first task, answer.

``python -m benchmarks.model_speed`` (needs ``make install-local``) measures the installed
llama.cpp build. ``--build LABEL=SITE_DIR`` (repeatable) measures other builds installed
with ``pip install --target SITE_DIR <wheel>``, side by side in one run: each round runs
every build in turn (the order rotates), so all see the same machine load.

- prompt tokens/s: a ~560-token planner-like prompt that shares no prefix with the one
  before (a fresh number leads it, so llama.cpp's prompt reuse cannot help), one token out;
- generation tokens/s: 96 tokens after a short prompt;
- first task and answer: the demo question on the demo tools, from ``run()`` to the first
  ``TaskReady`` and to the answer (the server is warm; its prompt cache holds the last
  prompt only).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import time
import urllib.request
from pathlib import Path
from typing import Any

from llm_compiler import TaskReady
from llm_compiler.demo import demo_compiler
from llm_compiler.demo import tools as demo_tools
from llm_compiler.models.resolve import embedded_llm
from llm_compiler.models.server import LocalLLMServer

RESULTS = Path(__file__).parent / "results" / "model_speed.json"
QUESTION = "What are the capitals of France and Japan?"
PROMPT = (
    "Write a numbered plan of tool calls; end it with join() and <END_OF_PLAN>.\n"
    "Tools: search(query: str), lookup(name: str, field: str), calculator(expression: str)\n"
    + demo_tools.PLANNER_EXAMPLES
)


def _complete(server: LocalLLMServer, prompt: str, max_tokens: int) -> tuple[float, dict[str, Any]]:
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0}).encode()
    request = urllib.request.Request(
        f"{server.base_url}/completions", body, {"Content-Type": "application/json"}
    )
    started = time.perf_counter()
    with urllib.request.urlopen(request, timeout=300) as response:  # noqa: S310 - loopback
        usage: dict[str, Any] = json.load(response)["usage"]
    return time.perf_counter() - started, usage


def token_speeds(server: LocalLLMServer, nonce: int) -> dict[str, float]:
    """Prompt and generation tokens per second on a started server."""
    seconds, prompt = _complete(server, f"Plan {nonce}.\n{PROMPT}", 1)
    prompt_tps = prompt["prompt_tokens"] / seconds
    short, _ = _complete(server, f"Note {nonce}.", 1)
    seconds, gen = _complete(server, f"Note {nonce}. Count to one hundred: 1, 2, 3,", 96)
    generation_tps = max(gen["completion_tokens"] - 1, 1) / max(seconds - short, 1e-6)
    return {
        "prompt_tokens": prompt["prompt_tokens"],
        "prompt_tps": prompt_tps,
        "generated_tokens": gen["completion_tokens"],
        "generation_tps": generation_tps,
    }


async def demo_times(llm: Any) -> dict[str, float]:
    """Seconds to the first task and to the answer for the demo question."""
    workflow = demo_compiler(llm, max_replans=0)
    started = time.perf_counter()
    handler = workflow.run(user_msg=QUESTION)
    first = None
    async for ev in handler.stream_events():
        if isinstance(ev, TaskReady) and first is None:
            first = time.perf_counter() - started
    answer = await handler
    return {"first_task_s": first or float("nan"), "answer_s": time.perf_counter() - started,
            "answer": str(answer)}  # type: ignore[dict-item]  # fmt: skip


async def measure(site: str | None, nonce: int) -> dict[str, Any]:
    """One round on one build (`site`: its folder, None: the installed one)."""
    saved = os.environ.get("PYTHONPATH")
    if site:
        os.environ["PYTHONPATH"] = site + (os.pathsep + saved if saved else "")
    try:
        async with embedded_llm() as llm:
            await asyncio.to_thread(llm.ensure_started)
            speeds = await asyncio.to_thread(token_speeds, llm.server, nonce)
            return {**speeds, **await demo_times(llm)}
    finally:
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


async def main(builds: dict[str, str | None], rounds: int) -> dict[str, Any]:
    samples: dict[str, list[dict[str, Any]]] = {label: [] for label in builds}
    labels = list(builds)
    for r in range(rounds):
        for label in labels[r % len(labels) :] + labels[: r % len(labels)]:
            result = await measure(builds[label], nonce=r * 100 + labels.index(label))
            samples[label].append(result)
            print(f"round {r + 1} {label}: " + json.dumps(result))
    keys = ("prompt_tps", "generation_tps", "first_task_s", "answer_s")
    summary = {
        label: {k: round(statistics.median(s[k] for s in runs), 2) for k in keys}
        for label, runs in samples.items()
    }
    return {"date": time.strftime("%Y-%m-%d"), "cpu": _cpu(), "cores": os.cpu_count(),
            "load_before": os.getloadavg()[0], "rounds": rounds, "median": summary,
            "samples": samples}  # fmt: skip


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", action="append", default=[], help="LABEL=SITE_DIR")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    builds: dict[str, str | None] = {"installed": None}
    if args.build:
        builds = dict(b.split("=", 1) for b in args.build)  # type: ignore[misc]
    report = asyncio.run(main(builds, args.rounds))
    print(json.dumps(report["median"], indent=1))
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps(report, indent=1) + "\n")

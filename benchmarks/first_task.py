"""Time to first task on the embedded model, with and without llama.cpp's prompt cache.

``python -m benchmarks.first_task`` (needs ``make install-local``): for each server
option set, starts the embedded model, asks a warm-up question, then times further
questions from ``run()`` to the first ``TaskReady``. Each later question's planner
prompt shares the few-shot prefix with the earlier ones, but a joiner call comes between.
Wall times depend on the machine's load; the llama.cpp server's CPU seconds until the
first task (read from /proc, Linux) depend on it much less.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

from llm_compiler import LLMCompilerWorkflow, TaskReady, demo_tools
from llm_compiler.local import LocalLLMServer, local_llm
from llm_compiler.serving.kv import PROMPT_CACHE_ARGS

QUESTIONS = [
    "What is the capital of France?",
    "How much higher is Mount Everest than K2?",
    "What are the capitals of Japan and Nepal?",
    "How long is the Nile?",
    "What is the population of Italy?",
]


def server_cpu() -> float:
    """CPU seconds used so far by this process's llama.cpp server children (0 if unknown)."""
    total = 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        fields = text.rsplit(")", 1)[1].split()
        if int(fields[1]) == os.getpid() and b"_llama_server" in cmdline:
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


async def first_task_times(extra_args: list[str]) -> tuple[list[float], list[float]]:
    """Wall and server CPU seconds to the first task, per question after the warm-up."""
    server = LocalLLMServer(extra_args=extra_args)
    times, cpu = [], []
    async with server:
        wf = LLMCompilerWorkflow(
            tools=demo_tools.TOOLS,
            llm=local_llm(server),
            max_replans=0,
            planner_examples=demo_tools.PLANNER_EXAMPLES,
            joiner_examples=demo_tools.JOINER_EXAMPLES,
            timeout=300,
        )
        for i, question in enumerate(QUESTIONS):
            start, start_cpu = time.perf_counter(), server_cpu()
            handler = wf.run(user_msg=question)
            first = first_cpu = None
            async for ev in handler.stream_events():
                if first is None and isinstance(ev, TaskReady):
                    first, first_cpu = time.perf_counter() - start, server_cpu() - start_cpu
            await handler
            if i and first is not None and first_cpu is not None:
                times.append(first)
                cpu.append(first_cpu)
    return times, cpu


def _join(values: list[float]) -> str:
    return ", ".join(f"{v:.2f}" for v in values)


async def main() -> int:
    for label, args in (("no prompt cache", []), ("prompt cache", PROMPT_CACHE_ARGS)):
        times, cpu = await first_task_times(args)
        print(
            f"{label:16} to first task (questions 2-{len(QUESTIONS)}): "
            f"wall median {statistics.median(times):.2f} s ({_join(times)}); "
            f"server CPU median {statistics.median(cpu):.2f} s ({_join(cpu)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

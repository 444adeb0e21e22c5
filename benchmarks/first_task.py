"""Time to first task on the embedded model, with and without llama.cpp's prompt cache.

``python -m benchmarks.first_task`` (needs ``make install-local``): for each server
option set, starts the embedded model, asks a warm-up question, then times further
questions from ``run()`` to the first ``TaskReady``. Each later question's planner
prompt shares the few-shot prefix with the earlier ones, but a joiner call comes between.
Wall times depend on the machine's load: on a shared machine, compare runs made together.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time

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


async def first_task_times(extra_args: list[str]) -> list[float]:
    """Seconds to the first task for each question after the first (the warm-up)."""
    server = LocalLLMServer(extra_args=extra_args)
    times = []
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
            start = time.perf_counter()
            handler = wf.run(user_msg=question)
            first = None
            async for ev in handler.stream_events():
                if first is None and isinstance(ev, TaskReady):
                    first = time.perf_counter() - start
            await handler
            if i and first is not None:
                times.append(first)
    return times


async def main() -> int:
    for label, args in (("no prompt cache", []), ("prompt cache", PROMPT_CACHE_ARGS)):
        times = await first_task_times(args)
        print(
            f"{label:16} time to first task (questions 2-{len(QUESTIONS)}): "
            f"median {statistics.median(times):.2f} s ({', '.join(f'{t:.2f}' for t in times)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

"""Time to first task on the embedded model, with and without llama.cpp's prompt cache.

``python -m benchmarks.first_task`` (needs ``make install-local``) starts two embedded
model servers, one with :data:`~llm_compiler.serving.kv.PROMPT_CACHE_ARGS`, warms both
with one question, then asks each the same later questions, alternating which goes first
so both see the same machine load. Each later planner prompt shares the few-shot prefix
with the earlier ones, but a joiner call came between. Time to first task runs from
``run()`` to the first ``TaskReady``; decoding is greedy, so both write the same plans.
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
    "How far is Mars from the Sun?",
]


def compiler(server: LocalLLMServer) -> LLMCompilerWorkflow:
    return LLMCompilerWorkflow(
        tools=demo_tools.TOOLS,
        llm=local_llm(server),
        max_replans=0,
        planner_examples=demo_tools.PLANNER_EXAMPLES,
        joiner_examples=demo_tools.JOINER_EXAMPLES,
        timeout=600,
    )


async def first_task(wf: LLMCompilerWorkflow, question: str) -> float | None:
    """Seconds from ``run()`` to the first task (None if no task ran); runs to the end."""
    start = time.perf_counter()
    handler = wf.run(user_msg=question)
    first = None
    async for ev in handler.stream_events():
        if first is None and isinstance(ev, TaskReady):
            first = time.perf_counter() - start
    await handler
    return first


async def main() -> int:
    plain, cached = LocalLLMServer(), LocalLLMServer(extra_args=PROMPT_CACHE_ARGS)
    times: dict[str, list[float]] = {"no prompt cache": [], "prompt cache": []}
    async with plain, cached:
        systems = {"no prompt cache": compiler(plain), "prompt cache": compiler(cached)}
        for i, question in enumerate(QUESTIONS):
            order = list(systems) if i % 2 else list(reversed(systems))
            results = {name: await first_task(systems[name], question) for name in order}
            if i and all(t is not None for t in results.values()):  # question 0 warms up
                for name, t in results.items():
                    times[name].append(t)  # type: ignore[arg-type]
    for name, values in times.items():
        print(
            f"{name:16} time to first task, questions 2-{len(QUESTIONS)}: median "
            f"{statistics.median(values):.2f} s ({', '.join(f'{v:.2f}' for v in values)})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

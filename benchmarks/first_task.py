"""Time to first task on the embedded model, with and without llama.cpp's prompt cache.

``python -m benchmarks.first_task`` (needs ``make install-local``) starts one embedded
model server per configuration (the default; :data:`~llm_compiler.serving.kv.PROMPT_CACHE_ARGS`;
that with one decoding thread), warms each with one question, then asks each the same
later questions, rotating which goes first so all see the same machine load. Each later
planner prompt shares the few-shot prefix with the earlier ones, but a joiner call came
between. Time to first task runs from ``run()`` to the first ``TaskReady``. Decoding is
greedy, but a restored cache can change the last digits of the logits, and so the plan;
the planner characters streamed before the first task are shown to compare like with like.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
from contextlib import AsyncExitStack

from llm_compiler import CompilerStream, LLMCompilerWorkflow, TaskReady
from llm_compiler.demo import tools as demo_tools
from llm_compiler.models import LocalLLMServer, local_llm
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


CONFIGS = {
    "default": [],
    "prompt cache": PROMPT_CACHE_ARGS,
    "prompt cache + 1 decode thread": [*PROMPT_CACHE_ARGS, "--n_threads", "1"],
}


async def first_task(wf: LLMCompilerWorkflow, question: str) -> tuple[float, int] | None:
    """(seconds from ``run()`` to the first task, planner characters streamed by then)."""
    start = time.perf_counter()
    handler = wf.run(user_msg=question)
    first, chars = None, 0
    async for ev in handler.stream_events():
        if first is None and isinstance(ev, CompilerStream):
            chars += len(ev.delta)
        if first is None and isinstance(ev, TaskReady):
            first = time.perf_counter() - start
    await handler
    return None if first is None else (first, chars)


async def main() -> int:
    servers = {name: LocalLLMServer(extra_args=args) for name, args in CONFIGS.items()}
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in CONFIGS}
    async with AsyncExitStack() as stack:
        systems = {
            name: compiler(await stack.enter_async_context(server))
            for name, server in servers.items()
        }
        for i, question in enumerate(QUESTIONS):
            order = list(systems)[i % len(systems) :] + list(systems)[: i % len(systems)]
            got = {name: await first_task(systems[name], question) for name in order}
            if i and all(r is not None for r in got.values()):  # question 0 warms up
                for name, r in got.items():
                    results[name].append(r)  # type: ignore[arg-type]
    for name, values in results.items():
        times = ", ".join(f"{t:.2f} ({c})" for t, c in values)
        print(
            f"{name:30} time to first task: median {statistics.median(t for t, _ in values):.2f} s"
            f"; each s (planner chars): {times}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

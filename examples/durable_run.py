"""A durable run in your own process: kill it (Ctrl-C, kill -9) and run it again: it finishes.

Run: ``.venv/bin/python examples/durable_run.py`` (``make install`` has the ``durable``
extra's packages). The run's facts are journaled in ``durable_run.sqlite`` (next to where
you run it) under the run id ``durable-example``; a second start with the same id is the
same run. Kill the process while tools run (each lookup takes ``DEMO_TOOL_LATENCY`` s,
3 by default) and start it again: the plan and the lookups that finished are not done
again, the ones in flight run once more (they are ``pure``; a tool that declares nothing,
or ``at_most_once``, would be reported "outcome unknown" instead), and the answer comes.
Start it once more after that: the finished run answers at once. ``--fresh`` forgets the old run.

The model comes from the environment like ``make demo`` (OpenAI, an OpenAI-compatible
server, else the embedded model). Every lookup appends ``idempotency_key() tool(args)`` to
``durable_run.calls``, so you can see which calls ran, and how often.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from llm_compiler import (
    LLMCompilerWorkflow,
    PlanEvent,
    TaskReady,
    TaskResult,
    idempotency_key,
    policy,
)
from llm_compiler.demo import tools as demo_tools
from llm_compiler.durable import durable_runtime
from llm_compiler.models.resolve import resolve_llm

QUESTION = "What are the capitals of France, Japan and Italy?"
RUN_ID = "durable-example"
STORE = Path("durable_run.sqlite").absolute()
CALLS = Path("durable_run.calls").absolute()
demo_tools.LATENCY = float(os.environ.get("DEMO_TOOL_LATENCY", "3"))


@policy(side_effect="pure")  # a lookup: run again if a crash cuts it
async def search(query: str) -> str:
    """Search a small offline encyclopedia for a topic; returns a short summary."""
    with CALLS.open("a") as f:
        f.write(f"{idempotency_key()} search({query!r})\n")
    return await demo_tools.search(query)


async def main(question: str) -> int:
    runtime = durable_runtime(f"sqlite:///{STORE}")
    async with resolve_llm() as llm:
        wf = LLMCompilerWorkflow(
            tools=[search, demo_tools.calculator],
            llm=llm,
            runtime=runtime,
            workflow_name="durable_example",  # a stable name: the journal is found by it
            timeout=3600,
        )
        await runtime.launch()  # an unfinished run of a killed process resumes here
        try:
            handler = wf.run(user_msg=question, run_id=RUN_ID)
            async for ev in handler.stream_events():  # live events (a resumed run: from the resume)
                if isinstance(ev, PlanEvent) and ev.complete:
                    print(f"plan: {len(ev.tasks)} task(s)", flush=True)
                elif isinstance(ev, TaskReady):
                    print(f"start {ev.task_id}. {ev.tool_name}{tuple(ev.args.values())}")
                elif isinstance(ev, TaskResult):
                    print(f"done  {ev.task_id}. -> {str(ev.output)[:70]}", flush=True)
            print(f"\nanswer: {await handler}")
        finally:
            await runtime.destroy()
    print(f"\ntool calls, all attempts ({CALLS.name}):\n{CALLS.read_text()}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("question", nargs="?", default=QUESTION)
    parser.add_argument("--fresh", action="store_true", help="forget the journaled run")
    args = parser.parse_args()
    if args.fresh:
        for path in (STORE, CALLS, *STORE.parent.glob(f"{STORE.name}-*")):
            path.unlink(missing_ok=True)
    CALLS.touch()
    sys.exit(asyncio.run(main(args.question)))

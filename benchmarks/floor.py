"""The llama-index workflows runtime's own cost for LLMCompiler's event topology.

``FloorWorkflow`` has the same shape as ``LLMCompilerWorkflow`` with trivial step bodies:
a planner step sends one ``Line`` per task, a single-worker scheduler turns each into a
``Ready`` (``send_event``), a 64-worker executor returns a ``Done`` and the scheduler fans
them in with ``ctx.collect_events``. No state store, prompts, parsing or token events: its
latency per task is the framework's floor for this design.

(No ``from __future__ import annotations`` here: the runtime reads step annotations.)
"""

import asyncio
import time

from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent


class Line(Event):
    """A parsed plan line."""

    i: int


class Ready(Event):
    """A task whose inputs are done."""

    i: int


class Done(Event):
    """A task's result."""

    i: int


class PlanDone(Event):
    """The plan is complete."""

    n: int


class FloorWorkflow(Workflow):
    """LLMCompiler's step and event topology with empty step bodies."""

    def __init__(self, n: int, stream: bool = True, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.n = n
        self.stream = stream

    @step
    async def plan(self, ctx: Context, ev: StartEvent) -> PlanDone | Line:
        """Send one Line per task, yielding to the loop between them (like a stream)."""
        for i in range(self.n):
            await asyncio.sleep(0)
            line = Line(i=i)
            if self.stream:
                ctx.write_event_to_stream(line)
            ctx.send_event(line)
        return PlanDone(n=self.n)

    @step(num_workers=1)
    async def schedule(self, ctx: Context, ev: Line | Done | PlanDone) -> StopEvent | Ready | None:
        """Dispatch each line; stop when the plan and every result are in."""
        if isinstance(ev, Line):
            ready = Ready(i=ev.i)
            if self.stream:
                ctx.write_event_to_stream(ready)
            ctx.send_event(ready)
            return None
        if ctx.collect_events(ev, [PlanDone] + [Done] * self.n) is None:
            return None
        return StopEvent(result="ok")

    @step(num_workers=64)
    async def execute(self, ctx: Context, ev: Ready) -> Done:
        """Run nothing."""
        done = Done(i=ev.i)
        if self.stream:
            ctx.write_event_to_stream(done)
        return done


async def floor_latency(n: int, runs: int = 2) -> float:
    """Best-of-`runs` seconds for one FloorWorkflow run of `n` tasks (after a warm-up)."""
    wf = FloorWorkflow(n, timeout=600)
    await wf.run()
    best = float("inf")
    for _ in range(runs):
        t0 = time.perf_counter()
        handler = wf.run()
        async for _ev in handler.stream_events():
            pass
        await handler
        best = min(best, time.perf_counter() - t0)
    return best

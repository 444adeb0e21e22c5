"""Upstream reproduction: cancelling the awaiter of a workflow handler leaves steps running.

Run: ``python tests/integration/repro_cancel.py`` (llama-index-workflows only; not collected
by pytest). A plain two-step workflow: ``start`` emits an event, ``work`` waits on a gate
that nobody opens. ``asyncio.wait_for(handler, 0.2)`` times out (as does
``task.cancel()`` on a task awaiting the handler), yet ``work`` is never cancelled: it
runs on until the gate opens, and the run's runtime stays alive. Expected: cancelling the
handler's awaiter cancels the run (as ``await handler.cancel_run()`` does).
"""

from __future__ import annotations

import asyncio

from workflows import Context, Workflow, step
from workflows.events import Event, StartEvent, StopEvent


class Go(Event):
    pass


class TwoSteps(Workflow):
    def __init__(self) -> None:
        super().__init__(timeout=None)
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = False
        self.finished = False

    @step
    async def start(self, ev: StartEvent) -> Go:
        return Go()

    @step
    async def work(self, ctx: Context, ev: Go) -> StopEvent:
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled = True
            raise
        self.finished = True
        return StopEvent(result="done")


async def main() -> bool:
    """True if the step was cancelled both ways (the behaviour we expect)."""
    ok = True
    for how in ("wait_for", "task.cancel"):
        wf = TwoSteps()
        handler = wf.run()
        if how == "wait_for":
            try:
                await asyncio.wait_for(handler, 0.2)
            except TimeoutError:
                pass
        else:

            async def awaiter(h=handler) -> object:
                return await h

            task = asyncio.create_task(awaiter())
            await wf.started.wait()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await asyncio.sleep(0.5)  # give a cancellation every chance to arrive
        print(f"{how}: step cancelled={wf.cancelled}, still running={not wf.finished}")
        wf.gate.set()  # let the orphaned step end
        await asyncio.sleep(0.1)
        print(f"{how}: after opening the gate, step finished={wf.finished}")
        ok = ok and wf.cancelled
    return ok


if __name__ == "__main__":
    ok = asyncio.run(main())
    print("OK: cancellation reached the step" if ok else "BUG: the step outlived its awaiter")

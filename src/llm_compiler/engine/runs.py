"""Which runs of a workflow instance are live: cancellation and superseded runs.

llama-index-workflows cancels only a handler's result future when the task awaiting it
is cancelled (``asyncio.wait_for(handler, t)`` timing out, ``task.cancel()``); the run's
steps and tools go on. And a cancelled turn's tools may still report results after the
next question started on the same context, before the new run recorded its id. This
module closes both gaps from our side.
"""

from __future__ import annotations

import asyncio
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from workflows import Context
from workflows.handler import WorkflowHandler

from llm_compiler.events import CompilerStartEvent
from llm_compiler.tools import ToolSet

#: Ids of superseded runs remembered per workflow instance.
RETIRED_RUNS_KEPT = 10_000
#: Cancellations in flight (a task nobody holds may be garbage-collected mid-way).
_CANCELLING: set[asyncio.Task[None]] = set()


class RunRegistry:
    """The last run started on each context, and the runs a newer question superseded."""

    def __init__(self) -> None:
        self._retired: OrderedDict[str, None] = OrderedDict()
        self._last_run: weakref.WeakKeyDictionary[Context, str] = weakref.WeakKeyDictionary()

    def prepare(
        self, ctx: Context | None, start_event: Any, kwargs: dict[str, Any]
    ) -> tuple[str, Any]:
        """Give the run about to start its id (in its start event); retire the run it
        supersedes on `ctx`. Returns the id and the start event to use.

        The id is ``run_id=`` when the caller gives one (a durable runtime starts a run
        once per id, and the same id names the same run after a restart), else new.
        """
        given = kwargs.get("run_id")
        run_id = given if isinstance(given, str) and given else uuid.uuid4().hex
        if start_event is None:
            kwargs["compiler_run_id"] = run_id
        elif isinstance(start_event, CompilerStartEvent):
            run_id = start_event.compiler_run_id or run_id
            start_event = start_event.model_copy(update={"compiler_run_id": run_id})
        if ctx is not None and not ctx.is_running and ctx in self._last_run:
            self._retired[self._last_run[ctx]] = None
            while len(self._retired) > RETIRED_RUNS_KEPT:
                self._retired.popitem(last=False)
        return run_id, start_event

    def started(self, handler: WorkflowHandler, run_id: str, new_turn: bool) -> None:
        """Record the run; cancel it whenever its handler's result future is cancelled."""
        if new_turn:
            self._last_run[handler.ctx] = run_id
        result = getattr(handler, "_result_task", None)  # workflows' private result future
        if isinstance(result, asyncio.Future):
            result.add_done_callback(lambda r: _cancel_if_cancelled(handler, r))

    def retired(self, run_id: str) -> bool:
        """Whether a newer question on the same context superseded `run_id`."""
        return run_id in self._retired


def _cancel_if_cancelled(handler: WorkflowHandler, result: asyncio.Future[Any]) -> None:
    if result.cancelled() and not result.get_loop().is_closed():
        task = result.get_loop().create_task(handler.cancel_run())
        _CANCELLING.add(task)
        task.add_done_callback(_CANCELLING.discard)


class RunTools:
    """Each run's tool set, chosen once per run and kept by run id (a memo: the names
    are in the run's state, and a process that resumes the run rebuilds the set once)."""

    def __init__(self, kept: int = 1024) -> None:
        self.kept = kept
        self._sets: OrderedDict[str, asyncio.Future[ToolSet]] = OrderedDict()

    async def get(self, run_id: str, build: Callable[[], Awaitable[ToolSet]]) -> ToolSet:
        """The tools of `run_id`, built by `build` the first time (once, however many
        steps ask at the same time)."""
        future = self._sets.get(run_id)
        if future is None or (future.done() and (future.cancelled() or future.exception())):
            future = asyncio.ensure_future(build())
            self._sets[run_id] = future
            while len(self._sets) > self.kept:
                self._sets.popitem(last=False)
        self._sets.move_to_end(run_id)
        return await asyncio.shield(future)

    def put(self, run_id: str, tools: ToolSet) -> None:
        """Record the tools a run was started with."""
        future: asyncio.Future[ToolSet] = asyncio.get_running_loop().create_future()
        future.set_result(tools)
        self._sets[run_id] = future
        self._sets.move_to_end(run_id)
        while len(self._sets) > self.kept:
            self._sets.popitem(last=False)

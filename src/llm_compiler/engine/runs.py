"""Which runs of a workflow instance are live: cancellation and superseded runs.

llama-index-workflows (2.26) ends a run when the task awaiting its handler is cancelled
(``asyncio.wait_for(handler, t)`` timing out, ``task.cancel()``), but the step tasks it
started in its last scheduling pass are not yet tracked, so their tools go on (two of
three tools cancelled, the third ran to completion). And a cancelled turn's tools may
still report results after the next question started on the same context, before the
new run recorded its id. This module closes both gaps from our side, on public APIs
only: each run's tool calls are tracked here and cancelled when its result settles in
any way but success, and the run is then cancelled through ``handler.cancel_run()``.

Upstream cause (workflows 2.26.1, ``runtime/control_loop/runner.py``): step tasks started
by ``adapter.wait_for_next_task`` join ``worker_tasks`` only after that call returns, so a
cancellation during the wait leaves them out of ``cleanup_tasks``. No upstream issue
exists for it yet; ``tests/engine/test_hostile_cancel.py`` reproduces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

from workflows import Context
from workflows.handler import WorkflowHandler

from llm_compiler.events import CompilerStartEvent
from llm_compiler.tools import ToolSet

#: Ids of superseded runs remembered per workflow instance.
RETIRED_RUNS_KEPT = 10_000


class RunRegistry:
    """The last run started on each context, and the runs a newer question superseded."""

    def __init__(self) -> None:
        self._retired: OrderedDict[str, None] = OrderedDict()
        self._last_run: weakref.WeakKeyDictionary[Context, str] = weakref.WeakKeyDictionary()
        self._tool_calls: dict[str, set[asyncio.Task[Any]]] = {}
        # Watchers and cancellations in flight (a task nobody holds may be collected).
        self._live: set[asyncio.Future[Any]] = set()

    def prepare(
        self, ctx: Context | None, start_event: Any, kwargs: dict[str, Any]
    ) -> tuple[str, Any]:
        """Give the run about to start its id (in its start event); retire the run it
        supersedes on `ctx`. Returns the id and the start event to use.

        The id is ``run_id=`` when the caller gives one (a durable runtime starts a run
        once per id, and the same id names the same run after a restart), else new; a new
        one is passed on as ``run_id=`` too, so ``handler.run_id`` (and the ``run_id`` a
        workflow server answers) is the id every event of the run carries. One run, one id.
        """
        given = kwargs.get("run_id")
        run_id = given if isinstance(given, str) and given else uuid.uuid4().hex
        kwargs["run_id"] = run_id
        if start_event is None:
            kwargs["compiler_run_id"] = run_id
        elif isinstance(start_event, CompilerStartEvent):
            start_event = start_event.model_copy(update={"compiler_run_id": run_id})
        if ctx is not None and not ctx.is_running and ctx in self._last_run:
            self._retired[self._last_run[ctx]] = None
            while len(self._retired) > RETIRED_RUNS_KEPT:
                self._retired.popitem(last=False)
        return run_id, start_event

    def started(self, handler: WorkflowHandler, run_id: str, new_turn: bool) -> None:
        """Record the run; when it ends other than by finishing, cancel its tools."""
        if new_turn:
            self._last_run[handler.ctx] = run_id
        watch = asyncio.ensure_future(handler.stop_event_result())
        self._live.add(watch)
        watch.add_done_callback(lambda w: self._ended(handler, run_id, w))

    @contextlib.contextmanager
    def tool_call(self, run_id: str) -> Iterator[None]:
        """Mark the current task as running a tool of `run_id` while the block runs."""
        task = asyncio.current_task()
        calls = self._tool_calls.setdefault(run_id, set())
        if task is not None:
            calls.add(task)
        try:
            yield
        finally:
            calls.discard(task)
            if not calls:
                self._tool_calls.pop(run_id, None)

    def calls_in_flight(self) -> set[asyncio.Task[Any]]:
        """The tasks running a tool call now, of every run."""
        return {t for calls in self._tool_calls.values() for t in calls}

    def _ended(self, handler: WorkflowHandler, run_id: str, watch: asyncio.Future[Any]) -> None:
        self._live.discard(watch)
        failed = watch.cancelled() or watch.exception() is not None
        if not failed:
            return
        for task in self._tool_calls.pop(run_id, ()):
            task.cancel()
        if watch.cancelled() and not watch.get_loop().is_closed():
            # The awaiter gave up: end the run itself too, if it still goes on.
            cancel = watch.get_loop().create_task(handler.cancel_run())
            self._live.add(cancel)
            cancel.add_done_callback(self._live.discard)

    def retired(self, run_id: str) -> bool:
        """Whether a newer question on the same context superseded `run_id`."""
        return run_id in self._retired


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

    def known(self, run_id: str) -> ToolSet | None:
        """The tools of `run_id` if this process has them already (nothing is built)."""
        future = self._sets.get(run_id)
        if future is None or not future.done() or future.cancelled() or future.exception():
            return None
        return future.result()

    def put(self, run_id: str, tools: ToolSet) -> None:
        """Record the tools a run was started with."""
        future: asyncio.Future[ToolSet] = asyncio.get_running_loop().create_future()
        future.set_result(tools)
        self._sets[run_id] = future
        self._sets.move_to_end(run_id)
        while len(self._sets) > self.kept:
            self._sets.popitem(last=False)


class StartedCalls:
    """The tasks whose call a live run started, by the run's state store (one per run
    context): a task's call starts once per run, however many ``TaskReady`` name it (a
    resumed run's and the scheduler's, say). A run resumed from a snapshot in a new
    context starts its calls in flight again."""

    def __init__(self) -> None:
        self._runs: weakref.WeakKeyDictionary[Any, set[int]] = weakref.WeakKeyDictionary()

    def take(self, store: Any, task_id: int) -> bool:
        """Mark `task_id` started in the run of `store`; False if it was already."""
        started = self._runs.setdefault(store, set())
        if task_id in started:
            return False
        started.add(task_id)
        return True

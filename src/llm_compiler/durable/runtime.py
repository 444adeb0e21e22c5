"""The server runtime over DBOS: worker liveness at launch, resume marks in run streams."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING
from weakref import WeakValueDictionary

from llama_agents.client.protocol.serializable_events import EventEnvelopeWithMetadata
from llama_agents.dbos.runtime import DBOSWorkflowStore
from llama_agents.server import AbstractWorkflowStore
from llama_agents.server._store.abstract_workflow_store import StoredEvent
from typing_extensions import override
from workflows.events import Event
from workflows.runtime.runtime_decorators import (
    BaseInternalRunAdapterDecorator,
    BaseRuntimeDecorator,
)
from workflows.runtime.types.plugin import InternalRunAdapter, WaitResult
from workflows.runtime.types.ticks import WorkflowTick
from workflows.workflow import Workflow

from llm_compiler.durable.events import RunResumed

if TYPE_CHECKING:
    from llama_agents.dbos import DBOSRuntime
    from workflows.runtime.types.named_task import NamedTask, PendingStart
    from workflows.runtime.types.plugin import Runtime, WaitForNextTaskResult

    from llm_compiler.durable.backend import Durable

logger = logging.getLogger(__name__)
SEEN_RUNS = 10_000


class _EventDrivenStore(DBOSWorkflowStore):  # type: ignore[misc]  # untyped upstream
    """llama-agents-dbos's lazy store proxy, also delegating ``subscribe_events``.

    The 0.7.0 proxy inherits the base class's polling ``subscribe_events`` (a query per
    second), so event streams lagged up to a second behind the run; the Postgres store
    it wraps wakes subscribers on LISTEN/NOTIFY, the SQLite one on its own writes.
    """

    @override
    async def subscribe_events(
        self, run_id: str, after_sequence: int = -1
    ) -> AsyncIterator[StoredEvent]:
        async for event in self._resolve().subscribe_events(run_id, after_sequence):
            yield event


def event_driven_store(runtime: DBOSRuntime) -> AbstractWorkflowStore:
    """The runtime's workflow store, installed as an event-driven one (idempotent)."""
    store = runtime.create_workflow_store()
    if isinstance(store, _EventDrivenStore):
        return store
    assert isinstance(store, DBOSWorkflowStore)
    # The runtime caches the store it builds; replace the cached proxy (same factory)
    # before anything else captures it.
    fixed = _EventDrivenStore(store._factory)
    runtime._workflow_store = fixed
    return fixed


class WorkerRuntime(BaseRuntimeDecorator):
    """Outermost runtime of a durable server: joins the workers at launch, leaves at destroy,
    and marks each resumed run's stream with a :class:`RunResumed` event."""

    def __init__(self, decorated: Runtime, *, durable: Durable) -> None:
        super().__init__(decorated)
        self._durable = durable
        # Runs this process has run a step of (bounded): only the first adapter of a run
        # in a process can be a resume (steps of one run each get an adapter).
        self._seen: OrderedDict[str, None] = OrderedDict()
        self._unchecked: set[str] = set()

    @override
    async def launch(self) -> None:
        await super().launch()
        if self._durable.liveness is not None:
            await self._durable.liveness.start()

    @override
    async def destroy(self) -> None:
        try:
            await super().destroy()
        finally:
            # Last: other workers adopt this one's runs once its liveness lock is gone.
            if self._durable.liveness is not None:
                await self._durable.liveness.stop()

    @override
    def get_internal_adapter(self, workflow: Workflow) -> InternalRunAdapter:
        inner = super().get_internal_adapter(workflow)
        if inner.run_id not in self._seen:
            self._seen[inner.run_id] = None
            self._unchecked.add(inner.run_id)
            if len(self._seen) > SEEN_RUNS:
                self._seen.popitem(last=False)
        return _ResumeMarking(_WallClock(inner), self)

    async def mark_if_resumed(self, run_id: str) -> None:
        """Append :class:`RunResumed` to `run_id`'s stream if this process takes it up with
        history (once per run and process: a fresh run has no events yet)."""
        if run_id not in self._unchecked:
            return
        self._unchecked.discard(run_id)
        store = self._durable.store
        events = await store.query_events(run_id)
        if not events:
            return
        mark = RunResumed(worker=self._durable.worker, after_sequence=events[-1].sequence)
        await store.append_event(run_id, EventEnvelopeWithMetadata.from_event(mark))
        logger.info("Resumed run %s on worker %s", run_id, self._durable.worker)


class _WallClock(BaseInternalRunAdapterDecorator):
    """Reads the time from the clock, not as a DBOS step; writes a run's stream in turn.

    llama-agents-dbos 0.7.0 reads the time as a synchronous DBOS step: two database round
    trips on the event loop, several per tick (measured: a third of a durable run's CPU).
    The clock suffices: the control loop only schedules timeouts with it, and a resumed
    run's alive-time budget is carried by its session-start ticks.

    DBOS appends to a stream at the next free offset; two writes of one run at once (the
    control loop's and parallel steps') collide and the loser sleeps 100 ms before it
    retries. One write per run at a time in this process avoids that (a 9-task run on
    Postgres spent 114 ms in one write).
    """

    def __init__(
        self, decorated: InternalRunAdapter, stream_lock: asyncio.Lock | None = None
    ) -> None:
        super().__init__(decorated)
        self._stream_lock = stream_lock

    @override
    async def get_now(self) -> float:
        return time.time()

    @override
    async def write_to_event_stream(self, event: Event) -> None:
        if self._stream_lock is None:  # served runs: the server's store takes the events
            await super().write_to_event_stream(event)
            return
        async with self._stream_lock:
            await super().write_to_event_stream(event)


class WallClockRuntime(BaseRuntimeDecorator):
    """A DBOS runtime whose runs read the time from the clock and write their streams in
    turn (see :class:`_WallClock`)."""

    def __init__(self, decorated: Runtime) -> None:
        super().__init__(decorated)
        self._stream_locks: WeakValueDictionary[str, asyncio.Lock] = WeakValueDictionary()

    @override
    def get_internal_adapter(self, workflow: Workflow) -> InternalRunAdapter:
        inner = super().get_internal_adapter(workflow)
        lock = self._stream_locks.get(inner.run_id)
        if lock is None:
            lock = self._stream_locks[inner.run_id] = asyncio.Lock()
        return _WallClock(inner, lock)


class _ResumeMarking(BaseInternalRunAdapterDecorator):
    """Lets :meth:`WorkerRuntime.mark_if_resumed` run before the run's first async call."""

    def __init__(self, decorated: InternalRunAdapter, runtime: WorkerRuntime) -> None:
        super().__init__(decorated)
        self._runtime = runtime

    async def _mark(self) -> None:
        await self._runtime.mark_if_resumed(self.run_id)

    @override
    async def write_to_event_stream(self, event: Event) -> None:
        await self._mark()
        await super().write_to_event_stream(event)

    @override
    async def get_now(self) -> float:
        await self._mark()
        return await super().get_now()

    @override
    async def wait_receive(self, timeout_seconds: float | None = None) -> WaitResult:
        await self._mark()
        return await super().wait_receive(timeout_seconds)

    @override
    async def on_tick(self, tick: WorkflowTick) -> None:
        await self._mark()
        await super().on_tick(tick)

    @override
    async def wait_for_next_task(
        self, running: list[NamedTask], pending: list[PendingStart], timeout: float | None = None
    ) -> WaitForNextTaskResult:
        await self._mark()
        return await super().wait_for_next_task(running, pending, timeout)

"""Durable runs in your own process: :func:`durable_runtime`.

``wf.run(user_msg=..., run_id=X)`` on this runtime looks ``X`` up in the journal first: a
new id is claimed in the store with its start (:meth:`.Durable.admit`), so of several
callers, in any process on the store, one starts the run and the others await that run;
the id of an unfinished run resumes it (nothing recorded runs again), or is awaited while
another process holds it; the id of a finished run answers from the journal at once. While
the store does not answer, a run is refused at once (:class:`~llm_compiler.errors.Unavailable`).
``launch()`` resumes the runs a dead process left unfinished (on Postgres, those of dead
processes only).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncGenerator, Awaitable
from typing import Any

from typing_extensions import override
from workflows.context.state_store import StateStore
from workflows.errors import WorkflowRuntimeError
from workflows.events import Event, StopEvent
from workflows.runtime.types.plugin import ExternalRunAdapter, V2RuntimeCompatibilityShim
from workflows.runtime.types.ticks import WorkflowTick

from llm_compiler.durable.backend import QUEUE_CHANNEL, Durable, prepare
from llm_compiler.durable.config import CONNECT_TIMEOUT
from llm_compiler.durable.journal import EVENTS_CHANNEL, Journal, RunRecord
from llm_compiler.durable.runtime import JournalRuntime, RunRequest

logger = logging.getLogger(__name__)


class LocalRuntime(JournalRuntime):
    """A :class:`JournalRuntime` that resumes runs by id (see the module)."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.durable: Durable | None = None
        self.active: set[str] = set()
        self.records: dict[str, RunRecord] = {}

    def _backend(self) -> Durable:
        if self.durable is None:
            raise RuntimeError("This runtime was not made by durable_runtime().")
        return self.durable

    @override
    async def launch(self) -> None:
        durable = self._backend()
        await durable.start()
        await super().launch()
        for record in await durable.claim(None):
            workflow = self.workflows.get(record.workflow)
            if workflow is None:  # another program's run: leave it to that program
                await durable.let_go(record.run_id)
                continue
            self.records[record.run_id] = record
            await self.resume(record.run_id, workflow)

    @override
    async def destroy(self) -> None:
        try:
            await super().destroy()
        finally:
            await self._backend().stop()

    @override
    def route(self, request: RunRequest) -> ExternalRunAdapter | None:
        run_id = request.run_id
        if run_id in self.active:
            return self.get_external_adapter(run_id)
        if request.start_event is None:  # a resume (or a context carried on): run it
            self.active.add(run_id)
            return None
        return _Deferred(self, run_id, self._open(request))

    async def _open(self, request: RunRequest) -> ExternalRunAdapter:
        """A new id is claimed in the store (one caller of any runtime wins and runs it);
        an unfinished run is taken and resumed here, or followed to its end while another
        worker holds it; a finished one answers from its journal."""
        run_id, workflow = request.run_id, request.workflow
        durable = self._backend()
        durable.gate()
        record = await self.journal.record(run_id)
        if record is None and run_id not in self.active:
            if await self._create(request):
                return self.run_here(request)
            record = await self.journal.record(run_id)
        while True:
            if run_id in self.active:
                return self.get_external_adapter(run_id)
            if record is None:
                raise WorkflowRuntimeError(f"Run {run_id} was deleted as it started.")
            if record.status in ("failed", "cancelled"):
                raise WorkflowRuntimeError(f"Run {run_id} {record.status}: {record.error or ''}")
            if record.status != "running":
                break
            taken = await durable.take(run_id)
            if taken is not None:
                record = taken
                break
            record = await self._held_elsewhere(run_id, record)
        if record.status != "running":  # finished: replayed to its recorded answer
            self.journal.hold(run_id, record.epoch)  # (which it writes again unchanged)
        self.records[run_id] = record
        await self.resume(run_id, workflow)
        return self.get_external_adapter(run_id)

    async def _create(self, request: RunRequest) -> bool:
        """Claim `request`'s new run id, held here at epoch 1; whether this call won it."""
        run_id, workflow = request.run_id, request.workflow
        assert request.start_event is not None
        start = workflow.runtime.get_serializer(workflow).serialize(request.start_event)
        record = RunRecord(run_id, run_id, workflow.workflow_name, owner=self._backend().worker)
        record.epoch = 1
        if not await self._backend().admit(record, start):
            return False
        self.records[run_id] = record
        self.active.add(run_id)
        return True

    async def _held_elsewhere(self, run_id: str, record: RunRecord) -> RunRecord | None:
        """Wait until `run_id`, which another worker holds, ends or is let go (its end and
        a release are announced on Postgres); its row then."""
        if self._backend().spec.kind != "postgres":
            raise WorkflowRuntimeError(f"Run {run_id} is held by worker {record.owner}.")
        import asyncpg

        changed = asyncio.Event()

        def heard(conn: object, pid: int, channel: str, payload: str) -> None:
            if channel == QUEUE_CHANNEL or payload == '"*"' or run_id in json.loads(payload):
                changed.set()

        conn = await asyncpg.connect(self._backend().spec.url, timeout=CONNECT_TIMEOUT)
        try:
            await conn.add_listener(EVENTS_CHANNEL, heard)
            await conn.add_listener(QUEUE_CHANNEL, heard)
            while True:
                changed.clear()
                found = await self.journal.record(run_id)
                if found is None or found.status != "running" or found.owner is None:
                    return found
                await changed.wait()
        finally:
            await conn.close()

    @override
    def finished(self, run_id: str, outcome: asyncio.Future[Any]) -> None:
        self.active.discard(run_id)
        record = self.records.pop(run_id, None)
        if record is None or outcome.cancelled():
            return
        error = outcome.exception()
        record.status = "completed" if error is None else "failed"
        record.completed_at = record.updated_at = time.time()
        record.error = None if error is None else f"{type(error).__name__}: {error}"
        # Not a commit of its own: the answer is committed already, and a run found
        # "running" with its answer recorded resumes straight to that answer.
        self.journal.put_run(record, lazy=True)
        self.journal.let_go(run_id)

    def fenced(self, run_id: str) -> None:
        """Another worker took `run_id` over: it stops here at once."""
        self.active.discard(run_id)
        self.records.pop(run_id, None)
        JournalRuntime.stop_here(self, run_id)


class _Deferred(ExternalRunAdapter, V2RuntimeCompatibilityShim):
    """The adapter of a run whose journal is being read (every call waits for it)."""

    def __init__(
        self, runtime: LocalRuntime, run_id: str, opened: Awaitable[ExternalRunAdapter]
    ) -> None:
        self._runtime, self._run_id = runtime, run_id
        self._task = asyncio.ensure_future(opened)

    @property
    def run_id(self) -> str:
        return self._run_id

    async def _inner(self) -> ExternalRunAdapter:
        return await asyncio.shield(self._task)

    async def send_event(self, tick: WorkflowTick) -> None:
        await (await self._inner()).send_event(tick)

    async def stream_published_events(self) -> AsyncGenerator[Event, None]:
        async for event in (await self._inner()).stream_published_events():
            yield event

    async def close(self) -> None:
        await (await self._inner()).close()

    async def get_result(self) -> StopEvent:
        return await (await self._inner()).get_result()

    async def cancel(self) -> None:
        await (await self._inner()).cancel()

    def get_state_store(self, namespace: tuple[str, ...] = ()) -> StateStore[Any] | None:
        return None if namespace else self._runtime.state_of(self._run_id)

    def _ready(self) -> Any:
        if not self._task.done() or self._task.cancelled() or self._task.exception():
            return None
        return self._task.result()

    def get_result_or_none(self) -> StopEvent | None:
        inner = self._ready()
        return None if inner is None else inner.get_result_or_none()

    @property
    def is_running(self) -> bool:
        inner = self._ready()
        return not self._task.done() if inner is None else bool(inner.is_running)

    def abort(self) -> None:
        inner = self._ready()
        if inner is not None:
            inner.abort()
        else:
            self._task.cancel()


def durable_runtime(database_url: str, *, worker: str | None = None) -> LocalRuntime:
    """A runtime whose runs survive the process, kept in `database_url` (``sqlite:///path``
    or ``postgresql://...``). Call ``await runtime.launch()`` before the first run and
    ``await runtime.destroy()`` at the end.

    One process per SQLite file (a second is refused); any number on Postgres.

    Raises:
        ConfigurationError: The extra is not installed, the URL is not SQLite or Postgres,
            or another process uses the SQLite file.
    """
    durable = prepare(database_url, worker=worker, runtime=LocalRuntime)
    assert isinstance(durable.runtime, LocalRuntime)
    durable.runtime.durable = durable
    durable.journal.on_fenced = durable.runtime.fenced
    return durable.runtime

"""Served durable runs: the workflow store over the journal, and the server's runtime.

:class:`JournalStore` is the ``AbstractWorkflowStore`` ``WorkflowServer`` keeps runs in:
handler records are ``llmc_runs`` rows, a run's stream is ``llmc_events`` (numbered by
the one worker that holds the run, so concurrent appends of one run never collide; held
in memory for live readers and group-committed), its state is the journaled state store
of :mod:`.runtime` (or, for a run held elsewhere or finished, the fold of its facts). Its
readers see an event once it is committed (never one a crash or a takeover could still
take back), so a client reconnecting with ``Last-Event-ID`` gets exactly the run's history.

:class:`ServedRuntime` claims the runs nobody holds (at start, when a worker died, when
there is room under ``--max-runs``), resumes them with a :class:`RunResumed` mark on their
stream, and carries events and cancels to runs through ``llmc_inbox`` (woken with
NOTIFY): an event is handed to the run's current owner in a transaction that checks its
epoch (one drain per run at a time, in order) and leaves the inbox with the owner's first
commit after the run took it in; a takeover before that hands it to the next owner. A
run waiting for input leaves memory after ``idle_release`` seconds; the next event sent
to it, through any worker, loads it again (and a run released while an event waited for
it is claimed).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from llama_agents.client.protocol.serializable_events import EventEnvelopeWithMetadata
from llama_agents.server import AbstractWorkflowStore, HandlerQuery, PersistentHandler
from typing_extensions import override
from workflows.context.serializers import BaseSerializer, JsonSerializer
from workflows.context.state_store import (
    InMemoryStateStore,
    StateRecord,
    StateStore,
    StateStoreFacade,
)
from workflows.events import Event, StopEvent, WorkflowIdleEvent
from workflows.runtime.runtime_decorators import BaseInternalRunAdapterDecorator
from workflows.runtime.types.plugin import ExternalRunAdapter, InternalRunAdapter
from workflows.runtime.types.ticks import (
    TickAddEvent,
    TickCancelRun,
    TickStepResult,
    WorkflowTick,
)
from workflows.workflow import Workflow

from llm_compiler._upstream import StoredEvent, StoredTick, decode_persistent_handler
from llm_compiler.durable.backend import Durable, prepare
from llm_compiler.durable.config import IDLE_RELEASE, OUTAGE_LIMIT
from llm_compiler.durable.events import RunResumed
from llm_compiler.durable.facts import Row, fold
from llm_compiler.durable.journal import EVENTS_CHANNEL, Journal, RunRecord
from llm_compiler.durable.runtime import JournalRuntime, RunRequest, _RunHandle
from llm_compiler.durable.spec import StoreSpec
from llm_compiler.engine.state import CompilerState

logger = logging.getLogger(__name__)

INBOX_CHANNEL = "llmc_inbox"
_HANDLERS = (
    "SELECT handler_id, workflow, status, run_id, error, result, started_at, updated_at,"
    " completed_at, idle_since FROM llmc_runs"
)
#: Hands the run's inbox to its owner: the rows not handed to it yet are marked taken at
#: its epoch, only while the run's row holds that epoch (``{lock}``: ``FOR SHARE`` on
#: Postgres, so a takeover waits for it). A row stays until the owner's commit that
#: follows the run's taking the event in (:meth:`~.journal.Journal.took`): an owner taken
#: for dead before that hands it on, to the next owner (a higher epoch).
_DRAIN = (
    "WITH own AS (SELECT run_id, epoch FROM llmc_runs WHERE run_id = ? AND epoch = ?{lock})"
    " UPDATE llmc_inbox SET taken = (SELECT epoch FROM own) WHERE run_id IN"
    " (SELECT run_id FROM own) AND (taken IS NULL OR taken < (SELECT epoch FROM own))"
    " RETURNING id, body"
)


def _stamp(seconds: float | None) -> datetime | None:
    return None if seconds is None else _at(seconds)


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def _seconds(at: datetime | None) -> float | None:
    return None if at is None else at.timestamp()


class _Folded:
    """Read-only state storage: the fold of a run's facts (a run held elsewhere, or done)."""

    def __init__(self, journal: Journal, run_id: str) -> None:
        self.journal, self.run_id = journal, run_id

    async def load(self) -> StateRecord | None:
        state = fold(await self.journal.rows(self.run_id))
        return None if state is None else StateRecord(data=state)

    async def save(self, record: StateRecord) -> None:
        raise RuntimeError(f"Run {self.run_id} is not held by this worker: its state is read-only.")

    def session(self) -> Any:
        from contextlib import asynccontextmanager

        @asynccontextmanager
        async def own() -> AsyncIterator[_Folded]:
            yield self

        return own()


class JournalStore(AbstractWorkflowStore):
    """Handlers, streams and states of served runs, kept in the journal (see the module)."""

    def __init__(self, durable: Durable) -> None:
        super().__init__()
        self.durable = durable
        self.journal = durable.journal
        self.held: dict[str, PersistentHandler] = {}
        """Handlers of the runs this worker holds."""
        self._events: dict[str, list[StoredEvent]] = {}
        self._next: dict[str, int] = {}
        self._committed: dict[str, int] = {}
        self._gone: set[str] = set()
        self._changed: dict[str, asyncio.Event] = {}
        self._queued: set[str] = set()
        """New runs admitted to wait in the database, whose handler is not written yet."""

    @property
    def runtime(self) -> ServedRuntime:
        assert isinstance(self.durable.runtime, ServedRuntime)
        return self.durable.runtime

    # ------------------------------------------------------------------ state

    @override
    def create_state_store(
        self,
        run_id: str,
        state_type: type[Any] | None = None,
        serialized_state: dict[str, Any] | None = None,
        serializer: BaseSerializer | None = None,
        namespace: tuple[str, ...] = (),
    ) -> StateStore[Any]:
        if namespace:
            return InMemoryStateStore(state_type() if state_type else CompilerState())
        if self.journal.stale(run_id):  # an incarnation over here: it reads, never writes
            return StateStoreFacade(_Folded(self.journal, run_id), state_type or CompilerState)
        live = self.runtime.state_of(run_id)
        if live is None and serialized_state is not None:
            live = self.runtime.state_store(run_id, state_type)
        if live is None and run_id in self.runtime.holding:
            live = self.runtime.held_state(run_id)  # (raises: never a read-only stand-in)
        if live is None:
            return StateStoreFacade(_Folded(self.journal, run_id), state_type or CompilerState)
        if serialized_state and serialized_state.get("state_data") is not None:
            live.add_seed(serialized_state, serializer or JsonSerializer())
        return live

    @override
    def _build_state_store(
        self,
        run_id: str,
        namespace: tuple[str, ...],
        state_type: type[Any] | None,
        serializer: BaseSerializer | None,
    ) -> StateStoreFacade[Any]:
        return StateStoreFacade(_Folded(self.journal, run_id), state_type or CompilerState)

    # ------------------------------------------------------------------ handlers

    @override
    async def query(self, query: HandlerQuery) -> list[PersistentHandler]:
        local = self._held_match(query)
        if local is not None:
            return local
        where, args = [], []
        for column, values in (
            ("handler_id", query.handler_id_in),
            ("run_id", query.run_id_in),
            ("workflow", query.workflow_name_in),
            ("status", query.status_in),
        ):
            if values is not None:
                if not values:
                    return []
                where.append(f"{column} IN ({', '.join('?' for _ in values)})")
                args += list(values)
        if query.is_idle is not None:
            where.append(f"idle_since IS {'NOT ' if query.is_idle else ''}NULL")
        sql = _HANDLERS + (" WHERE " + " AND ".join(where) if where else "")
        rows = await self.journal.fetch(sql + " ORDER BY started_at DESC LIMIT 1000", *args)
        return [self._handler(row) for row in rows]

    async def newest(
        self, names: Sequence[str], count: int, before: tuple[float, str] | None = None
    ) -> list[PersistentHandler]:
        """The newest `count` runs of the workflows `names`, newest first, that started
        before `before` (the start time and handler id of the last run of the page before;
        the time is read from that run's row when it exists, so the float's round trip
        through a cursor cannot skip or repeat a run). One indexed query."""
        if not names or count < 1:
            return []
        sql = _HANDLERS + f" WHERE workflow IN ({', '.join('?' for _ in names)})"
        args: list[Any] = list(names)
        if before is not None:
            at = "COALESCE((SELECT started_at FROM llmc_runs WHERE handler_id = ?), ?)"
            sql += f" AND (started_at < {at} OR (started_at = {at} AND handler_id < ?))"
            args += [before[1], before[0], before[1], before[0], before[1]]
        sql += " ORDER BY started_at DESC, handler_id DESC LIMIT ?"
        rows = await self.journal.fetch(sql, *args, count)
        return [self._handler(row) for row in rows]

    def _held_match(self, query: HandlerQuery) -> list[PersistentHandler] | None:
        """The answer from the runs held here, if the query names only such runs."""
        if query.handler_id_in and not (query.run_id_in or query.workflow_name_in):
            found = [h for h in self.held.values() if h.handler_id in query.handler_id_in]
        elif query.run_id_in and not (query.handler_id_in or query.workflow_name_in):
            found = [self.held[r] for r in query.run_id_in if r in self.held]
        else:
            return None
        wanted = query.handler_id_in or query.run_id_in or []
        if len(found) != len(wanted) or query.status_in is not None or query.is_idle is not None:
            return None
        return [h.model_copy() for h in found]

    def _handler(self, row: tuple[Any, ...]) -> PersistentHandler:
        handler_id, workflow, status, run_id, error, result, started, updated, done, idle = row
        data = {
            "handler_id": handler_id,
            "workflow_name": workflow,
            "status": status,
            "run_id": run_id,
            "error": error,
            "result": json.loads(result) if result else None,
            "started_at": _stamp(started),
            "updated_at": _stamp(updated),
            "completed_at": _stamp(done),
            "idle_since": _stamp(idle),
        }
        return decode_persistent_handler(data, self.result_decoder)

    async def admit(self, run_id: str, handler_id: str, workflow: str, start: str) -> bool:
        """Claim a new run (:meth:`.Durable.admit`): held here if there is room, else it
        waits in the database for a worker; whether this call won the ids (else a run has
        `handler_id` already).

        Raises:
            Unavailable: The store does not answer.
        """
        held = self.runtime.reserve(run_id)
        owner, epoch = (self.durable.worker, 1) if held else (None, 0)
        record = RunRecord(run_id, handler_id, workflow, owner=owner, epoch=epoch)
        try:
            won = await self.durable.admit(record, start)
        except BaseException:
            self.runtime.holding.discard(run_id)
            raise
        if not won:
            self.runtime.holding.discard(run_id)
        elif not held:
            self._queued.add(run_id)
        return won

    @override
    async def update(self, handler: PersistentHandler) -> None:
        if handler.run_id is None:
            raise ValueError("A served run's handler needs a run id.")
        run_id = handler.run_id
        if run_id in self._queued:  # admitted to wait in the database: its row stands
            self._queued.discard(run_id)
            return
        epoch = self.journal.epochs.get(run_id)
        if epoch is None:
            raise RuntimeError(f"Run {run_id} was not admitted: new runs come in by admit().")
        self.held[run_id] = handler
        self._put(handler, owner=self.durable.worker, epoch=epoch)
        # Not awaited: its row and start were committed when it was admitted.

    def _put(self, handler: PersistentHandler, owner: str | None = None, epoch: int = 0) -> None:
        assert handler.run_id is not None
        dumped = handler.model_dump(mode="json")
        result = dumped.get("result")
        record = RunRecord(
            handler.run_id,
            handler.handler_id,
            handler.workflow_name,
            status=handler.status,
            owner=owner,
            result=None if result is None else json.dumps(result),
            error=handler.error,
            started_at=_seconds(handler.started_at) or time.time(),
            updated_at=_seconds(handler.updated_at),
            completed_at=_seconds(handler.completed_at),
            idle_since=_seconds(handler.idle_since),
            epoch=epoch,
        )
        self.journal.put_run(record)

    @override
    async def update_handler_status(
        self,
        run_id: str,
        *,
        status: Any = None,
        result: StopEvent | None = None,
        error: str | None = None,
        idle_since: Any = "unset",
    ) -> None:
        if self.journal.stale(run_id):  # the end of an incarnation over here: not the run's
            return
        handler = self.held.get(run_id)
        if handler is None:
            found = await self.query(HandlerQuery(run_id_in=[run_id]))
            if not found:
                return
            handler = self.held[run_id] = found[0]
        now = datetime.now(UTC)
        handler.updated_at = now
        if status is not None:
            handler.status = status
            if status in ("completed", "failed", "cancelled"):
                handler.completed_at = now
        if result is not None:
            handler.result = result
        if error is not None:
            handler.error = error
        if idle_since != "unset":
            handler.idle_since = idle_since
        if handler.status != "running":
            self.runtime.took_in(run_id, None)  # its end records what it was handed
        self._put(handler)
        if handler.status != "running":  # not awaited: committed with the event written
            self.held.pop(run_id, None)  # next, the run's last (its end and its stream's
            self.journal.let_go(run_id)  # end stand or fall together)

    @override
    async def delete(self, query: HandlerQuery) -> int:
        found = await self.query(query)
        for handler in found:
            for table in ("llmc_facts", "llmc_events", "llmc_inbox", "llmc_runs"):
                await self.journal.fetch(f"DELETE FROM {table} WHERE run_id = ?", handler.run_id)
        return len(found)

    # ------------------------------------------------------------------ events

    async def open_stream(self, run_id: str) -> None:
        """Number this run's next event after those in the journal (a run taken up here)."""
        rows = await self.journal.fetch("SELECT max(seq) FROM llmc_events WHERE run_id = ?", run_id)
        last = rows[0][0] if rows and rows[0][0] is not None else -1
        self._gone.discard(run_id)
        self._events.pop(run_id, None)
        self._next[run_id] = int(last) + 1
        self._committed[run_id] = int(last)

    def forget_stream(self, run_id: str) -> None:
        """Another worker holds `run_id` now: its events queued here are not its history
        (never committed, never shown); its readers read the journal from now on."""
        self._gone.add(run_id)
        for kept in (self._events, self._next, self._committed):
            kept.pop(run_id, None)
        self.changed(run_id)
        asyncio.get_running_loop().call_later(60.0, self._gone.discard, run_id)

    @override
    async def append_event(self, run_id: str, event: EventEnvelopeWithMetadata) -> None:
        if run_id in self._gone or self.journal.stale(run_id):
            return  # the run stopped here: another incarnation writes its stream
        seq = self._next.get(run_id, 0)
        self._next[run_id] = seq + 1
        at = time.time()
        stored = StoredEvent(run_id=run_id, sequence=seq, timestamp=_at(at), event=event)
        self._events.setdefault(run_id, []).append(stored)
        self.journal.put_event(run_id, seq, at, event.model_dump_json())
        terminal = self._is_terminal_event(stored)
        if seq == 0 or terminal:  # a stream begins (a resume then knows the run ran), or
            self.journal.commit_soon()  # ends: its readers see it once committed
        if terminal:
            self._next.pop(run_id, None)
            asyncio.get_running_loop().call_later(60.0, self._forget_events, run_id)

    def _forget_events(self, run_id: str) -> None:
        self._events.pop(run_id, None)
        self._committed.pop(run_id, None)

    def changed(self, run_id: str) -> None:
        """Wake the readers of `run_id`'s stream."""
        signal = self._changed.pop(run_id, None)
        if signal is not None:
            signal.set()

    def wake_all(self) -> None:
        """Wake every reader (events of any run may have been committed meanwhile)."""
        for run_id in list(self._changed):
            self.changed(run_id)

    def on_committed(self, runs: list[str]) -> None:
        """Events of `runs` were committed by a worker (Postgres NOTIFY)."""
        for run_id in runs:
            self.changed(run_id)

    def on_local_commit(self, last: dict[str, int]) -> None:
        """This worker committed events of runs up to the given sequence numbers: their
        readers may see them now."""
        for run_id, seq in last.items():
            if run_id in self._events and seq > self._committed.get(run_id, -1):
                self._committed[run_id] = seq
            self.changed(run_id)

    @override
    async def query_events(
        self, run_id: str, after_sequence: int | None = None, limit: int | None = None
    ) -> list[StoredEvent]:
        after = -1 if after_sequence is None else after_sequence
        committed = self._committed.get(run_id, -1)
        local = [e for e in self._events.get(run_id, []) if after < e.sequence <= committed]
        first_local = local[0].sequence if local else None
        rows = []
        if first_local is None or first_local > after + 1:
            rows = await self.journal.events(run_id, after)
        out = [
            StoredEvent(
                run_id=run_id,
                sequence=seq,
                timestamp=_at(at),
                event=EventEnvelopeWithMetadata.model_validate_json(body),
            )
            for seq, at, body in rows
            if first_local is None or seq < first_local
        ]
        out += local
        return out if limit is None else out[:limit]

    @override
    async def subscribe_events(
        self, run_id: str, after_sequence: int = -1
    ) -> AsyncIterator[StoredEvent]:
        cursor = after_sequence
        while True:
            signal = self._changed.setdefault(run_id, asyncio.Event())
            events = await self.query_events(run_id, after_sequence=cursor)
            for event in events:
                yield event
                cursor = event.sequence
                if self._is_terminal_event(event):
                    return
            if not events:
                await signal.wait()

    @override
    async def append_tick(self, run_id: str, tick_data: dict[str, Any]) -> None:
        return None  # runs resume from their facts, not from ticks

    @override
    async def get_ticks(self, run_id: str) -> list[StoredTick]:
        return []

    async def mark_resumed(self, run_id: str, ran: bool) -> None:
        """Number the run's stream on, and mark it with :class:`RunResumed` if it `ran`
        before (a run that waited in the queue starts, it does not resume)."""
        await self.open_stream(run_id)
        after = self._next.get(run_id, 0) - 1
        if not ran and after < 0:
            return
        mark = RunResumed(worker=self.durable.worker, after_sequence=after)
        await self.append_event(run_id, EventEnvelopeWithMetadata.from_event(mark))
        logger.info("Resumed run %s on worker %s", run_id, self.durable.worker)


class RemoteRun(ExternalRunAdapter):
    """A run this worker does not hold: events and cancels go through ``llmc_inbox`` to
    the worker that does (or this worker takes the run up, if nobody holds it)."""

    def __init__(self, runtime: ServedRuntime, run_id: str) -> None:
        self._runtime, self._run_id = runtime, run_id

    @property
    def run_id(self) -> str:
        return self._run_id

    async def send_event(self, tick: WorkflowTick) -> None:
        await self._runtime.deliver(self._run_id, tick)

    async def stream_published_events(self) -> Any:
        store = self._runtime.store
        async for stored in store.subscribe_events(self._run_id):
            yield stored.event.load_event()

    async def get_result(self) -> StopEvent:
        store = self._runtime.store
        async for _ in store.subscribe_events(self._run_id):
            pass
        found = await store.query(HandlerQuery(run_id_in=[self._run_id]))
        if found and found[0].status == "completed" and found[0].result is not None:
            return found[0].result
        from workflows.errors import WorkflowCancelledByUser, WorkflowRuntimeError

        if found and found[0].status == "cancelled":
            raise WorkflowCancelledByUser()
        raise WorkflowRuntimeError(found[0].error if found else f"No run {self._run_id}.")


class _HeldRun(_RunHandle):
    """A run held here, as a client sees it: what a client sends it goes through the inbox
    (:meth:`ServedRuntime.deliver`), so a takeover before the run recorded it loses none."""

    _runtime: ServedRuntime

    @override
    async def send_event(self, tick: WorkflowTick) -> None:
        targeted = isinstance(tick, TickAddEvent) and tick.step_id is not None
        if targeted or not isinstance(tick, (TickAddEvent, TickCancelRun)):
            await super().send_event(tick)  # (the inbox keeps no step)
            return
        await self._runtime.deliver(self.run_id, tick)


class ServedRuntime(JournalRuntime):
    """The runtime of a durable server: claims, resumes, idle release, remote runs."""

    def __init__(self, journal: Journal) -> None:
        super().__init__(journal)
        self.durable: Durable | None = None
        self.max_runs: int | None = None
        self.retain: float | None = None
        """Seconds a finished run's rows are kept (None: for ever)."""
        self.holding: set[str] = set()
        self._claiming: asyncio.Task[None] | None = None
        self._again = False
        self._listener: Any = None
        self._idle: dict[str, asyncio.TimerHandle] = {}
        self._quiet: set[str] = set()
        self._drains: dict[str, asyncio.Lock] = {}
        self._handed: dict[str, dict[int, Event | None]] = {}
        """Per run held here: the inbox rows handed to it whose event it has not taken in
        yet (None: a cancel, taken in when the run ends)."""
        self._store: JournalStore | None = None
        self.claims_stopped = False
        self._leased: asyncio.Future[None] | None = None

    @property
    def backend(self) -> Durable:
        assert self.durable is not None, "made by open_durable()"
        return self.durable

    @property
    def store(self) -> JournalStore:
        """The workflow store of this server's runs."""
        if self._store is None:
            self._store = JournalStore(self.backend)
            self.on_resume = self._store.mark_resumed
            self.journal.on_events = self._store.on_local_commit
            self.journal.on_fenced = self.fenced
        return self._store

    # ------------------------------------------------------------------ lifecycle

    @override
    async def launch(self) -> None:
        _ = self.store  # wired to the journal before anything is committed
        await self.backend.start()
        await super().launch()
        if self.backend.spec.kind == "postgres":
            await self._listen()
        if self.retain is not None:
            self._spawn(self._prune_forever(self.retain))
        self.on_room()

    async def _prune_forever(self, retain: float) -> None:
        """Delete finished runs older than `retain` now, then every quarter of it (at most
        hourly): a maintenance schedule, not a poll (nothing announces a run aging)."""
        from llm_compiler.durable.backend import prune

        while True:
            try:
                gone = await prune(self.journal, retain)
                if gone:
                    logger.info("Deleted %d finished run(s) older than %g s.", gone, retain)
            except Exception as e:
                logger.warning("Pruning finished runs failed (%s); trying again later.", e)
            await asyncio.sleep(min(retain / 4, 3600.0))

    @override
    async def destroy(self) -> None:
        self.stop_claiming()
        if self._leased is not None:
            self._leased.cancel()
        for handle in self._idle.values():
            handle.cancel()
        if self._claiming is not None:
            self._claiming.cancel()
        if self._listener is not None:
            self._listener.terminate()
            self._listener = None
        try:
            await super().destroy()
        finally:
            await self.backend.stop()

    async def _listen(self) -> None:
        import asyncpg

        from llm_compiler.durable.backend import QUEUE_CHANNEL
        from llm_compiler.durable.config import CONNECT_TIMEOUT

        conn = await asyncpg.connect(self.backend.spec.url, timeout=CONNECT_TIMEOUT)
        await conn.add_listener(EVENTS_CHANNEL, self._on_events)
        await conn.add_listener(INBOX_CHANNEL, self._on_inbox)
        await conn.add_listener(QUEUE_CHANNEL, lambda *_: self.on_room())
        conn.add_termination_listener(self._on_listener_lost)
        self._listener = conn

    def _on_events(self, conn: object, pid: int, channel: str, payload: str) -> None:
        runs = json.loads(payload)
        if runs == "*":
            self.store.wake_all()
        else:
            self.store.on_committed(runs)

    def _on_inbox(self, conn: object, pid: int, channel: str, run_id: str) -> None:
        if run_id in self.holding:
            self._spawn(self.drain(run_id))

    def _on_listener_lost(self, conn: object) -> None:
        if self._listener is conn:
            self._listener = None
            self._spawn(self._relisten())

    async def _relisten(self) -> None:
        await self.journal.retrying(self._listen)
        self.store.wake_all()
        for run_id in list(self.holding):
            await self.drain(run_id)
        self.on_room()

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._live.add(task)
        task.add_done_callback(self._live.discard)

    # ------------------------------------------------------------------ room and claims

    def stop_claiming(self) -> None:
        """Take no more runs (draining or stopping): queued runs and events for runs not
        held here wait in the database for another worker (a draining worker's admission
        refuses new starts: :mod:`llm_compiler.serving.admission`)."""
        self.claims_stopped = True

    def room(self) -> int | None:
        """How many more runs this worker may hold (None: no cap); 0 while its
        liveness lock is away: a run it took then would have nobody to release it if it
        died (once the lock is back, it claims again)."""
        if self.claims_stopped:
            return 0
        if not self.lease.is_set():
            if self._leased is None:
                self._leased = asyncio.ensure_future(self._claim_when_leased())
            return 0
        return None if self.max_runs is None else self.max_runs - len(self.holding)

    async def _claim_when_leased(self) -> None:
        try:
            await self.lease.wait()
        finally:
            self._leased = None
        self.on_room()

    def reserve(self, run_id: str) -> bool:
        """Hold a new run here if there is room (else it waits in the queue)."""
        room = self.room()
        if room is not None and room <= 0:
            return False
        self.holding.add(run_id)
        return True

    def on_room(self) -> None:
        """Claim the runs nobody holds that there is room for (one claim at a time)."""
        if self.claims_stopped:
            return
        if self._claiming is not None:
            self._again = True
            return
        self._claiming = asyncio.get_running_loop().create_task(self._claim())

    async def _claim(self) -> None:
        try:
            while True:
                self._again = False
                for record in await self.backend.claim(self.room()):
                    try:
                        await self._take_up(record)
                    except Exception:  # the others are taken up all the same
                        logger.exception("Taking up run %s failed", record.run_id)
                if not self._again:
                    return
        except Exception:
            logger.exception("Claiming runs failed; the next wake-up tries again.")
        finally:
            self._claiming = None

    async def _take_up(self, record: RunRecord) -> None:
        workflow = self.workflows.get(record.workflow)
        if workflow is None:
            logger.warning(
                "Run %s is of workflow %s, not served here.", record.run_id, record.workflow
            )
            await self.backend.let_go(record.run_id)
            return
        if record.run_id in self.holding:  # taken from this worker, then claimed back: the
            self._stop(record.run_id)  # old incarnation stops, all it does now is dropped
        self.holding.add(record.run_id)
        try:
            await self.resume(record.run_id, workflow)
        except Exception as e:
            logger.exception("Run %s could not be resumed", record.run_id)
            self.holding.discard(record.run_id)
            await self.store.update_handler_status(record.run_id, status="failed", error=str(e))
            return
        await self.drain(record.run_id)

    @override
    def finished(self, run_id: str, outcome: asyncio.Future[Any]) -> None:
        self._drains.pop(run_id, None)
        self._handed.pop(run_id, None)
        if run_id in self.holding:
            self.holding.discard(run_id)
            if self.max_runs is not None:  # room for a run waiting in the queue
                self.on_room()

    def fenced(self, run_id: str) -> None:
        """Another worker holds `run_id` now (a write of it was refused): it stops here."""
        self._stop(run_id)
        if self.max_runs is not None:
            self.on_room()

    def _stop(self, run_id: str) -> None:
        """Stop this process's incarnation of `run_id` at once (what it was handed and did
        not take in is handed to its next owner)."""
        self.holding.discard(run_id)
        self._handed.pop(run_id, None)
        self.store.held.pop(run_id, None)
        self._touch(run_id)
        self.stop_here(run_id)
        self.store.forget_stream(run_id)

    # ------------------------------------------------------------------ runs

    @override
    def route(self, request: RunRequest) -> ExternalRunAdapter | None:
        run_id, start_event = request.run_id, request.start_event
        if run_id in self.holding:
            return None
        if start_event is not None:  # no room here: the start waits in the queue
            workflow = request.workflow
            body = workflow.runtime.get_serializer(workflow).serialize(start_event)
            self.journal.put(run_id, Row("start", "", body))
            self._spawn(self._queued())
        return RemoteRun(self, run_id)

    async def _queued(self) -> None:
        await self.journal.commit()
        await self.backend.notify_queue()
        self.on_room()

    @override
    def get_external_adapter(self, run_id: str) -> ExternalRunAdapter:
        if run_id in self.holding:
            return _HeldRun(self._decorated.get_external_adapter(run_id), self)
        return RemoteRun(self, run_id)

    @override
    def get_internal_adapter(self, workflow: Workflow) -> InternalRunAdapter:
        return _IdleWatch(super().get_internal_adapter(workflow), self)

    # ------------------------------------------------------------------ events to runs

    async def deliver(self, run_id: str, tick: WorkflowTick) -> None:
        """Send `tick` to `run_id` through the inbox: it waits there until the run's owner
        recorded what it did. Handed here if the run is held here (or taken up now), else
        to the worker that holds it (and if its owner let it go meanwhile, the run is taken
        up here after all)."""
        await self._take(run_id)
        body = self._encode(run_id, tick)
        await self.journal.fetch(
            "INSERT INTO llmc_inbox (run_id, body) VALUES (?, ?)", run_id, body
        )
        if run_id in self.holding:
            await self.drain(run_id)
            return
        if self.backend.spec.kind == "postgres":
            await self.journal.fetch("SELECT pg_notify(?, ?)", INBOX_CHANNEL, run_id)
        # Read after the insert committed: an owner releasing the run either sees the row
        # (and wakes the queue) or let go before this read, which then takes the run.
        await self._take(run_id)

    async def _take(self, run_id: str) -> None:
        """Take `run_id` up here if nobody holds it (it waits for input, or in the queue),
        unless this worker has stopped claiming runs (it drains) or its lock is away."""
        if run_id in self.holding or self.claims_stopped or not self.lease.is_set():
            return
        record = await self.backend.take(run_id)
        if record is not None:
            await self._take_up(record)

    def _encode(self, run_id: str, tick: WorkflowTick) -> str:
        if isinstance(tick, TickCancelRun):
            return json.dumps({"cancel": True})
        assert isinstance(tick, TickAddEvent)
        workflow = self._workflow_of(run_id)
        event = workflow.runtime.get_serializer(workflow).serialize(tick.event)
        return json.dumps({"event": event})

    def _workflow_of(self, run_id: str) -> Workflow:
        handler = self.store.held.get(run_id)
        name = handler.workflow_name if handler is not None else None
        if name is None or name not in self.workflows:
            return next(iter(self.workflows.values()))
        return self.workflows[name]

    def _drain_lock(self, run_id: str) -> asyncio.Lock:
        lock = self._drains.get(run_id)
        if lock is None:
            lock = self._drains[run_id] = asyncio.Lock()
        return lock

    async def drain(self, run_id: str) -> None:
        """Deliver what waits in the inbox for a run held here: the rows are marked taken at
        this worker's epoch in the transaction that checks it, and handed to the run before
        anything else may let the run go (one drain of a run at a time, in the order sent).
        A row is deleted with the commit after the run took its event in (:meth:`took_in`),
        or after its end (a cancel)."""
        async with self._drain_lock(run_id):
            epoch = self.journal.epochs.get(run_id)
            if run_id not in self.holding or epoch is None:
                return
            lock = " FOR SHARE" if self.backend.spec.kind == "postgres" else ""
            rows = await self.journal.fetch(_DRAIN.format(lock=lock), run_id, epoch)
            if not rows:
                return
            if run_id not in self.holding:  # fenced meanwhile: the new owner's now
                logger.error("Run %s left this worker while its inbox was handed to it.", run_id)
            workflow = self._workflow_of(run_id)
            adapter = super().get_external_adapter(run_id)
            handed = self._handed.setdefault(run_id, {})
            self._touch(run_id)
            for inbox_id, body in sorted(rows):
                message = json.loads(body)
                if message.get("cancel"):
                    handed[int(inbox_id)] = None
                    await adapter.send_event(TickCancelRun())
                    continue
                try:
                    event = workflow.runtime.get_serializer(workflow).deserialize(message["event"])
                except ValueError as e:  # not an event a client may send this workflow
                    logger.error("Run %s: an inbox event was dropped: %s", run_id, e)
                    self.journal.took(run_id, int(inbox_id))
                    continue
                handed[int(inbox_id)] = event
                await adapter.send_event(TickAddEvent(event=event))

    def took_in(self, run_id: str, event: Event | None) -> None:
        """A step of `run_id` took `event` in (and queued what it did); None: the run ended.
        The inbox rows of what it took in go with the run's next commit."""
        handed = self._handed.get(run_id)
        if not handed:
            return
        for inbox_id, sent in list(handed.items()):
            if event is None or sent is event:
                del handed[inbox_id]
                self.journal.took(run_id, inbox_id)

    # ------------------------------------------------------------------ idle release

    def _touch(self, run_id: str) -> None:
        self._quiet.discard(run_id)
        handle = self._idle.pop(run_id, None)
        if handle is not None:
            handle.cancel()

    def went_idle(self, run_id: str) -> None:
        """The run waits for input: release it after ``idle_release`` seconds of that."""
        self._touch(run_id)
        self._quiet.add(run_id)
        loop = asyncio.get_running_loop()
        self._idle[run_id] = loop.call_later(
            self.backend.idle_release, lambda: self._spawn(self._release(run_id))
        )

    def active(self, run_id: str) -> None:
        """The run did something: it is not idle."""
        self._touch(run_id)

    async def _release(self, run_id: str) -> None:
        """Let a run that waited for input long enough leave memory (no drain meanwhile:
        an event handed to it is delivered first, and the run is not idle then)."""
        self._idle.pop(run_id, None)
        async with self._drain_lock(run_id):
            if run_id not in self.holding or run_id not in self._quiet:
                return
            self._quiet.discard(run_id)
            self.holding.discard(run_id)
            self._handed.pop(run_id, None)
            self.store.held.pop(run_id, None)
            self.stop_here(run_id)
            waiting = await self.backend.let_go(run_id, idle_since=time.time())
        self._drains.pop(run_id, None)
        logger.info("Run %s waits for input: released from memory.", run_id)
        if waiting:
            logger.info("An event waits for run %s: it goes to a worker with room.", run_id)
        self.on_room()


class _IdleWatch(BaseInternalRunAdapterDecorator):
    """Tells the runtime when a run goes idle (waits for input) and when it works again."""

    def __init__(self, decorated: InternalRunAdapter, runtime: ServedRuntime) -> None:
        super().__init__(decorated)
        self._runtime = runtime

    @override
    async def write_to_event_stream(self, event: Event) -> None:
        if self._runtime.journal.stale(self.run_id):  # an incarnation over here
            return
        if isinstance(event, WorkflowIdleEvent):
            self._runtime.went_idle(self.run_id)
        else:
            self._runtime.active(self.run_id)
        await super().write_to_event_stream(event)

    @override
    async def on_tick(self, tick: WorkflowTick) -> None:
        if isinstance(tick, TickStepResult):  # a step ended: what it did is queued
            self._runtime.took_in(self.run_id, tick.event)
        await super().on_tick(tick)


class ServedDurable(Durable):
    """A durable backend serving runs over HTTP."""

    @property
    def served(self) -> ServedRuntime:
        assert isinstance(self.runtime, ServedRuntime)
        return self.runtime

    @property
    def store(self) -> JournalStore:
        """The workflow store (give it to ``WorkflowServer``)."""
        return self.served.store

    retain: float | None = None

    def server_runtime(self) -> ServedRuntime:
        """The runtime to give ``WorkflowServer``."""
        self.served.max_runs = self.max_runs
        self.served.retain = self.retain
        return self.served


async def open_durable(
    spec: str | StoreSpec,
    *,
    worker: str | None = None,
    max_runs: int | None = None,
    idle_release: float = IDLE_RELEASE,
    outage_limit: float = OUTAGE_LIMIT,
    on_fatal: Callable[[str], None] | None = None,
    retain: float | None = None,
) -> ServedDurable:
    """The durable backend of a server on `spec`, its database checked now (`on_fatal`:
    called if the store stays away past the outage limit; by default it is logged, the
    runs fail and the host process lives on).

    Raises:
        ConfigurationError: A missing driver, an unknown scheme, an unreachable database,
            or a SQLite store another process uses.
    """
    from llm_compiler.durable.backend import check_reachable

    durable = prepare(
        spec,
        worker=worker,
        runtime=ServedRuntime,
        cls=ServedDurable,
        idle_release=idle_release,
        outage_limit=outage_limit,
        **({} if on_fatal is None else {"on_fatal": on_fatal}),
    )
    assert isinstance(durable, ServedDurable) and isinstance(durable.runtime, ServedRuntime)
    durable.runtime.durable = durable
    durable.max_runs = max_runs
    durable.retain = retain
    if durable.spec.kind == "postgres":
        await check_reachable(durable.spec)
    return durable

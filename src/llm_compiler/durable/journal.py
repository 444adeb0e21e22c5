"""The journal: what must survive a crash, group-committed to SQLite or Postgres.

The tables (:mod:`.schema`, brought up to date at open, once, under a lock):

- ``llmc_runs``: one row per run (its handler id, workflow, status, the worker that holds
  it and its ownership epoch, its start event, its result or error, when it went idle);
- ``llmc_facts``: the run's facts and the few records it updates (:mod:`.facts`), plus
  ``started`` rows (``round:task``) for tools that must not run twice;
- ``llmc_events``: the run's event stream, numbered by the worker that holds the run.

Every commit is fenced: a run's rows are written only while the run's row holds the epoch
this worker took it at (:meth:`Journal.hold`); the rows of a run another worker took over
are refused, its barriers raise :class:`Fenced` and ``on_fenced`` stops it here. A
``started`` row must be new (:class:`AlreadyStarted` otherwise). See docs/durability.md.

Writes are queued (:meth:`Journal.put`, never awaited on the spot) and committed by one
task, all that queued up in one transaction (group commit: however many runs and events
wrote since the last commit, one commit). :meth:`Journal.barrier` waits until the rows a
run queued so far, except its stream events, are committed: the runtime calls it before a
step acts on the facts (a tool or model call, an answer), so nothing runs on a fact that
could still be lost. A commit starts when a barrier or the runtime asks for one
(:meth:`Journal.commit_soon`: a run's start, a model call's output), or
:data:`LAZY_COMMIT` seconds after its first row was queued, whichever comes first;
whatever queued meanwhile joins it. So the results of parallel tasks, which no step
waits for one by one, settle in one commit rather than one each, and a barrier never
queues behind a commit of rows it does not need. Rows are committed in the order they
were queued.

A lost connection is retried with backoff (the journal reports itself ``degraded``
meanwhile) until :attr:`~llm_compiler.durable.config.DurableConfig.outage_limit`; then
``on_fatal`` is called (the worker stops). Queued writes wait, and are committed once the
database is back: nothing is lost, the runs only pause.

:meth:`Journal.started_without_result` tells which tasks of a run were started but have
no recorded result: the calls a crash cut.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from llm_compiler.durable import schema
from llm_compiler.durable.config import CONNECT_TIMEOUT, DurableConfig
from llm_compiler.durable.facts import Row
from llm_compiler.errors import LLMCompilerError

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a queued row nobody waits for may stay uncommitted: a task's result, a stream
#: event (other workers' readers of a stream see it this much later at most).
LAZY_COMMIT = 0.02
#: Runs let go (ended here) whose epoch is kept for their late rows (a last event).
PAST_KEPT = 1024
#: The channel a Postgres journal notifies with the ids of runs whose events it committed.
EVENTS_CHANNEL = "llmc_events"

RUN_COLUMNS = (
    "run_id, handler_id, workflow, status, owner, start, result, error, started_at,"
    " updated_at, completed_at, idle_since, epoch"
)
_FACT_COLUMNS = ("run_id", "kind", "key", "body")
#: The incarnation of a run whose task is running: (run id, the epoch the run was held at
#: when it started in this process). Set in a run's own tasks (the runtime starts a run in
#: a context of its own, which its tasks inherit); None elsewhere.
INCARNATION: ContextVar[tuple[str, int] | None] = ContextVar("llmc_incarnation", default=None)


@dataclass(frozen=True)
class Statement:
    """One kind of row the journal writes, and how it is written.

    Attributes:
        fenced: Written only while this worker holds the run (its epoch, :class:`Fenced`).
        checked: A row that must be new (an at-most-once start): if it is there already,
            the run's barrier raises :class:`AlreadyStarted`.
        delete: The row is deleted (the one whose columns hold these values), not inserted.
    """

    table: str
    columns: tuple[str, ...]
    types: tuple[str, ...]
    conflict: str = ""
    fenced: bool = True
    checked: bool = False
    delete: bool = False

    @property
    def sql(self) -> str:
        """The statement for one row (``?`` placeholders)."""
        if self.delete:
            match = " AND ".join(f"{c} = ?" for c in self.columns)
            return f"DELETE FROM {self.table} WHERE {match}"
        marks = ", ".join("?" for _ in self.columns)
        return (
            f"INSERT INTO {self.table} ({', '.join(self.columns)}) VALUES ({marks})"
            f" ON CONFLICT {self.conflict}"
        )


_TEXT4 = ("text",) * 4
_FACT = Statement("llmc_facts", _FACT_COLUMNS, _TEXT4, "(run_id, kind, key) DO NOTHING")
#: A run's start event: the request, written once by the worker that accepted it, which
#: need not hold the run (it may wait in the queue), so it is not fenced.
_START = Statement(
    "llmc_facts", _FACT_COLUMNS, _TEXT4, "(run_id, kind, key) DO NOTHING", fenced=False
)
_STARTED = Statement(
    "llmc_facts", _FACT_COLUMNS, _TEXT4, "(run_id, kind, key) DO NOTHING", checked=True
)
_RECORD = Statement(
    "llmc_facts", _FACT_COLUMNS, _TEXT4, "(run_id, kind, key) DO UPDATE SET body = excluded.body"
)
_EVENT = Statement(
    "llmc_events",
    ("run_id", "seq", "at", "body"),
    ("text", "int", "float8", "text"),
    "(run_id, seq) DO NOTHING",
)
_RUN = Statement(
    "llmc_runs",
    tuple(RUN_COLUMNS.replace(" ", "").split(",")),
    ("text",) * 8 + ("float8",) * 4 + ("int8",),
    "(run_id) DO UPDATE SET status = excluded.status, result = excluded.result,"
    " error = excluded.error, updated_at = excluded.updated_at,"
    " completed_at = excluded.completed_at, idle_since = excluded.idle_since",
)
#: An inbox row whose event the run took in (deleted with what the run recorded of it).
_TAKEN = Statement("llmc_inbox", ("run_id", "id"), ("text", "int8"), delete=True)
Batch = list[tuple[Statement, list[tuple[Any, ...]]]]
#: A queued row: its statement, its values, the epoch its run was held at when queued.
_Queued = tuple[Statement, tuple[Any, ...], int | None]


class Fenced(LLMCompilerError, RuntimeError):
    """Another worker took the run over (its epoch moved on): this worker's writes for it
    are refused, and the run stops here."""


class AlreadyStarted(LLMCompilerError, RuntimeError):
    """An at-most-once call's start mark was there already: the call must not start."""


@dataclass
class Refused:
    """What a commit refused: the runs fenced off, and those whose start mark stood."""

    fenced: set[str] = field(default_factory=set)
    doubled: set[str] = field(default_factory=set)
    epochs: dict[str, int | None] = field(default_factory=dict)
    """The epoch each run was written at."""

    def add(self, other: Refused) -> None:
        self.fenced |= other.fenced
        self.doubled |= other.doubled
        self.epochs.update(other.epochs)


@dataclass
class RunRecord:
    """A row of ``llmc_runs``."""

    run_id: str
    handler_id: str
    workflow: str
    status: str = "running"
    owner: str | None = None
    start: str | None = None
    result: str | None = None
    error: str | None = None
    started_at: float = field(default_factory=time.time)
    updated_at: float | None = None
    completed_at: float | None = None
    idle_since: float | None = None
    epoch: int = 0
    """The run's ownership epoch: raised by every takeover; a write for the run commits
    only while the epoch its writer holds is the row's."""

    def values(self) -> tuple[Any, ...]:
        """The row's values in ``RUN_COLUMNS`` order."""
        return (
            self.run_id,
            self.handler_id,
            self.workflow,
            self.status,
            self.owner,
            self.start,
            self.result,
            self.error,
            self.started_at,
            self.updated_at,
            self.completed_at,
            self.idle_since,
            self.epoch,
        )

    @classmethod
    def of(cls, row: Sequence[Any]) -> RunRecord:
        """A record from a row selected as ``RUN_COLUMNS``."""
        return cls(*row)


class Driver(Protocol):
    """One database's connections: a transaction of batched statements, and queries."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def write(self, batch: Batch, runs: set[str], epochs: dict[str, int | None]) -> Refused:
        """Execute every statement of `batch` in one transaction, the fenced rows of a run
        only if its row's epoch is the one in `epochs` (None: this worker does not hold it)
        or it has no row yet; tell listeners (Postgres) which `runs` have new events."""
        ...

    async def create(self, run: tuple[Any, ...], start: str) -> bool:
        """Insert the run's row (`run`, in ``RUN_COLUMNS`` order) and its `start` fact in one
        transaction if no run has its run id or handler id yet; whether it did."""
        ...

    async def migrate(self) -> int:
        """Bring the schema to :data:`~.schema.VERSION` (once, under a lock); the version
        the database held before."""
        ...

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]: ...

    def lost(self, error: BaseException) -> bool:
        """Whether `error` means the database could not be reached (worth retrying)."""
        ...


class Journal:
    """Group-committed writes and reads of the runs' tables (see the module docstring).

    Args:
        config: The store and the fault limits.
        on_fatal: Called once the database stayed unreachable past the outage limit.
    """

    def __init__(self, config: DurableConfig, on_fatal: Callable[[str], None] | None = None):
        self.config = config
        self.driver: Driver = (
            SqliteDriver(config.spec.url.removeprefix("sqlite:///"))
            if config.spec.kind == "sqlite"
            else PostgresDriver(config.spec.url)
        )
        self.on_fatal = on_fatal
        self.degraded_since: float | None = None
        """When the database stopped answering (None: it answers)."""
        self.epochs: dict[str, int] = {}
        """The epoch of each run this worker holds (:meth:`hold`)."""
        self.on_fenced: Callable[[str], None] | None = None
        """Called with a run whose write the fence refused (another worker holds it now)."""
        self.on_events: Callable[[dict[str, int]], None] | None = None
        """Called after a commit with the highest committed event of each run it held."""
        self._records: dict[tuple[str, ...], _Queued] = {}
        self._facts: list[_Queued] = []
        self._past: OrderedDict[str, int] = OrderedDict()
        self._checks: set[asyncio.Future[None]] = set()
        self._runs: set[str] = set()
        self._open: asyncio.Future[None] | None = None
        self._last: dict[str, asyncio.Future[None]] = {}
        self._failed: dict[str, Exception] = {}
        self._wake = asyncio.Event()
        self._timer: asyncio.TimerHandle | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def degraded(self) -> bool:
        """Whether the database is unreachable right now (writes wait, runs pause)."""
        return self.degraded_since is not None

    async def open(self) -> None:
        """Connect and bring the tables to the current schema; start the committing task."""
        await self.driver.open()
        await self.driver.migrate()
        self._flusher = asyncio.get_running_loop().create_task(self._flush_forever())

    async def close(self) -> None:
        """Commit what is queued, then disconnect."""
        self._closing = True
        if self._flusher is not None:
            if not self.degraded:
                await self.commit()
            self._flusher.cancel()
            await asyncio.gather(self._flusher, return_exceptions=True)
        await self.driver.close()

    # ----------------------------------------------------------------- ownership

    def hold(self, run_id: str, epoch: int) -> None:
        """This worker holds `run_id` at `epoch` (it took the run, or created it): its
        writes for the run commit while the run's row keeps that epoch."""
        self.epochs[run_id] = epoch
        self._past.pop(run_id, None)
        self._failed.pop(run_id, None)

    def let_go(self, run_id: str) -> None:
        """Forget `run_id` (it ended or left this worker) once what is queued is committed."""

        def forget(_: object = None) -> None:
            if self._open is not None and run_id in {str(q[1][0]) for q in self._queued()}:
                self._open.add_done_callback(forget)  # queued again meanwhile
                return
            self._last.pop(run_id, None)
            epoch = self.epochs.pop(run_id, None)
            if epoch is not None:  # late rows of the run (its last events) still count
                self._past[run_id] = epoch
                while len(self._past) > PAST_KEPT:
                    self._past.popitem(last=False)
            self._failed.pop(run_id, None)

        if self._open is None:
            forget()
        else:
            self._open.add_done_callback(forget)

    def _queued(self) -> list[_Queued]:
        return [*self._facts, *self._records.values()]

    def _current(self, queued: list[_Queued]) -> list[tuple[Statement, tuple[Any, ...]]]:
        """The queued rows still this worker's to write: a row queued under an earlier
        holding of its run (the run was taken over, then taken up here again) is dropped."""
        out = []
        for sql, args, epoch in queued:
            if epoch is None or epoch == self.epoch(str(args[0])):
                out.append((sql, args))
        return out

    def stale(self, run_id: str) -> bool:
        """Whether the caller is an incarnation of `run_id` that is over in this process:
        the run was taken over since it started here (and maybe claimed back here at a new
        epoch). What it still does on its way out is dropped: its rows, its barriers raise
        :class:`Fenced`."""
        incarnation = INCARNATION.get()
        return (
            incarnation is not None
            and incarnation[0] == run_id
            and incarnation[1] != self.epoch(run_id)
        )

    def epoch(self, run_id: str) -> int | None:
        """The epoch this worker writes `run_id` at (None: it does not hold the run)."""
        held = self.epochs.get(run_id)
        return held if held is not None else self._past.get(run_id)

    def recheck(self) -> None:
        """Stop the runs this worker holds that are not its own any more (it was taken for
        dead: their epochs moved on); the others go on. In the background."""
        held = dict(self.epochs)

        async def check() -> None:
            marks = ", ".join("?" for _ in held)
            rows = await self.fetch(
                f"SELECT run_id, epoch FROM llmc_runs WHERE run_id IN ({marks})", *held
            )
            now = {str(r): int(e) for r, e in rows}
            stale = {r for r, e in held.items() if now.get(r, e) != e}
            self._refuse(Refused(fenced=stale, epochs={r: held[r] for r in stale}))

        if held:
            task = asyncio.ensure_future(check())
            self._checks.add(task)
            task.add_done_callback(self._checks.discard)

    # ----------------------------------------------------------------- writes

    def put(self, run_id: str, row: Row) -> None:
        """Queue one of the run's rows (a fact stands once; a record is replaced; an
        at-most-once start mark must be new: :class:`AlreadyStarted`)."""
        if row.fact:
            kind = {"start": _START, "started": _STARTED}.get(row.kind, _FACT)
            self._queue(run_id, kind, (run_id, row.kind, row.key, row.body))
        else:
            self._replace(
                run_id, (row.kind, row.key), _RECORD, (run_id, row.kind, row.key, row.body)
            )

    def took(self, run_id: str, inbox_id: int) -> None:
        """The run took in the event of inbox row `inbox_id` (what it did is queued): the
        row is deleted by the commit that holds it, fenced like the run's other rows."""
        self._queue(run_id, _TAKEN, (run_id, inbox_id))

    def put_event(self, run_id: str, seq: int, at: float, body: str) -> None:
        """Queue one event of the run's stream (committed with the next facts, or within
        :data:`LAZY_COMMIT` seconds)."""
        self._queue(run_id, _EVENT, (run_id, seq, at, body), lazy=True)
        self._runs.add(run_id)

    def put_run(self, record: RunRecord, lazy: bool = False) -> None:
        """Queue the run's row (inserted, or its status, result and times replaced; `lazy`:
        committed with the next rows, or within :data:`LAZY_COMMIT` seconds)."""
        self._replace(record.run_id, ("run",), _RUN, record.values(), lazy)
        if record.status != "running":  # its end is announced like its events (Postgres)
            self._runs.add(record.run_id)

    async def create(self, record: RunRecord, start: str) -> bool:
        """Claim a new run id: insert the run's row and its `start` event if no run holds
        the id (nor the handler id) yet, in one transaction; whether this call did. Two
        workers given one new id: one wins, the other finds that run. Retried while the
        database is away."""
        won = await self.retrying(lambda: self.driver.create(record.values(), start))
        if won and record.owner is not None:
            self.hold(record.run_id, record.epoch)
        return won

    def _queue(
        self, run_id: str, sql: Statement, args: tuple[Any, ...], lazy: bool = False
    ) -> None:
        if self.stale(run_id):
            return
        self._facts.append((sql, args, self.epochs.get(run_id)))
        self._mark(run_id, lazy)

    def _replace(
        self,
        run_id: str,
        key: tuple[str, ...],
        sql: Statement,
        args: tuple[Any, ...],
        lazy: bool = False,
    ) -> None:
        if self.stale(run_id):  # (it would replace the current incarnation's record)
            return
        self._records[(run_id, *key)] = (sql, args, self.epochs.get(run_id))
        self._mark(run_id, lazy)

    def _mark(self, run_id: str, lazy: bool = False) -> None:
        """Note the run's pending row: committed at the run's next barrier (unless `lazy`:
        events, which nothing acts on) or within ``LAZY_COMMIT``."""
        if self._open is None:
            loop = asyncio.get_running_loop()
            self._open = loop.create_future()
            self._timer = loop.call_later(LAZY_COMMIT, self._wake.set)
        if not lazy:
            self._last[run_id] = self._open

    def pending(self, run_id: str) -> asyncio.Future[None] | None:
        """The commit that will hold every row `run_id` queued so far, except stream
        events (None: they are committed). Commits are in order: once it is done, so is
        every earlier one."""
        pending = self._last.get(run_id)
        return pending if pending is not None and not pending.done() else None

    async def barrier(self, run_id: str) -> None:
        """Wait until every row `run_id` queued so far, except stream events, is committed.

        Raises:
            Exception: The database refused a row of the run, or stayed away past the
                outage limit: the run must not act on facts that are not recorded.
        """
        pending = self._last.get(run_id)
        await self.settled(run_id, pending)
        if pending is not None and self._last.get(run_id) is pending:
            self._last.pop(run_id, None)

    async def settled(self, run_id: str, commit: asyncio.Future[None] | None) -> None:
        """Wait for `commit` (from :meth:`pending`: the rows the run had queued then).

        Raises:
            Exception: As :meth:`barrier`.
        """
        if commit is not None and not commit.done() and not self.stale(run_id):
            self._wake.set()
            await asyncio.shield(commit)
        if self.stale(run_id):
            raise Fenced(f"Run {run_id} was taken over since this incarnation of it started.")
        failed = self._failed.get(run_id)
        if failed is not None:
            raise failed

    def commit_soon(self) -> None:
        """Start a commit of what is queued now, without waiting for it (a run's start:
        committed while its plan is written, not in front of its first tool)."""
        if self._open is not None:
            self._wake.set()

    async def commit(self) -> None:
        """Wait until everything queued so far is committed."""
        if self._open is not None:
            self._wake.set()
            await asyncio.shield(self._open)

    async def _flush_forever(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            await self._flush()

    async def _flush(self) -> None:
        """Commit what is queued. Never raises but when cancelled: whatever fails is told
        to the runs it concerns, and the rows queued after it are committed still."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        done, self._open = self._open, None
        rows, runs = self._current(self._queued()), self._runs
        self._facts, self._records, self._runs = [], {}, set()
        if done is None:
            return
        try:
            refused = await self._write(rows, runs)
        except Exception as e:
            if not (self.driver.lost(e) or isinstance(e, ConnectionError)):
                refused = await self._write_apart(rows, runs, e)
            else:  # the outage limit passed (or the journal closes): nothing was committed
                self._failed.update({str(args[0]): e for _, args in rows})
                done.set_exception(e)
                done.exception()  # retrieved: the runs' barriers raise it
                return
        except BaseException as e:
            done.set_exception(e)
            raise
        self._refuse(refused)
        self._committed_events(rows, refused.fenced)
        done.set_result(None)

    def _refuse(self, refused: Refused) -> None:
        """Fail the barriers of the runs a commit refused; tell the runtime of fenced ones."""
        for run_id in refused.doubled - refused.fenced:
            logger.error("Run %s: an at-most-once call was marked started already.", run_id)
            self._failed[run_id] = AlreadyStarted(
                f"Run {run_id}: an at-most-once call was started before; not started again."
            )
        for run_id in refused.fenced:
            if self.epoch(run_id) != refused.epochs.get(run_id, self.epoch(run_id)):
                continue  # refused at an earlier epoch: the run was taken up here again since
            logger.warning("Run %s is held by another worker now: it stops here.", run_id)
            self._failed[run_id] = Fenced(f"Run {run_id} is held by another worker now.")
            self.epochs.pop(run_id, None)
            self._past.pop(run_id, None)
            if self.on_fenced is not None:
                try:
                    self.on_fenced(run_id)
                except Exception:  # the committing task must live on
                    logger.exception("Stopping fenced run %s failed", run_id)

    def _committed_events(
        self, rows: list[tuple[Statement, tuple[Any, ...]]], fenced: set[str]
    ) -> None:
        if self.on_events is None:
            return
        last: dict[str, int] = {}
        for sql, args in rows:
            if sql is _EVENT and args[0] not in fenced:
                last[args[0]] = max(last.get(args[0], -1), int(args[1]))
        if last:
            self.on_events(last)

    async def _write(
        self, rows: list[tuple[Statement, tuple[Any, ...]]], runs: set[str]
    ) -> Refused:
        """Commit `rows` in one transaction, retried while the database is away; the runs
        whose rows were refused."""
        batch: dict[Statement, list[tuple[Any, ...]]] = {}
        for sql, args in rows:
            batch.setdefault(sql, []).append(args)
        epochs = {str(a[0]): self.epoch(str(a[0])) for sql, a in rows if sql.fenced}
        refused = await self.retrying(lambda: self.driver.write(list(batch.items()), runs, epochs))
        refused.epochs = epochs
        return refused

    async def _write_apart(
        self, rows: list[tuple[Statement, tuple[Any, ...]]], runs: set[str], error: Exception
    ) -> Refused:
        """The database refused a batch (`error`): commit each run's rows on their own, so
        only a run whose rows are refused fails (its barriers raise) and the others' stand."""
        logger.error("The store refused a commit (%s); committing run by run.", _first_line(error))
        by_run: dict[str, list[tuple[Statement, tuple[Any, ...]]]] = {}
        for sql, args in rows:  # every statement's first value is its run id
            by_run.setdefault(str(args[0]), []).append((sql, args))
        refused = Refused()
        for run_id, own in by_run.items():
            try:
                refused.add(await self._write(own, runs & {run_id}))
            except Exception as e:
                logger.error("The store refused rows of run %s: %s", run_id, _first_line(e))
                self._failed[run_id] = e
        return refused

    # ----------------------------------------------------------------- reads

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        """Rows of a query (``?`` placeholders), retried while the database is away."""
        return await self.retrying(lambda: self.driver.fetch(sql, *args))

    async def rows(self, run_id: str) -> list[tuple[str, str, str]]:
        """The run's fact rows (kind, key, body)."""
        rows = await self.fetch("SELECT kind, key, body FROM llmc_facts WHERE run_id = ?", run_id)
        return [(str(k), str(key), str(b)) for k, key, b in rows]

    async def started_without_result(self, run_id: str) -> list[tuple[int, int]]:
        """The (round, task id) of each task of `run_id` that was started (a ``started``
        row, written before a tool that must not run twice is called) and has no
        recorded result: calls a crash may have cut, whose effect is unknown."""
        rows = await self.fetch(
            "SELECT kind, key FROM llmc_facts WHERE run_id = ? AND kind IN ('started', 'result')",
            run_id,
        )
        started = {k for kind, k in rows if kind == "started"}
        done = {k for kind, k in rows if kind == "result"}
        pairs = [tuple(int(p) for p in str(k).split(":")) for k in started - done]
        return sorted((r, t) for r, t in pairs)

    async def record(self, run_id: str) -> RunRecord | None:
        """The run's row, if it has one."""
        rows = await self.fetch(f"SELECT {RUN_COLUMNS} FROM llmc_runs WHERE run_id = ?", run_id)
        return RunRecord.of(rows[0]) if rows else None

    async def events(
        self, run_id: str, after: int = -1, limit: int | None = None
    ) -> list[tuple[int, float, str]]:
        """The run's events after sequence `after` (seq, time, body), in order."""
        sql = "SELECT seq, at, body FROM llmc_events WHERE run_id = ? AND seq > ? ORDER BY seq"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return [(int(s), float(a), str(b)) for s, a, b in await self.fetch(sql, run_id, after)]

    # ----------------------------------------------------------------- faults

    async def retrying(self, call: Callable[[], Awaitable[T]]) -> T:
        """`call()`, retried with backoff while the database is unreachable, up to the
        outage limit (then ``on_fatal``, and the error is raised)."""
        delay, cap = self.config.backoff
        while True:
            try:
                result = await call()
            except Exception as e:
                if not self.driver.lost(e) or self._closing:
                    raise
                self._lost(e)
                # Retry backoff while the database is unreachable (no event says it is back).
                await asyncio.sleep(delay)
                delay = min(delay * 2, cap)
                continue
            if self.degraded_since is not None:
                logger.warning("The store answers again (after %.1f s).", self._outage())
                self.degraded_since = None
            return result

    def _outage(self) -> float:
        return 0.0 if self.degraded_since is None else time.monotonic() - self.degraded_since

    def _lost(self, error: BaseException) -> None:
        if self.degraded_since is None:
            self.degraded_since = time.monotonic()
            logger.warning("The store does not answer (%s); retrying.", _first_line(error))
        if self._outage() > self.config.outage_limit:
            message = (
                f"the store {self.config.spec.shown} did not answer for "
                f"{self.config.outage_limit:g} s ({_first_line(error)})"
            )
            if self.on_fatal is not None:
                self.on_fatal(message)
            raise ConnectionError(message) from error


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return text[0] if text else type(error).__name__


# --------------------------------------------------------------------- SQLite


class SqliteDriver:
    """One connection, in WAL mode with ``synchronous=NORMAL``, used from one thread."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._thread = ThreadPoolExecutor(1, thread_name_prefix="llmc-sqlite")
        self._db: sqlite3.Connection | None = None

    async def _call(self, fn: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._thread, fn)

    async def open(self) -> None:
        def connect() -> None:
            db = sqlite3.connect(self.path, timeout=CONNECT_TIMEOUT, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._db = db

        await self._call(connect)

    async def close(self) -> None:
        def close() -> None:
            if self._db is not None:
                self._db.close()
                self._db = None

        await self._call(close)
        self._thread.shutdown(wait=False)

    async def write(self, batch: Batch, runs: set[str], epochs: dict[str, int | None]) -> Refused:
        full = any(sql.checked for sql, _ in batch)
        return await self._call(lambda: self._write(batch, epochs, full))

    def _write(self, batch: Batch, epochs: dict[str, int | None], full: bool) -> Refused:
        """One ``BEGIN IMMEDIATE`` transaction; ``synchronous=FULL`` for a commit holding
        an at-most-once start mark (it must survive an OS crash), ``NORMAL`` otherwise."""
        assert self._db is not None
        db = self._db
        if full:
            db.execute("PRAGMA synchronous=FULL")
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                refused = self._rows(db, batch, epochs)
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        finally:
            if full:
                db.execute("PRAGMA synchronous=NORMAL")
        return refused

    @staticmethod
    def _rows(db: sqlite3.Connection, batch: Batch, epochs: dict[str, int | None]) -> Refused:
        marks = ", ".join("?" for _ in epochs)
        found = dict(
            db.execute(f"SELECT run_id, epoch FROM llmc_runs WHERE run_id IN ({marks})", [*epochs])
        )
        refused = Refused(fenced={r for r, e in epochs.items() if r in found and found[r] != e})
        for sql, rows in batch:
            kept = [r for r in rows if not sql.fenced or r[0] not in refused.fenced]
            if sql.checked:
                refused.doubled |= {r[0] for r in kept if db.execute(sql.sql, r).rowcount == 0}
            else:
                db.executemany(sql.sql, kept)
        return refused

    async def create(self, run: tuple[Any, ...], start: str) -> bool:
        def create() -> bool:
            assert self._db is not None
            db = self._db
            db.execute("BEGIN IMMEDIATE")
            try:
                won = db.execute(_CREATE_RUN, run).fetchall() != []
                if won:
                    db.execute(_CREATE_START, (run[0], start))
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
            return won

        return await self._call(create)

    async def migrate(self) -> int:
        assert self._db is not None
        db = self._db

        async def execute(sql: str) -> list[tuple[Any, ...]]:
            return await self._call(lambda: list(db.execute(sql).fetchall()))

        if await schema.current(execute) == schema.VERSION:
            return schema.VERSION
        await execute("BEGIN IMMEDIATE")
        try:
            before = await schema.upgrade("sqlite", execute)
        except BaseException:
            await execute("ROLLBACK")
            raise
        await execute("COMMIT")
        return before

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        def fetch() -> list[tuple[Any, ...]]:
            assert self._db is not None
            return list(self._db.execute(sql, args).fetchall())

        return await self._call(fetch)

    def lost(self, error: BaseException) -> bool:
        return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


# --------------------------------------------------------------------- Postgres


def _numbered(sql: str) -> str:
    """``?`` placeholders as Postgres's ``$1, $2, ...``."""
    parts = sql.split("?")
    return "".join(p + (f"${i + 1}" if i < len(parts) - 1 else "") for i, p in enumerate(parts))


async def _no_reset(conn: object) -> None:
    """A pool connection needs no reset: it never LISTENs and sets nothing."""


#: A new run's row and start event, only if no run has its run id or handler id yet.
_CREATE_RUN = (
    f"INSERT INTO llmc_runs ({RUN_COLUMNS}) VALUES ({', '.join('?' for _ in _RUN.columns)})"
    " ON CONFLICT DO NOTHING RETURNING run_id"
)
_CREATE_START = (
    "INSERT INTO llmc_facts (run_id, kind, key, body) VALUES (?, 'start', '', ?)"
    " ON CONFLICT DO NOTHING"
)

_NOTIFY_MAX = 7900  # Postgres's payload limit is 8000 bytes
#: The fence: the runs of a batch whose fenced rows may be written (the run's row holds
#: the writer's epoch, or there is no row yet), the rows locked ``FOR SHARE`` so that a
#: takeover (which raises the epoch) waits for this commit, or this commit sees it.
_FENCE = (
    "f AS (SELECT * FROM unnest($1::text[], $2::int8[]) AS f(run_id, epoch)),"
    " h AS (SELECT run_id, epoch FROM llmc_runs WHERE run_id = ANY($1::text[]) FOR SHARE),"
    " ok AS (SELECT f.run_id FROM f LEFT JOIN h USING (run_id)"
    " WHERE h.run_id IS NULL OR h.epoch = f.epoch)"
)


def one_statement(
    batch: Batch, runs: set[str], epochs: dict[str, int | None]
) -> tuple[str, list[Any]]:
    """A batch as one statement (one round trip, one implicit transaction): the fence of
    its runs' epochs, an ``INSERT ... SELECT FROM unnest(<column arrays>)`` per kind of
    row (fenced rows only for the runs the fence lets through), as data-modifying CTEs;
    it selects the runs fenced off, those whose at-most-once start mark stood already,
    and NOTIFYs the runs whose events it holds."""
    args: list[Any] = [list(epochs), [-1 if e is None else e for e in epochs.values()]]
    parts = [_FENCE]
    doubled = []
    for i, (sql, rows) in enumerate(batch):
        arrays = []
        for kind, column in zip(sql.types, zip(*rows, strict=True), strict=True):
            args.append(list(column))
            arrays.append(f"${len(args)}::{kind}[]")
        columns = ", ".join(sql.columns)
        where = " WHERE u.run_id IN (SELECT run_id FROM ok)" if sql.fenced else ""
        if sql.delete:
            match = " AND ".join(f"t.{c} = u.{c}" for c in sql.columns)
            parts.append(
                f"w{i} AS (DELETE FROM {sql.table} t USING unnest({', '.join(arrays)})"
                f" AS u({columns}) WHERE {match} AND u.run_id IN (SELECT run_id FROM ok))"
            )
            continue
        parts.append(
            f"w{i} AS (INSERT INTO {sql.table} ({columns}) SELECT * FROM"
            f" unnest({', '.join(arrays)}) AS u({columns}){where} ON CONFLICT {sql.conflict}"
            f"{' RETURNING run_id, key' if sql.checked else ''})"
        )
        if sql.checked:
            doubled.append(
                f"SELECT u.run_id FROM unnest({arrays[0]}, {arrays[2]}) AS u(run_id, key)"
                f" WHERE u.run_id IN (SELECT run_id FROM ok) AND NOT EXISTS (SELECT 1 FROM w{i}"
                f" WHERE w{i}.run_id = u.run_id AND w{i}.key = u.key)"
            )
    notify = "NULL"
    if runs:
        payload = json.dumps(sorted(runs))
        args += [EVENTS_CHANNEL, payload if len(payload) < _NOTIFY_MAX else '"*"']
        notify = f"pg_notify(${len(args) - 1}, ${len(args)})"
    tail = (
        "SELECT array(SELECT run_id FROM f EXCEPT SELECT run_id FROM ok),"
        f" array({' UNION '.join(doubled) or 'SELECT NULL::text WHERE false'}), {notify}"
    )
    return "WITH " + ", ".join(parts) + " " + tail, args


class PostgresDriver:
    """A connection for the committing task, and a small pool for queries (no reset on
    release: asyncpg's default reset is several statements per query)."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._writer: Any = None
        self._pool: Any = None

    async def open(self) -> None:
        import asyncpg

        self._pool = await asyncpg.create_pool(
            self.dsn, min_size=1, max_size=4, reset=_no_reset, timeout=CONNECT_TIMEOUT
        )

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.terminate()
            self._writer = None
        if self._pool is not None:
            self._pool.terminate()
            self._pool = None

    async def write(self, batch: Batch, runs: set[str], epochs: dict[str, int | None]) -> Refused:
        import asyncpg

        if self._writer is None or self._writer.is_closed():
            self._writer = await asyncpg.connect(self.dsn, timeout=CONNECT_TIMEOUT)
        conn = self._writer
        sql, args = one_statement(batch, runs, epochs)
        try:
            fenced, doubled, _ = await conn.fetchrow(sql, *args)
        except BaseException:
            self._writer = None  # whatever broke it, the next attempt starts afresh
            conn.terminate()
            raise
        return Refused(set(fenced), set(doubled))

    async def create(self, run: tuple[Any, ...], start: str) -> bool:
        """One statement: the row's insert, and the start's for the row inserted only."""
        sql = (
            f"WITH r AS ({_CREATE_RUN}), s AS (INSERT INTO llmc_facts (run_id, kind, key, body)"
            " SELECT run_id, 'start', '', ? FROM r ON CONFLICT DO NOTHING) SELECT run_id FROM r"
        )
        return bool(await self.fetch(sql, *run, start))

    async def migrate(self) -> int:
        assert self._pool is not None
        async with self._pool.acquire(timeout=CONNECT_TIMEOUT) as conn:
            return await schema.migrate_postgres(conn)

    async def fetch(self, sql: str, *args: Any) -> list[tuple[Any, ...]]:
        assert self._pool is not None
        async with self._pool.acquire(timeout=CONNECT_TIMEOUT) as conn:
            try:
                return [tuple(r) for r in await conn.fetch(_numbered(sql), *args)]
            except Exception as e:
                if self.lost(e):  # not handed out again: the pool opens a fresh one
                    conn.terminate()
                raise

    def lost(self, error: BaseException) -> bool:
        """Whether `error` means the connection or the database is gone. That includes
        asyncpg's ``InternalClientError``: the client's protocol state no longer matches
        the server's, as when the server's ``FATAL`` (a restart's "terminating
        connection") reached an idle connection whose close is not seen yet; that
        connection is unusable, a fresh one is the cure."""
        import asyncpg
        from asyncpg.exceptions import InternalClientError

        if isinstance(error, (OSError, TimeoutError, asyncpg.InterfaceError, InternalClientError)):
            return True
        if isinstance(error, asyncpg.PostgresError):
            code = getattr(error, "sqlstate", "") or ""
            return code.startswith(("08", "57P"))  # connection exceptions; admin shutdown
        return False

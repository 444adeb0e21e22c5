"""The journal: what must survive a crash, group-committed to SQLite or Postgres.

Three tables (created at open):

- ``llmc_runs``: one row per run (its handler id, workflow, status, the worker that holds
  it, its start event, its result or error, when it went idle);
- ``llmc_facts``: the run's facts and the few records it updates (:mod:`.facts`), plus
  ``started`` rows (``round:task``) for tools that must not run twice;
- ``llmc_events``: the run's event stream, numbered by the worker that holds the run.

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
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from llm_compiler.durable.config import CONNECT_TIMEOUT, DurableConfig
from llm_compiler.durable.facts import Row

logger = logging.getLogger(__name__)
T = TypeVar("T")

#: Seconds a queued row nobody waits for may stay uncommitted: a task's result, a stream
#: event (other workers' readers of a stream see it this much later at most).
LAZY_COMMIT = 0.02
#: The channel a Postgres journal notifies with the ids of runs whose events it committed.
EVENTS_CHANNEL = "llmc_events"

_SCHEMA = [
    "CREATE TABLE IF NOT EXISTS llmc_runs (run_id TEXT PRIMARY KEY, handler_id TEXT UNIQUE,"
    " workflow TEXT NOT NULL, status TEXT NOT NULL, owner TEXT, start TEXT, result TEXT,"
    " error TEXT, started_at DOUBLE PRECISION, updated_at DOUBLE PRECISION,"
    " completed_at DOUBLE PRECISION, idle_since DOUBLE PRECISION)",
    "CREATE TABLE IF NOT EXISTS llmc_facts (run_id TEXT NOT NULL, kind TEXT NOT NULL,"
    " key TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, kind, key))",
    "CREATE TABLE IF NOT EXISTS llmc_events (run_id TEXT NOT NULL, seq INTEGER NOT NULL,"
    " at DOUBLE PRECISION NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, seq))",
    "CREATE INDEX IF NOT EXISTS llmc_runs_owner ON llmc_runs (owner, status)",
    "CREATE INDEX IF NOT EXISTS llmc_runs_newest ON llmc_runs (workflow, started_at, handler_id)",
]
_FACT = (
    "INSERT INTO llmc_facts (run_id, kind, key, body) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (run_id, kind, key) DO NOTHING"
)
_RECORD = (
    "INSERT INTO llmc_facts (run_id, kind, key, body) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (run_id, kind, key) DO UPDATE SET body = excluded.body"
)
_EVENT = (
    "INSERT INTO llmc_events (run_id, seq, at, body) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (run_id, seq) DO NOTHING"
)
RUN_COLUMNS = (
    "run_id, handler_id, workflow, status, owner, start, result, error, started_at,"
    " updated_at, completed_at, idle_since"
)
_RUN = (
    f"INSERT INTO llmc_runs ({RUN_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
    " ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, result = excluded.result,"
    " error = excluded.error, updated_at = excluded.updated_at,"
    " completed_at = excluded.completed_at, idle_since = excluded.idle_since"
)


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
        )

    @classmethod
    def of(cls, row: Sequence[Any]) -> RunRecord:
        """A record from a row selected as ``RUN_COLUMNS``."""
        return cls(*row)


class Driver(Protocol):
    """One database's connections: a transaction of batched statements, and queries."""

    async def open(self) -> None: ...

    async def close(self) -> None: ...

    async def write(self, batch: list[tuple[str, list[tuple[Any, ...]]]], runs: set[str]) -> None:
        """Execute every statement of `batch` (sql, rows) in one transaction; tell
        listeners (Postgres) which `runs` have new events."""
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
        self._records: dict[tuple[str, ...], tuple[str, tuple[Any, ...]]] = {}
        self._facts: list[tuple[str, tuple[Any, ...]]] = []
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
        """Connect and create the tables; start the committing task."""
        await self.driver.open()
        for ddl in _SCHEMA:
            await self.driver.fetch(ddl)
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

    # ----------------------------------------------------------------- writes

    def put(self, run_id: str, row: Row) -> None:
        """Queue one of the run's rows (a fact stands once; a record is replaced)."""
        if row.fact:
            self._queue(run_id, _FACT, (run_id, row.kind, row.key, row.body))
        else:
            self._replace(
                run_id, (row.kind, row.key), _RECORD, (run_id, row.kind, row.key, row.body)
            )

    def put_event(self, run_id: str, seq: int, at: float, body: str) -> None:
        """Queue one event of the run's stream (committed with the next facts, or within
        :data:`LAZY_COMMIT` seconds)."""
        self._queue(run_id, _EVENT, (run_id, seq, at, body), lazy=True)
        self._runs.add(run_id)

    def put_run(self, record: RunRecord, lazy: bool = False) -> None:
        """Queue the run's row (inserted, or its status, result and times replaced; `lazy`:
        committed with the next rows, or within :data:`LAZY_COMMIT` seconds)."""
        self._replace(record.run_id, ("run",), _RUN, record.values(), lazy)

    def _queue(self, run_id: str, sql: str, args: tuple[Any, ...], lazy: bool = False) -> None:
        self._facts.append((sql, args))
        self._mark(run_id, lazy)

    def _replace(
        self, run_id: str, key: tuple[str, ...], sql: str, args: tuple[Any, ...], lazy: bool = False
    ) -> None:
        self._records[(run_id, *key)] = (sql, args)
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
        if commit is not None and not commit.done():
            self._wake.set()
            await asyncio.shield(commit)
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
        rows, runs = [*self._facts, *self._records.values()], self._runs
        self._facts, self._records, self._runs = [], {}, set()
        if done is None:
            return
        try:
            await self._write(rows, runs)
        except Exception as e:
            if not (self.driver.lost(e) or isinstance(e, ConnectionError)):
                await self._write_apart(rows, runs, e)
            else:  # the outage limit passed (or the journal closes): nothing was committed
                self._failed.update({str(args[0]): e for _, args in rows})
                done.set_exception(e)
                done.exception()  # retrieved: the runs' barriers raise it
        except BaseException as e:
            done.set_exception(e)
            raise
        if not done.done():
            done.set_result(None)

    async def _write(self, rows: list[tuple[str, tuple[Any, ...]]], runs: set[str]) -> None:
        """Commit `rows` (sql, args) in one transaction, retried while the database is away."""
        batch: dict[str, list[tuple[Any, ...]]] = {}
        for sql, args in rows:
            batch.setdefault(sql, []).append(args)
        await self.retrying(lambda: self.driver.write(list(batch.items()), runs))

    async def _write_apart(
        self, rows: list[tuple[str, tuple[Any, ...]]], runs: set[str], error: Exception
    ) -> None:
        """The database refused a batch (`error`): commit each run's rows on their own, so
        only a run whose rows are refused fails (its barriers raise) and the others' stand."""
        logger.error("The store refused a commit (%s); committing run by run.", _first_line(error))
        by_run: dict[str, list[tuple[str, tuple[Any, ...]]]] = {}
        for sql, args in rows:  # every statement's first value is its run id
            by_run.setdefault(str(args[0]), []).append((sql, args))
        for run_id, own in by_run.items():
            try:
                await self._write(own, runs & {run_id})
            except Exception as e:
                logger.error("The store refused rows of run %s: %s", run_id, _first_line(e))
                self._failed[run_id] = e

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

    async def write(self, batch: list[tuple[str, list[tuple[Any, ...]]]], runs: set[str]) -> None:
        def write() -> None:
            assert self._db is not None
            self._db.execute("BEGIN")
            try:
                for sql, rows in batch:
                    self._db.executemany(sql, rows)
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

        await self._call(write)

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


_CONFLICTS = {
    _FACT: _FACT.split(" ON CONFLICT ")[1],
    _RECORD: _RECORD.split(" ON CONFLICT ")[1],
    _EVENT: _EVENT.split(" ON CONFLICT ")[1],
    _RUN: _RUN.split(" ON CONFLICT ")[1],
}
_TYPES = {
    _FACT: ("llmc_facts (run_id, kind, key, body)", ["text"] * 4),
    _RECORD: ("llmc_facts (run_id, kind, key, body)", ["text"] * 4),
    _EVENT: ("llmc_events (run_id, seq, at, body)", ["text", "int", "float8", "text"]),
    _RUN: (f"llmc_runs ({RUN_COLUMNS})", ["text"] * 8 + ["float8"] * 4),
}
_NOTIFY_MAX = 7900  # Postgres's payload limit is 8000 bytes


def one_statement(
    batch: list[tuple[str, list[tuple[Any, ...]]]], runs: set[str]
) -> tuple[str, list[Any]]:
    """A batch as one statement (one round trip, one implicit transaction): an ``INSERT ...
    SELECT FROM unnest(<column arrays>)`` per kind of row, as data-modifying CTEs, and the
    NOTIFY of the runs whose events it holds."""
    parts: list[str] = []
    args: list[Any] = []
    for i, (sql, rows) in enumerate(batch):
        target, types = _TYPES[sql]
        arrays = []
        for kind, column in zip(types, zip(*rows, strict=True), strict=True):
            args.append(list(column))
            arrays.append(f"${len(args)}::{kind}[]")
        parts.append(
            f"w{i} AS (INSERT INTO {target} SELECT * FROM unnest({', '.join(arrays)})"
            f" ON CONFLICT {_CONFLICTS[sql]})"
        )
    tail = "SELECT 1"
    if runs:
        payload = json.dumps(sorted(runs))
        args += [EVENTS_CHANNEL, payload if len(payload) < _NOTIFY_MAX else '"*"']
        tail = f"SELECT pg_notify(${len(args) - 1}, ${len(args)})"
    return ("WITH " + ", ".join(parts) + " " + tail) if parts else tail, args


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

    async def write(self, batch: list[tuple[str, list[tuple[Any, ...]]]], runs: set[str]) -> None:
        import asyncpg

        if self._writer is None or self._writer.is_closed():
            self._writer = await asyncpg.connect(self.dsn, timeout=CONNECT_TIMEOUT)
        conn = self._writer
        sql, args = one_statement(batch, runs)
        try:
            await conn.execute(sql, *args)
        except BaseException:
            self._writer = None  # whatever broke it, the next attempt starts afresh
            conn.terminate()
            raise

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

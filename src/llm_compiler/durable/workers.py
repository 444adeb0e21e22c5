"""Which workers are alive, and handing the runs of dead ones to the living.

Postgres: every worker holds a session advisory lock named after its worker id on a
connection it keeps open, and has a row in ``llmc_workers``. Postgres drops the lock the
moment that connection dies (``kill -9`` closes the socket), so each worker waits on
every other worker's lock (one blocked ``pg_advisory_lock`` per peer: no polling) and,
once it gets one, releases that worker's unfinished runs to the queue and deletes its
row, in one critical section: exactly one worker does it, and the runs are claimed
(``FOR UPDATE SKIP LOCKED``) by workers with room for them. New workers announce
themselves with NOTIFY; a worker started later releases the runs of the dead workers it
finds at start.

A database restart drops every lock at once. A worker then reconnects with backoff and
takes its lock again; its peers wait :data:`REWATCH_GRACE` seconds after their own
reconnect before they wait on its lock again, so a live worker is not taken for dead. If
it was anyway (its row is gone when it gets its lock back), its runs were released with
a new epoch: it drops those it did not claim back since (``on_taken``), announces itself
again and goes on.

The lock only says who is alive; it never decides who may write for a run: that is the
run's epoch, checked by every commit (:mod:`.journal`). While its lock connection is
away a worker starts no tool call (:attr:`PostgresLiveness.lease` is clear).

The lock connection must keep its session: direct connections, or a pooler in session
mode. A pooler in transaction mode (PgBouncer's ``pool_mode=transaction``) moves the
session's statements between server connections; when that is seen (the lock is not
held by the session that just took it) the worker refuses to start.

SQLite: one process per database file, enforced with an exclusive file lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
from collections.abc import Awaitable, Callable
from typing import IO, Any, Protocol

from llm_compiler.durable import schema
from llm_compiler.durable.config import BACKOFF_MAX, CONNECT_TIMEOUT, DurableConfig
from llm_compiler.errors import ConfigurationError

logger = logging.getLogger(__name__)

TABLE = "llmc_workers"
CHANNEL = "llmc_workers"
#: Seconds a worker waits, after reconnecting, before it waits on its peers' locks again.
REWATCH_GRACE = 3 * BACKOFF_MAX + 1.0


class Liveness(Protocol):
    """Started before runs are resumed, stopped after the runtime was destroyed."""

    degraded: bool

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class FileLiveness:
    """An exclusive lock on ``<db>.lock``: a second process on one SQLite file is refused."""

    degraded = False

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def claim(self) -> None:
        """Take the lock now.

        Raises:
            ConfigurationError: Another process uses this store.
        """
        if self._file is not None:
            return
        handle = open(self.path, "a")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            handle.close()
            raise ConfigurationError(
                f"Another process already uses {self.path.removesuffix('.lock')}: a SQLite "
                "store is for one process (use postgresql://... for several)."
            ) from e
        self._file = handle

    async def start(self) -> None:
        self.claim()

    async def stop(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _key(worker: str) -> str:
    return f"llm-compiler-worker:{worker}"


async def _check_session(conn: Any, key: str) -> None:
    """Raise if the lock just taken on `conn` is not held by the session `conn` now talks
    to: a pooler in transaction mode hands each statement to any server connection.

    Raises:
        ConfigurationError: The connection does not keep its session.
    """
    held = await conn.fetchval(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        " AND pid = pg_backend_pid() AND objid = (hashtextextended($1, 0) & 4294967295)::oid"
        " AND classid = ((hashtextextended($1, 0) >> 32) & 4294967295)::oid",
        key,
    )
    if not held:
        raise ConfigurationError(
            "The store's connections do not keep their session (a pooler in transaction "
            "mode, such as PgBouncer's pool_mode=transaction?): durable workers need direct "
            "connections or session pooling."
        )


Adopt = Callable[[str], Awaitable[None]]


class PostgresLiveness:
    """This worker's liveness lock, and watchers releasing the runs of dead peers.

    Args:
        config: The store and this worker's id.
        release: Called with a dead worker's id while its lock is held here: hands its
            unfinished runs back to the queue (exactly once).
        on_fatal: Called when the lock stayed out of reach past the outage limit.
        on_taken: Called when this worker finds it was taken for dead (its runs were
            released: it must drop those it has not taken back since).
    """

    def __init__(
        self,
        config: DurableConfig,
        release: Adopt,
        on_fatal: Callable[[str], None],
        on_taken: Callable[[], None] | None = None,
    ) -> None:
        self.config, self.worker = config, config.worker
        self.release, self.on_fatal, self.on_taken = release, on_fatal, on_taken
        self.degraded = False
        self.lease = asyncio.Event()
        """Set while this worker holds its lock: tool calls start only then."""
        self._conn: Any = None
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._keeper: asyncio.Task[None] | None = None
        self._stopping = False

    async def start(self) -> None:
        """Take this worker's lock, announce it, and watch every known peer."""
        await self._hold()
        for (peer,) in await self._conn.fetch(f"SELECT worker FROM {TABLE}"):
            self._watch(peer)

    async def _connect(self) -> Any:
        import asyncpg

        return await asyncpg.connect(self.config.spec.url, timeout=CONNECT_TIMEOUT)

    async def _hold(self, again: bool = False) -> None:
        conn = await self._connect()
        try:
            if not again:
                await schema.migrate_postgres(conn)
            await conn.execute(
                "SELECT pg_advisory_lock(hashtextextended($1, 0))", _key(self.worker)
            )
            await _check_session(conn, _key(self.worker))
            if again and not await conn.fetchval(
                f"SELECT count(*) FROM {TABLE} WHERE worker = $1", self.worker
            ):
                logger.warning("Worker %s was taken for dead while cut off.", self.worker)
                if self.on_taken is not None:
                    self.on_taken()
            await conn.execute(
                f"INSERT INTO {TABLE} (worker, host, pid) VALUES ($1, $2, $3)"
                " ON CONFLICT (worker) DO UPDATE SET started_at = now()",
                self.worker,
                os.uname().nodename,
                os.getpid(),
            )
            await conn.add_listener(CHANNEL, self._on_join)
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, self.worker)
        except BaseException:
            conn.terminate()
            raise
        conn.add_termination_listener(self._on_lost)
        self._conn = conn
        self.lease.set()

    async def stop(self) -> None:
        """Stop watching and drop this worker's lock (its unfinished runs are released
        by a peer at once, or by the next worker to start)."""
        self._stopping = True
        tasks = [*self._watchers.values(), *([self._keeper] if self._keeper else [])]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self._watchers.clear()
        self.lease.clear()
        if self._conn is not None:
            try:  # a stopped worker leaves the table (its runs were released)
                await self._conn.execute(f"DELETE FROM {TABLE} WHERE worker = $1", self.worker)
            except Exception as e:
                logger.info("Could not remove worker %s's row: %s", self.worker, e)
            await self._conn.close()
            self._conn = None

    def _on_join(self, conn: object, pid: int, channel: str, worker: str) -> None:
        self._watch(worker)

    def _on_lost(self, conn: object) -> None:
        if self._stopping or self._keeper is not None:
            return
        self.degraded = True
        self.lease.clear()
        logger.warning("Worker %s lost its lock connection; reconnecting.", self.worker)
        self._keeper = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay, cap = self.config.backoff
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.config.outage_limit
        try:
            while True:
                try:
                    await self._hold(again=True)
                    break
                except Exception as e:  # the database is still away
                    if loop.time() > deadline:
                        self.on_fatal(
                            f"the store did not answer for {self.config.outage_limit:g} s ({e})"
                        )
                        return
                    # Reconnect backoff: a database that is down sends no event to wait for.
                    await asyncio.sleep(delay)
                    delay = min(delay * 2, cap)
            self.degraded = False
            logger.warning("Worker %s holds its lock again.", self.worker)
        finally:
            self._keeper = None

    async def _reach(self, retry: bool) -> Any:
        """A connection; while the database is away, retried with backoff if `retry`."""
        delay, cap = self.config.backoff
        while True:
            try:
                return await self._connect()
            except Exception:
                if not retry:
                    raise
                # Reconnect backoff: a database that is down sends no event to wait for.
                await asyncio.sleep(delay)
                delay = min(delay * 2, cap)

    def _watch(self, worker: str, grace: float = 0.0) -> None:
        if worker == self.worker or worker in self._watchers or self._stopping:
            return
        task = asyncio.get_running_loop().create_task(self._await_death(worker, grace))
        self._watchers[worker] = task

    async def _await_death(self, worker: str, grace: float) -> None:
        """Block on `worker`'s lock; once it is ours, the worker is gone: release its runs.
        A broken connection (the database restarted) watches again, `grace` seconds after
        this worker reaches the database again (the peer reconnects meanwhile)."""
        conn: Any = None
        again = False
        try:
            conn = await self._reach(retry=bool(grace))
            if grace:
                # Intended wait, not a poll: the database is back, and the peer gets this
                # long to reconnect and take its lock back before it counts as dead.
                await asyncio.sleep(grace)
            await conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", _key(worker))
            try:  # unlisted first: from then on it takes no run (it may live on)
                await conn.execute(f"DELETE FROM {TABLE} WHERE worker = $1", worker)
                await self.release(worker)
            finally:
                await conn.execute(
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))", _key(worker)
                )
        except asyncio.CancelledError:
            raise
        except Exception as e:  # the database went away: watch again once it is back
            logger.info("Watching worker %s failed (%s); watching again.", worker, e)
            again = True
        finally:
            self._watchers.pop(worker, None)
            if conn is not None:
                conn.terminate()
        if again:
            self._watch(worker, grace=REWATCH_GRACE)

"""Which workers are alive, and adopting the runs of those that died.

Postgres: every worker holds a session advisory lock named after its executor id on a
connection it keeps open, and has a row in ``llm_compiler_workers``. Postgres drops the
lock the moment that connection dies (``kill -9`` closes the socket), so each worker
waits on every other worker's lock (one blocked ``pg_advisory_lock`` per peer: no
polling) and, once it gets one, re-enqueues that worker's unfinished runs with DBOS's
recovery; the row is deleted in the same critical section, so exactly one worker adopts.
New workers announce themselves with NOTIFY. A worker started later (e.g. a replacement
started with the same command) adopts the dead rows it finds at start.

A worker whose own lock connection breaks while it runs exits at once: its peers are
about to adopt its runs, and running them on would run tools twice.

SQLite: one process per database file, enforced with an exclusive file lock.
"""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import sys
from typing import IO, Protocol

import asyncpg

from llm_compiler.errors import ConfigurationError

logger = logging.getLogger(__name__)

TABLE = "public.llm_compiler_workers"
CHANNEL = "llm_compiler_workers"
_DDL_LOCK = 0x6C6C6D63  # serializes the CREATE TABLE of workers starting together


class Liveness(Protocol):
    """Started after DBOS launched, stopped after it was destroyed."""

    async def start(self) -> None: ...

    async def stop(self) -> None: ...


class FileLiveness:
    """An exclusive lock on ``<db>.lock``: a second server on one SQLite file is refused."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._file: IO[str] | None = None

    def claim(self) -> None:
        """Take the lock now (before DBOS recovers this store's runs).

        Raises:
            ConfigurationError: Another process serves this store.
        """
        handle = open(self.path, "a")  # noqa: SIM115 - held until stop()
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as e:
            handle.close()
            raise ConfigurationError(
                f"Another process already serves {self.path.removesuffix('.lock')}: a SQLite "
                "store is for one worker (use postgresql://... for several)."
            ) from e
        self._file = handle

    async def start(self) -> None:
        return None

    async def stop(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def _key(worker: str) -> str:
    return f"llm-compiler-worker:{worker}"


class PostgresLiveness:
    """This worker's liveness lock, and watchers adopting the runs of dead peers."""

    def __init__(self, dsn: str, worker: str) -> None:
        self.dsn = dsn
        self.worker = worker
        self._conn: asyncpg.Connection | None = None
        self._watchers: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        self.adopted: list[str] = []
        """Executor ids whose runs this worker re-enqueued."""

    async def start(self) -> None:
        """Take this worker's lock, announce it, and watch every known peer."""
        conn = await asyncpg.connect(self.dsn)
        self._conn = conn
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _DDL_LOCK)
            await conn.execute(
                f"CREATE TABLE IF NOT EXISTS {TABLE} (executor_id text PRIMARY KEY, "
                "host text, pid int, started_at timestamptz DEFAULT now())"
            )
        await conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", _key(self.worker))
        await conn.execute(
            f"INSERT INTO {TABLE} (executor_id, host, pid) VALUES ($1, $2, $3) "
            "ON CONFLICT (executor_id) DO UPDATE SET started_at = now()",
            self.worker,
            os.uname().nodename,
            os.getpid(),
        )
        await conn.add_listener(CHANNEL, self._on_join)
        conn.add_termination_listener(self._on_lost)
        await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, self.worker)
        for row in await conn.fetch(f"SELECT executor_id FROM {TABLE}"):
            self._watch(row["executor_id"])

    async def stop(self) -> None:
        """Stop watching and drop this worker's lock (last, once its runs were released).

        Its row stays: the runs it leaves unfinished are adopted by a peer at once, or by
        the next worker to start, which then deletes the row.
        """
        self._stopping = True
        for task in self._watchers.values():
            task.cancel()
        await asyncio.gather(*self._watchers.values(), return_exceptions=True)
        self._watchers.clear()
        if self._conn is not None:
            await self._conn.close()
            self._conn = None

    def _on_join(self, conn: object, pid: int, channel: str, worker: str) -> None:
        self._watch(worker)

    def _on_lost(self, conn: object) -> None:
        if self._stopping:
            return
        print(  # noqa: T201 - the process ends now; the log may not be flushed
            f"error: worker {self.worker} lost its database connection; stopping so its "
            "runs are finished once, by the other workers.",
            file=sys.stderr,
            flush=True,
        )
        os._exit(75)

    def _watch(self, worker: str) -> None:
        if worker == self.worker or worker in self._watchers or self._stopping:
            return
        task = asyncio.get_running_loop().create_task(self._await_death(worker))
        self._watchers[worker] = task

    async def _await_death(self, worker: str) -> None:
        """Block on `worker`'s lock; once it is ours, the worker is gone: adopt its runs."""
        conn = await asyncpg.connect(self.dsn)
        try:
            await conn.execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", _key(worker))
            try:
                listed = await conn.fetchval(
                    f"SELECT count(*) FROM {TABLE} WHERE executor_id = $1", worker
                )
                if listed:
                    await self._adopt(worker)
                    await conn.execute(f"DELETE FROM {TABLE} WHERE executor_id = $1", worker)
            finally:
                await conn.execute(
                    "SELECT pg_advisory_unlock(hashtextextended($1, 0))", _key(worker)
                )
        except Exception:  # a failed adoption is left to the next worker that watches
            logger.exception("Adopting the runs of worker %s failed", worker)
        finally:
            self._watchers.pop(worker, None)
            await conn.close()

    async def _adopt(self, worker: str) -> None:
        from dbos import DBOS

        # DBOS's own recovery of another executor's PENDING workflows (what its conductor
        # calls): each goes back to its queue, and a live worker dequeues it exactly once.
        handles = await asyncio.to_thread(DBOS._recover_pending_workflows, [worker])
        self.adopted.append(worker)
        logger.warning(
            "Worker %s is gone; %d of its runs were re-enqueued: %s",
            worker,
            len(handles),
            ", ".join(h.workflow_id for h in handles) or "none",
        )

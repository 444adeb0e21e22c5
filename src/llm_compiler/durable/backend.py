"""One process's durable backend: the journal, the worker's liveness, and which runs it holds.

A run row (``llmc_runs``) names the worker that holds the run (``owner``). A run nobody
holds (its worker died or stopped, it waited for input long enough to leave memory, or
every worker was at its ``--max-runs`` when it started) is claimed by a worker with room
for it: one ``UPDATE ... WHERE run_id IN (SELECT ... FOR UPDATE SKIP LOCKED)`` on
Postgres, so each run is claimed by exactly one worker; on SQLite the one process holds
them all. A claimed run resumes from its journal (:meth:`JournalRuntime.resume`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass

from llm_compiler.durable.config import (
    CONNECT_TIMEOUT,
    IDLE_RELEASE,
    OUTAGE_LIMIT,
    DurableConfig,
)
from llm_compiler.durable.journal import RUN_COLUMNS, Journal, RunRecord
from llm_compiler.durable.runtime import JournalRuntime
from llm_compiler.durable.spec import StoreSpec
from llm_compiler.durable.workers import FileLiveness, Liveness, PostgresLiveness
from llm_compiler.errors import ConfigurationError

logger = logging.getLogger(__name__)

#: The channel a worker notifies when runs wait for a worker (queued or released).
QUEUE_CHANNEL = "llmc_queue"
#: Exit status of a worker that stops because its store stayed away (EX_TEMPFAIL).
EXIT_STORE_LOST = 75

#: Runs waiting for a worker (SQL condition on ``llmc_runs``).
ORPHAN = "status = 'running' AND idle_since IS NULL AND owner IS NULL"


def _fatal(message: str) -> None:
    logger.critical("%s; stopping.", message)
    logging.shutdown()  # flushed: os._exit skips it
    os._exit(EXIT_STORE_LOST)


@dataclass
class Durable:
    """The durable backend of one process (one per process and store).

    Attributes:
        config: The store, worker id and limits.
        journal: Where runs are kept.
        runtime: The workflow runtime (give it to ``WorkflowServer``, or run workflows on it).
        max_runs: Runs this process holds at once (None: no cap).
    """

    config: DurableConfig
    journal: Journal
    runtime: JournalRuntime
    liveness: Liveness
    max_runs: int | None = None

    @property
    def spec(self) -> StoreSpec:
        """The store."""
        return self.config.spec

    @property
    def worker(self) -> str:
        """This process's worker id (the ``owner`` of the runs it holds)."""
        return self.config.worker

    @property
    def idle_release(self) -> float:
        """Seconds a run waiting for input stays in memory."""
        return self.config.idle_release

    @property
    def degraded(self) -> bool:
        """Whether the store is unreachable right now (runs pause; requests may wait)."""
        return self.journal.degraded or self.liveness.degraded

    async def holders(self, run_ids: list[str]) -> dict[str, str]:
        """The worker holding (or that last held) each run."""
        if not run_ids:
            return {}
        marks = ", ".join("?" for _ in run_ids)
        rows = await self.journal.fetch(
            f"SELECT run_id, owner FROM llmc_runs WHERE run_id IN ({marks})", *run_ids
        )
        return {str(r): str(o) for r, o in rows if o}

    # ------------------------------------------------------------------ claims

    async def release(self, worker: str) -> None:
        """Hand the unfinished runs of `worker` (dead or stopping) back to the queue."""
        rows = await self.journal.fetch(
            "UPDATE llmc_runs SET owner = NULL WHERE owner = ? AND status = 'running'"
            " RETURNING run_id",
            worker,
        )
        if rows:
            logger.warning(
                "Worker %s is gone; %d run(s) wait for a worker: %s",
                worker,
                len(rows),
                ", ".join(str(r[0]) for r in rows),
            )
            await self.notify_queue()

    async def notify_queue(self) -> None:
        """Wake the workers waiting for runs (Postgres)."""
        if self.spec.kind == "postgres":
            await self.journal.fetch("SELECT pg_notify(?, '')", QUEUE_CHANNEL)

    async def claim(self, room: int | None) -> list[RunRecord]:
        """Take up to `room` runs that nobody holds (None: all); their rows."""
        if room is not None and room <= 0:
            return []
        limit = "" if room is None else f" LIMIT {int(room)}"
        if self.spec.kind == "postgres":
            pick = f"SELECT run_id FROM llmc_runs WHERE {ORPHAN} ORDER BY started_at{limit}"
            pick += " FOR UPDATE SKIP LOCKED"
        else:
            pick = f"SELECT run_id FROM llmc_runs WHERE {ORPHAN} ORDER BY started_at{limit}"
        rows = await self.journal.fetch(
            f"UPDATE llmc_runs SET owner = ? WHERE run_id IN ({pick}) RETURNING {RUN_COLUMNS}",
            self.worker,
        )
        return [RunRecord.of(r) for r in rows]

    async def take(self, run_id: str) -> RunRecord | None:
        """Take `run_id` if nobody holds it (it went idle or waits in the queue)."""
        rows = await self.journal.fetch(
            "UPDATE llmc_runs SET owner = ?, idle_since = NULL WHERE run_id = ?"
            " AND status = 'running' AND owner IS NULL"
            f" RETURNING {RUN_COLUMNS}",
            self.worker,
            run_id,
        )
        return RunRecord.of(rows[0]) if rows else None

    async def start(self) -> None:
        """Open the journal and join the workers; runs left by the dead wait for a worker."""
        await self.journal.open()
        await self.liveness.start()
        if self.spec.kind == "sqlite":  # this process is the only one: its runs are orphans
            await self.journal.fetch(
                "UPDATE llmc_runs SET owner = NULL WHERE status = 'running' AND idle_since IS NULL"
            )
        else:
            await self.journal.fetch(
                "UPDATE llmc_runs SET owner = NULL WHERE owner = ? AND status = 'running'",
                self.worker,
            )

    async def stop(self) -> None:
        """Release the runs this worker holds, close the journal, leave the workers."""
        try:
            await self.journal.commit()
            await self.journal.fetch(
                "UPDATE llmc_runs SET owner = NULL WHERE owner = ? AND status = 'running'",
                self.worker,
            )
            await self.notify_queue()
        except Exception as e:  # the store is away: the next worker releases them
            logger.warning("Could not release this worker's runs: %s", e)
        await self.journal.close()
        await self.liveness.stop()


def prepare(
    spec: str | StoreSpec,
    *,
    worker: str | None = None,
    runtime: Callable[[Journal], JournalRuntime] = JournalRuntime,
    on_fatal: Callable[[str], None] = _fatal,
    cls: type[Durable] | None = None,
    idle_release: float = IDLE_RELEASE,
    outage_limit: float = OUTAGE_LIMIT,
) -> Durable:
    """A durable backend for `spec`, not yet started (no I/O but the SQLite file lock).

    Raises:
        ConfigurationError: A missing driver, an unknown scheme, or a SQLite store that
            another process uses.
    """
    from llm_compiler.durable import check_installed

    check_installed()
    config = DurableConfig.build(
        spec, worker=worker, idle_release=idle_release, outage_limit=outage_limit
    )
    journal = Journal(config, on_fatal=on_fatal)
    held: list[Durable] = []

    async def release(worker: str) -> None:
        await held[0].release(worker)

    liveness: Liveness
    if config.spec.kind == "sqlite":
        lock = FileLiveness(config.spec.url.removeprefix("sqlite:///") + ".lock")
        lock.claim()
        liveness = lock
    else:
        liveness = PostgresLiveness(config, release, on_fatal)
    held.append((cls or Durable)(config, journal, runtime(journal), liveness))
    return held[0]


async def check_reachable(spec: StoreSpec) -> None:
    """A one-line error now, rather than a traceback later."""
    import asyncpg

    try:
        conn = await asyncpg.connect(spec.url, timeout=CONNECT_TIMEOUT)
    except (TimeoutError, OSError, asyncpg.PostgresError, ValueError) as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigurationError(f"Cannot reach the store {spec.shown}: {detail}") from e
    await conn.close()

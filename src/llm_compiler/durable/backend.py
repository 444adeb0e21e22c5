"""One process's durable backend: the journal, the worker's liveness, and which runs it holds.

A run row (``llmc_runs``) names the worker that holds the run (``owner``) and its
ownership ``epoch``. Every change of hands raises the epoch in the same statement: a
claim, a take, a release (by the owner, or of a dead worker's runs by a peer). The
journal writes a run's rows only while the row still holds the epoch its worker took
(:mod:`.journal`), so a worker that was taken for dead, or whose run was released, has
its next write refused and stops that run (see ``docs/durability.md``).

A run nobody holds (its worker died or stopped, it waited for input long enough to
leave memory and an event waits for it, or every worker was at its ``--max-runs`` when
it started) is claimed by a worker with room for it: one ``UPDATE ... WHERE run_id IN
(SELECT ... FOR UPDATE SKIP LOCKED)`` on Postgres, so each run is claimed by exactly one
worker; on SQLite the one process holds them all. A claimed run resumes from its journal
(:meth:`JournalRuntime.resume`).
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass

from llm_compiler.durable.config import (
    CONNECT_TIMEOUT,
    IDLE_RELEASE,
    OUTAGE_LIMIT,
    DurableConfig,
)
from llm_compiler.durable.journal import RUN_COLUMNS, Fenced, Journal, RunRecord
from llm_compiler.durable.result_cache import PRUNE
from llm_compiler.durable.runtime import JournalRuntime
from llm_compiler.durable.spec import StoreSpec
from llm_compiler.durable.workers import TABLE as WORKERS
from llm_compiler.durable.workers import FileLiveness, Liveness, PostgresLiveness
from llm_compiler.errors import ConfigurationError, Unavailable

logger = logging.getLogger(__name__)

#: The channel a worker notifies when runs wait for a worker (queued or released).
QUEUE_CHANNEL = "llmc_queue"
#: Exit status of a worker that stops because its store stayed away (EX_TEMPFAIL).
EXIT_STORE_LOST = 75

#: An inbox row of the run in ``llmc_runs`` that waits for its owner: never handed to one,
#: or handed to an earlier one (it never recorded what the event did).
WAITING = (
    "EXISTS (SELECT 1 FROM llmc_inbox i WHERE i.run_id = llmc_runs.run_id"
    " AND (i.taken IS NULL OR i.taken < llmc_runs.epoch))"
)
#: Runs nobody holds that a worker should take up: queued or released (their start is
#: recorded), and not waiting for input, or waiting with an event sent to them.
ORPHAN = (
    "status = 'running' AND owner IS NULL"
    " AND EXISTS (SELECT 1 FROM llmc_facts s WHERE s.run_id = llmc_runs.run_id"
    f" AND s.kind = 'start') AND (idle_since IS NULL OR {WAITING})"
)
#: The columns a takeover sets: this worker, a new epoch, not idle.
_TAKE = "owner = ?, epoch = epoch + 1, idle_since = NULL"
#: What a release sets: nobody, a new epoch (the releasing worker's writes stop counting).
_RELEASE = "owner = NULL, epoch = epoch + 1"


def exit_on_fatal(message: str) -> None:
    """The served CLI's fatal handler: say why, and end the process (status 75)."""
    logger.critical("%s; stopping.", message)
    logging.shutdown()  # flushed: os._exit skips it
    os._exit(EXIT_STORE_LOST)


def log_fatal(message: str) -> None:
    """A library host's fatal handler: the process lives on; the runs of this backend fail
    (their barriers raise) and its liveness stops."""
    logger.error("Durable runs stop: %s.", message)


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

    def gate(self) -> None:
        """Refuse a run at once while the store does not answer (nothing is started).

        Raises:
            Unavailable: The store does not answer.
        """
        if self.degraded:
            raise Unavailable(
                f"The run store does not answer; nothing was started. Retry after "
                f"{Unavailable.retry_after} s (a run not started now starts once then)."
            )

    async def admit(self, record: RunRecord, start: str) -> bool:
        """The door of every new run, served or in process: refused while the store does
        not answer (:meth:`gate`), else its id is claimed (:meth:`.Journal.create`, the
        run's row and `start` inserted if absent); whether this call won it (else the
        run exists: the caller gets that run).

        Raises:
            Unavailable: The store does not answer.
        """
        self.gate()
        return await self.journal.create(record, start)

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
        """Hand the unfinished runs of `worker` (dead or stopping) back to the queue, and
        those of any worker not listed among the live ones (it took them in the moment it
        was taken for dead, before it knew)."""
        rows = await self.journal.fetch(
            f"UPDATE llmc_runs SET {_RELEASE} WHERE status = 'running' AND (owner = ?"
            f" OR owner NOT IN (SELECT worker FROM {WORKERS}))"
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
        pick = f"SELECT run_id FROM llmc_runs WHERE {ORPHAN} ORDER BY started_at{limit}"
        if self.spec.kind == "postgres":
            pick += " FOR UPDATE SKIP LOCKED"
        rows = await self.journal.fetch(
            f"UPDATE llmc_runs SET {_TAKE} WHERE run_id IN ({pick}){self._listed()}"
            f" RETURNING {RUN_COLUMNS}",
            *self._me(),
        )
        return [self._held(r) for r in rows]

    def _listed(self) -> str:
        """The condition that this worker is listed among the live workers (Postgres): a
        worker taken for dead takes no run until it is listed again, so a run it takes is
        released by its peers if it dies (they release the runs of listed workers only)."""
        if self.spec.kind != "postgres":
            return ""
        return " AND EXISTS (SELECT 1 FROM llmc_workers WHERE worker = ?)"

    def _me(self) -> list[str]:
        """This worker's id, once for ``_TAKE`` and once for :meth:`_listed`."""
        return [self.worker] * (2 if self.spec.kind == "postgres" else 1)

    async def take(self, run_id: str) -> RunRecord | None:
        """Take `run_id` if nobody holds it (it went idle or waits in the queue)."""
        me = self._me()
        rows = await self.journal.fetch(
            f"UPDATE llmc_runs SET {_TAKE} WHERE run_id = ?"
            f" AND status = 'running' AND owner IS NULL{self._listed()} RETURNING {RUN_COLUMNS}",
            *[me[0], run_id, *me[1:]],
        )
        return self._held(rows[0]) if rows else None

    def _held(self, row: tuple[object, ...]) -> RunRecord:
        record = RunRecord.of(row)
        self.journal.hold(record.run_id, record.epoch)
        return record

    async def let_go(self, run_id: str, idle_since: float | None = None) -> bool:
        """Release `run_id`, held here, to the database (`idle_since`: it waits for input),
        if this worker still holds it; whether an event waits for it in the inbox (then
        the queue is woken: a worker with room takes it up)."""
        epoch = self.journal.epochs.get(run_id)
        if epoch is None:
            return False
        try:
            await self.journal.barrier(run_id)
        except Fenced:  # another worker holds it already
            self.journal.let_go(run_id)
            return False
        except Exception as e:  # its rows were refused: it is let go all the same
            logger.warning("Run %s is let go with rows the store refused: %s", run_id, e)
        if idle_since is not None:  # it waits for input: what it was handed and did not
            await self.journal.fetch(  # take in, no step of it takes in (not handed again)
                "DELETE FROM llmc_inbox WHERE run_id = ? AND taken = ? AND EXISTS"
                " (SELECT 1 FROM llmc_runs WHERE run_id = ? AND epoch = ?)",
                run_id,
                epoch,
                run_id,
                epoch,
            )
        await self.journal.fetch(
            f"UPDATE llmc_runs SET {_RELEASE}, idle_since = ? WHERE run_id = ? AND epoch = ?",
            idle_since,
            run_id,
            epoch,
        )
        # Read after the release committed: an event sent meanwhile is seen here, or its
        # sender (which reads the owner after its insert committed) sees the run let go.
        rows = await self.journal.fetch(
            f"SELECT count(*) FROM llmc_runs WHERE run_id = ? AND {WAITING}", run_id
        )
        self.journal.let_go(run_id)
        waiting = bool(rows[0][0])
        if waiting:
            await self.notify_queue()
        return waiting

    async def start(self) -> None:
        """Open the journal and join the workers; runs left by the dead wait for a worker."""
        await self.journal.open()
        await self.liveness.start()
        if self.spec.kind == "sqlite":  # this process is the only one: its runs are orphans
            await self.journal.fetch(
                f"UPDATE llmc_runs SET {_RELEASE} WHERE status = 'running' AND owner IS NOT NULL"
            )
        else:  # its own runs of a past life, and those of workers gone unnoticed
            await self.release(self.worker)

    async def stop(self) -> None:
        """Release the runs this worker holds, close the journal, leave the workers."""
        try:
            await self.journal.commit()
            await self.journal.fetch(
                f"UPDATE llmc_runs SET {_RELEASE} WHERE owner = ? AND status = 'running'",
                self.worker,
            )
            await self.notify_queue()
        except Exception as e:  # the store is away: the next worker releases them
            logger.warning("Could not release this worker's runs: %s", e)
        await self.journal.close()
        await self.liveness.stop()


async def prune(journal: Journal, older_than: float) -> int:
    """Delete the rows of the runs that finished more than `older_than` seconds ago (their
    facts, events, inbox and row), and the inbox rows of every finished run; how many runs
    went. Runs still running are never touched. Expired cached results go too."""
    cutoff = time.time() - older_than
    done = (
        "SELECT run_id FROM llmc_runs WHERE status <> 'running'"
        " AND COALESCE(completed_at, updated_at, started_at) < ?"
    )
    for table in ("llmc_facts", "llmc_events", "llmc_inbox"):
        await journal.fetch(f"DELETE FROM {table} WHERE run_id IN ({done})", cutoff)
    gone = await journal.fetch(
        f"DELETE FROM llmc_runs WHERE run_id IN ({done}) RETURNING run_id", cutoff
    )
    await journal.fetch(
        "DELETE FROM llmc_inbox WHERE run_id IN"
        " (SELECT run_id FROM llmc_runs WHERE status <> 'running')"
    )
    await journal.fetch(PRUNE, time.time())  # expired cached results
    return len(gone)


def prepare(
    spec: str | StoreSpec,
    *,
    worker: str | None = None,
    runtime: Callable[[Journal], JournalRuntime] = JournalRuntime,
    on_fatal: Callable[[str], None] = log_fatal,
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
        liveness = PostgresLiveness(config, release, on_fatal, on_taken=journal.recheck)
    made = runtime(journal)
    if isinstance(liveness, PostgresLiveness):
        made.lease = liveness.lease
    held.append((cls or Durable)(config, journal, made, liveness))
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

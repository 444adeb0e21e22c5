"""One process's durable backend: DBOS configured for a store, its runtime and workflow store."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from llm_compiler.durable.spec import StoreSpec, parse_store
from llm_compiler.errors import ConfigurationError

if TYPE_CHECKING:
    from llama_agents.dbos import DBOSRuntime
    from llama_agents.server import AbstractWorkflowStore
    from workflows.runtime.types.plugin import Runtime

    from llm_compiler.durable.workers import Liveness

logger = logging.getLogger(__name__)

#: Seconds a run waiting for input (a plan approval) stays in memory before it is released
#: to the database; the next event sent to it loads it again, on any worker.
IDLE_TIMEOUT = 30.0
#: How often DBOS looks for queued runs (``--max-runs``) and polls a run's result. DBOS
#: queues are polled by design; this bounds a queued run's admission delay.
POLL_SECONDS = 0.05
#: SQLite has no LISTEN/NOTIFY: DBOS looks for the messages a run's steps send to its
#: control loop this often (DBOS's default, 1 s, made every served SQLite run take ~1 s).
SQLITE_NOTIFY_SECONDS = 0.01
CONNECT_TIMEOUT = 5.0


@dataclass
class Durable:
    """DBOS set up for one store; one per process (DBOS is a process-wide singleton).

    Attributes:
        spec: The store.
        runtime: The DBOS runtime; pass it to workflows run in your own process.
        worker: This process's executor id: runs it holds are marked with it.
        idle_release: Seconds a run waiting for input stays in memory (then it is
            released to the database; the next event sent to it loads it on any worker).
    """

    spec: StoreSpec
    runtime: DBOSRuntime
    worker: str
    liveness: Liveness | None = field(default=None, repr=False)
    idle_release: float = IDLE_TIMEOUT

    @property
    def store(self) -> AbstractWorkflowStore:
        """The workflow store (handlers, events, ticks) in the same database."""
        from llm_compiler.durable.runtime import event_driven_store

        return event_driven_store(self.runtime)

    def server_runtime(self) -> Runtime:
        """The runtime to give ``WorkflowServer``: DBOS, idle release, resume marks, workers."""
        from llm_compiler.durable.runtime import WorkerRuntime, event_driven_store

        event_driven_store(self.runtime)  # before the chain captures the store
        inner = self.runtime.build_server_runtime(idle_timeout=self.idle_release)
        return WorkerRuntime(inner, durable=self)

    async def holders(self, run_ids: list[str]) -> dict[str, str]:
        """The worker (executor id) holding or last holding each run."""
        from dbos import DBOS

        if not run_ids:
            return {}
        found = await DBOS.list_workflows_async(
            workflow_ids=run_ids, load_input=False, load_output=False
        )
        return {w.workflow_id: str(w.executor_id) for w in found if w.executor_id}


async def open_durable(
    spec: str | StoreSpec,
    *,
    worker: str | None = None,
    app_name: str = "llm-compiler",
) -> Durable:
    """Configure DBOS for `spec` after checking the database answers.

    Args:
        spec: ``sqlite:///path`` (one machine) or ``postgresql://...`` (shared by workers).
        worker: This worker's executor id (default: ``local`` for SQLite, a fresh
            ``host-pid-xxxx`` for Postgres, so workers never take each other's live runs).
        app_name: The DBOS application name (workers sharing runs use the same).

    Raises:
        ConfigurationError: A missing driver, an unknown scheme, an unreachable database,
            or a SQLite store already served by another process.
    """
    from llm_compiler.durable import check_installed

    check_installed()
    parsed = spec if isinstance(spec, StoreSpec) else parse_store(spec)
    if not parsed.durable:
        raise ConfigurationError("A durable backend needs sqlite:///... or postgresql://...")
    liveness: Liveness | None
    if parsed.kind == "postgres":
        await _check_reachable(parsed)
        from llm_compiler.durable.workers import PostgresLiveness

        worker = worker or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"
        liveness = PostgresLiveness(parsed.url, worker)
    else:
        from llm_compiler.durable.workers import FileLiveness

        worker = worker or "local"
        liveness = FileLiveness(parsed.url.removeprefix("sqlite:///") + ".lock")
        liveness.claim()
    runtime = _configure(parsed, worker, app_name)
    return Durable(parsed, runtime, worker, liveness)


def _configure(spec: StoreSpec, worker: str, app_name: str) -> DBOSRuntime:
    from dbos import DBOS
    from llama_agents.dbos import DBOSRuntime

    config: dict[str, Any] = {
        "name": app_name,
        "system_database_url": spec.url,
        "executor_id": worker,
        "log_level": "WARNING",
        "run_admin_server": False,
    }
    if spec.kind == "sqlite":
        config["notification_listener_polling_interval_sec"] = SQLITE_NOTIFY_SECONDS
    DBOS(config=config)  # type: ignore[arg-type]
    return DBOSRuntime(polling_interval_sec=POLL_SECONDS, queue_polling_interval_sec=POLL_SECONDS)


async def _check_reachable(spec: StoreSpec) -> None:
    """A one-line error now, rather than a traceback from DBOS's launch."""
    import asyncpg

    try:
        conn = await asyncpg.connect(spec.url, timeout=CONNECT_TIMEOUT)
    except (TimeoutError, OSError, asyncpg.PostgresError, ValueError) as e:
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigurationError(f"Cannot reach the store {spec.shown}: {detail}") from e
    await conn.close()

"""The one configuration of durable runs, served or in your own process."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field

from llm_compiler.durable.spec import StoreSpec, parse_store
from llm_compiler.errors import ConfigurationError

#: Seconds a run waiting for input (a plan approval) stays in memory before it is released
#: to the database; the next event sent to it loads it again, on any worker.
IDLE_RELEASE = 30.0
#: Seconds a worker keeps retrying while its database is unreachable (a restart, a
#: failover); past that it stops, and its runs resume on the next worker to start.
OUTAGE_LIMIT = 120.0
#: Seconds to the first reconnect attempt; each next waits twice as long, up to ``BACKOFF_MAX``.
BACKOFF_FIRST = 0.1
BACKOFF_MAX = 2.0
#: Seconds to wait for a connection to the database.
CONNECT_TIMEOUT = 5.0


@dataclass(frozen=True)
class DurableConfig:
    """How runs are kept: the store, this worker's id and the fault limits.

    Attributes:
        spec: The store (``sqlite:///path`` or ``postgresql://...``).
        worker: This process's worker id (``local`` for SQLite; ``host-pid-xxxx`` for
            Postgres, so workers never take each other's live runs).
        idle_release: Seconds a run waiting for input stays in memory.
        outage_limit: Seconds of database outage a worker rides out before it stops.
    """

    spec: StoreSpec
    worker: str = ""
    idle_release: float = IDLE_RELEASE
    outage_limit: float = OUTAGE_LIMIT
    backoff: tuple[float, float] = field(default=(BACKOFF_FIRST, BACKOFF_MAX))

    @classmethod
    def build(
        cls,
        spec: str | StoreSpec,
        *,
        worker: str | None = None,
        idle_release: float = IDLE_RELEASE,
        outage_limit: float = OUTAGE_LIMIT,
    ) -> DurableConfig:
        """Check and complete a configuration.

        Raises:
            ConfigurationError: Not ``sqlite:///...`` or ``postgresql://...``, or a
                limit that is not positive.
        """
        parsed = spec if isinstance(spec, StoreSpec) else parse_store(spec)
        if not parsed.durable:
            raise ConfigurationError(
                f"The durable store {parsed.shown!r} is not sqlite:///... or postgresql://...."
            )
        if idle_release <= 0 or outage_limit <= 0:
            raise ConfigurationError("idle_release and outage_limit must be positive seconds.")
        if worker is None:
            worker = "local" if parsed.kind == "sqlite" else _fresh_worker_id()
        return cls(parsed, worker, idle_release, outage_limit)


def _fresh_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:4]}"

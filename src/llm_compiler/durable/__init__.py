"""Durable runs: the engine on llama-agents-dbos (DBOS, on SQLite or Postgres).

Served: ``llm-compiler serve --store postgresql://...`` (any number of workers sharing the
runs; :func:`open_durable`, :mod:`.workers`) or ``--store sqlite:///runs.db`` (one worker).
In your own process, :func:`dbos_runtime` (below).

Needs the ``durable`` extra (``pip install 'llm-compiler[durable]'``). The engine itself
imports nothing from here: durability wraps it from outside, as a workflow runtime::

    from llm_compiler import LLMCompilerWorkflow
    from llm_compiler.durable import dbos_runtime

    runtime = dbos_runtime("sqlite:///runs.sqlite")      # or postgresql://user@host/db
    wf = LLMCompilerWorkflow(tools=..., llm=..., runtime=runtime, workflow_name="agent")
    await runtime.launch()            # resumes the runs a dead process left unfinished
    answer = await wf.run(user_msg="...", run_id="order-42")
    await runtime.destroy()

What DBOS journals: each step's outcome (the events it returned and sent) and the order
in which steps finished; the run's state (:class:`~llm_compiler.engine.state.CompilerState`)
is a row written by the steps. On recovery the run is replayed from its journal: finished
steps are not run again (their journaled outcome is used), the steps in flight at the
crash run again. The engine makes that safe: its state holds facts only, and a step run
again after its writes finds them and decides the same (see :mod:`llm_compiler.engine`).

Guarantees, after ``kill -9`` at any point:

- A finished tool call, planner call or joiner call never runs again; the run ends with
  the answer it would have given.
- A call in flight at the crash runs at most once more (at-least-once): a planner call
  cut while its plan streamed is asked again, and the tasks it had already admitted keep
  their ids and results; a tool call runs again with the same
  :func:`~llm_compiler.idempotency_key`, so a tool can deduplicate its side effect.
- Starting a run is idempotent by ``run_id``: the same id again (in this process or
  after a restart) is the same run, and awaiting it gives its answer.

Not guaranteed: events written to the stream by a step that ran again appear twice on
it (the stream is a log for people, not the journal); a tool without an idempotency
check may repeat its side effect once.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from llm_compiler._extras import require
from llm_compiler.durable.backend import POLL_SECONDS, SQLITE_NOTIFY_SECONDS
from llm_compiler.errors import ConfigurationError

if TYPE_CHECKING:
    from workflows.runtime.types.plugin import Runtime

_NEEDED = {
    "llama_agents.dbos": "llama-agents-dbos",
    "dbos": "dbos",
    "asyncpg": "asyncpg",
    "psycopg": "psycopg",
}


def check_installed() -> None:
    """Raise a one-line :class:`ConfigurationError` naming what the durable extra lacks."""
    require("A durable store needs", "durable", _NEEDED)


_EXPORTS = {
    "Durable": "backend",
    "open_durable": "backend",
    "RunResumed": "events",
    "StoreSpec": "spec",
    "parse_store": "spec",
}


def __getattr__(name: str) -> Any:
    """Import the serving side on first use, after checking the ``durable`` extra is there."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _EXPORTS[name] not in ("spec", "events"):
        check_installed()
    module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
    return getattr(module, name)


__all__ = [*_EXPORTS, "check_installed", "dbos_runtime"]


def dbos_runtime(
    database_url: str,
    *,
    app_name: str = "llm-compiler",
    polling_interval: float = POLL_SECONDS,
    sqlite_notify_interval: float = SQLITE_NOTIFY_SECONDS,
    **config: Any,
) -> Runtime:
    """A DBOS runtime journaling runs in `database_url` (``sqlite:///path`` or
    ``postgresql://...``). Call ``await runtime.launch()`` before the first run.

    `polling_interval` is how often, in seconds, a caller waiting for a run's result
    looks for it (DBOS's default is 1 s). On SQLite, DBOS has no LISTEN/NOTIFY and polls
    for the messages a run's steps send to its control loop every
    `sqlite_notify_interval` seconds (DBOS's default is 1 s; a 3-task run measured
    2.1 s with it, 1.7 s with 0.01 s). Other keywords go to ``DBOSRuntime``.

    Raises:
        ConfigurationError: The extra is not installed, or DBOS rejects the URL or
            `app_name` (3 to 30 characters: lowercase letters, digits, ``-`` and ``_``).
    """
    if not database_url.startswith(("sqlite:///", "postgresql://", "postgres://")):
        raise ConfigurationError(
            f"The durable store {database_url!r} is not sqlite:///... or postgresql://...."
        )
    try:
        from dbos import DBOS
        from llama_agents.dbos import DBOSRuntime
    except ImportError as e:
        raise ConfigurationError(
            f"Durable runs need the 'durable' extra (pip install 'llm-compiler[durable]'): {e}."
        ) from e
    try:
        dbos_config: dict[str, Any] = {"name": app_name, "system_database_url": database_url}
        if database_url.startswith("sqlite"):
            dbos_config["notification_listener_polling_interval_sec"] = sqlite_notify_interval
        DBOS(config=dbos_config)  # type: ignore[arg-type]
    except Exception as e:  # DBOS raises its own errors for names, URLs and drivers
        raise ConfigurationError(f"DBOS could not be set up on {database_url!r}: {e}") from e
    from llm_compiler.durable.runtime import WallClockRuntime

    return WallClockRuntime(DBOSRuntime(polling_interval_sec=polling_interval, **config))

"""Durable runs on DBOS: a run survives ``kill -9`` and several workers share one Postgres.

``llm-compiler serve --store postgresql://...`` (or ``sqlite:///runs.db`` on one machine)
runs every workflow under `llama-agents-dbos <https://pypi.org/project/llama-agents-dbos/>`_:
each step's result is checkpointed in the database, so after a crash the run replays its
finished steps from the checkpoints and only re-runs the step that was in flight.

In your own process (no server)::

    from llm_compiler.durable import open_durable

    durable = open_durable("sqlite:///runs.db")      # or postgresql://...
    workflow = LLMCompilerWorkflow(tools=[...], llm=llm, runtime=durable.runtime,
                                   workflow_name="compiler")   # a stable name
    await durable.runtime.launch()                   # resumes unfinished runs
    result = await workflow.run(user_msg="...", run_id="job-1")
    await durable.runtime.destroy()

Needs the ``durable`` extra: ``pip install 'llm-compiler[durable]'``.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

from llm_compiler.errors import ConfigurationError

_NEEDED = {
    "llama_agents.dbos": "llama-agents-dbos",
    "dbos": "dbos",
    "asyncpg": "asyncpg",
    "psycopg": "psycopg",
}


def check_installed() -> None:
    """Raise a one-line :class:`ConfigurationError` naming what the durable extra lacks."""
    missing = [dist for mod, dist in _NEEDED.items() if _find(mod) is None]
    if missing:
        raise ConfigurationError(
            f"A durable store needs {', '.join(missing)}: pip install 'llm-compiler[durable]'"
        )


def _find(module: str) -> object:
    try:
        return importlib.util.find_spec(module)
    except ModuleNotFoundError:
        return None


_EXPORTS = {
    "Durable": "backend",
    "open_durable": "backend",
    "RunResumed": "events",
    "StoreSpec": "spec",
    "parse_store": "spec",
}


def __getattr__(name: str) -> Any:
    """Import the durable API on first use, after checking the ``durable`` extra is there."""
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _EXPORTS[name] not in ("spec", "events"):
        check_installed()
    module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
    return getattr(module, name)


__all__ = [*_EXPORTS, "check_installed"]

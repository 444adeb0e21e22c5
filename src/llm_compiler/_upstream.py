"""Every private name of an upstream package that the project reaches, in one place.

Each is reached only through this module, and ``tests/test_upstream.py`` pins each one:
when an upstream release moves or renames it, that test names it and the module that
holds it, instead of a failure somewhere far away. Upstream packages are imported on
first use (most are optional extras).

=========================================  =============================================
``WorkflowHandler._result_task``           workflows: the run's result future (tracing)
``Workflow._num_concurrent_runs``          workflows: the run cap, read at registration
``WorkflowServer._service``                llama-agents-server: starts and cancels runs
``_WorkflowService._runtime``              llama-agents-server: the server's runtime (a
                                           run's handler record, written at its start)
``..._store.postgres_workflow_store``      llama-agents-server: ``PostgresWorkflowStore``
``..._store.abstract_workflow_store``      llama-agents-server: ``StoredEvent``,
                                           ``StoredTick``, ``decode_persistent_handler``
``mcp.shared._httpx_utils``                mcp: the SDK's own HTTP client settings
``Workflow._get_steps``,                   workflows: the steps of a workflow, asked for on
``Workflow._step_functions_version``       every step call (:class:`KnownSteps` keeps them)
=========================================  =============================================
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from llama_agents.server import AbstractWorkflowStore, WorkflowServer
    from llama_agents.server._service import _WorkflowService
    from llama_agents.server._store.abstract_workflow_store import StoredEvent as StoredEvent
    from llama_agents.server._store.abstract_workflow_store import StoredTick as StoredTick
    from llama_agents.server._store.abstract_workflow_store import (
        decode_persistent_handler as decode_persistent_handler,
    )
    from workflows import Workflow

__all__ = [
    "StoredEvent",
    "StoredTick",
    "decode_persistent_handler",
    "KnownSteps",
    "admit_through",
    "mcp_http_client",
    "postgres_store",
    "result_task",
    "set_concurrent_runs",
    "stored_event_class",
    "workflow_service",
]
#: The logger of the workflow server's endpoints (it logs an error of a start it answers 500).
SERVER_API_LOGGER = "llama_agents.server._api"
#: Names of llama-agents-server's private store module, imported on first use.
_STORE_NAMES = frozenset({"StoredEvent", "StoredTick", "decode_persistent_handler"})


def __getattr__(name: str) -> Any:
    """``StoredEvent``, ``StoredTick``, ``decode_persistent_handler``, loaded on first use."""
    if name in _STORE_NAMES:
        from llama_agents.server._store import abstract_workflow_store

        return getattr(abstract_workflow_store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class KnownSteps:
    """A workflow mixin that finds its steps once instead of on every step call.

    The runtime asks ``workflow._get_steps()`` before each step call, and the workflows
    base answers with ``inspect.getmembers`` over the whole instance (about a sixth of
    the engine's CPU on a fan-out of instant tools). A workflow's steps are its class's
    step methods plus those added with ``add_step`` (which bumps
    ``_step_functions_version``): kept here by name, per class version, and bound again
    on each call (no reference from the instance to its own bound methods).
    """

    _known_steps: tuple[int, tuple[str, ...]] | None = None

    def _get_steps(self) -> dict[str, Any]:
        version = getattr(type(self), "_step_functions_version", 0)
        known = self._known_steps
        if known is None or known[0] != version:
            steps = super()._get_steps()  # type: ignore[misc]
            if not all(getattr(self, n, None) == m for n, m in steps.items()):
                return dict(steps)  # a free-function step: nothing to bind, ask each time
            self._known_steps = known = (version, tuple(steps))
        return {name: getattr(self, name) for name in known[1]}


def result_task(handler: Any) -> asyncio.Future[Any] | None:
    """A workflows handler's result future (None for a handler without one)."""
    result = getattr(handler, "_result_task", None)
    return result if isinstance(result, asyncio.Future) else None


def set_concurrent_runs(workflow: Workflow, runs: int) -> None:
    """Cap a workflow's concurrent runs (no public setter; read when it is registered)."""
    workflow._num_concurrent_runs = runs


def workflow_service(server: WorkflowServer) -> _WorkflowService:
    """The service behind a workflow server's endpoints (in-process start and cancel)."""
    return server._service


def admit_through(server: WorkflowServer, start: Callable[..., Any]) -> Any:
    """Make `start` the service's ``start_workflow`` (every run a server starts, its own
    endpoints' included, comes in by it); the server's runtime, which writes a new run's
    handler record (``run_workflow_handler``)."""
    service = server._service
    service.start_workflow = start  # type: ignore[method-assign]
    return service._runtime


def postgres_store(dsn: str) -> AbstractWorkflowStore:
    """A ``PostgresWorkflowStore`` on `dsn` (not exported at the package's top level)."""
    from llama_agents.server._store.postgres_workflow_store import PostgresWorkflowStore

    return PostgresWorkflowStore(dsn)


def stored_event_class() -> type[StoredEvent]:
    """``StoredEvent``, what a workflow store's ``query_events`` yields."""
    from llama_agents.server._store.abstract_workflow_store import StoredEvent

    return StoredEvent


def mcp_http_client() -> Callable[..., Any]:
    """The MCP SDK's ``create_mcp_http_client`` (its timeouts and redirect settings)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    return create_mcp_http_client

"""Every private name of an upstream package that the project reaches, in one place.

Each is reached only through this module, and ``tests/test_upstream.py`` pins each one:
when an upstream release moves or renames it, that test names it and the module that
holds it, instead of a failure somewhere far away. Upstream packages are imported on
first use (most are optional extras).

=========================================  =============================================
``WorkflowHandler._result_task``           workflows: the run's result future (tracing)
``Workflow._num_concurrent_runs``          workflows: the run cap, read at registration
``WorkflowServer._service``                llama-agents-server: starts and cancels runs
``..._store.postgres_workflow_store``      llama-agents-server: ``PostgresWorkflowStore``
``..._store.abstract_workflow_store``      llama-agents-server: ``StoredEvent``
``DBOSWorkflowStore._factory``             llama-agents-dbos: the store's factory
``DBOSRuntime._workflow_store``            llama-agents-dbos: the runtime's cached store
``DBOS._recover_pending_workflows``        dbos: re-enqueue another executor's runs
``mcp.shared._httpx_utils``                mcp: the SDK's own HTTP client settings
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
    from workflows import Workflow

__all__ = [
    "mcp_http_client",
    "postgres_store",
    "recover_pending_workflows",
    "result_task",
    "set_concurrent_runs",
    "set_workflow_store",
    "store_factory",
    "stored_event_class",
    "workflow_service",
]


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


def postgres_store(dsn: str) -> AbstractWorkflowStore:
    """A ``PostgresWorkflowStore`` on `dsn` (not exported at the package's top level)."""
    from llama_agents.server._store.postgres_workflow_store import PostgresWorkflowStore

    return PostgresWorkflowStore(dsn)


def stored_event_class() -> type[StoredEvent]:
    """``StoredEvent``, what a workflow store's ``query_events`` yields."""
    from llama_agents.server._store.abstract_workflow_store import StoredEvent

    return StoredEvent


def store_factory(store: Any) -> Any:
    """The factory a ``DBOSWorkflowStore`` proxy builds its store with."""
    return store._factory


def set_workflow_store(runtime: Any, store: AbstractWorkflowStore) -> None:
    """Replace the workflow store a ``DBOSRuntime`` caches."""
    runtime._workflow_store = store


def recover_pending_workflows(executor_ids: list[str]) -> list[Any]:
    """DBOS's recovery of the executors' PENDING workflows (blocking: run it in a thread)."""
    from dbos import DBOS

    handles: list[Any] = DBOS._recover_pending_workflows(executor_ids)
    return handles


def mcp_http_client() -> Callable[..., Any]:
    """The MCP SDK's ``create_mcp_http_client`` (its timeouts and redirect settings)."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    return create_mcp_http_client

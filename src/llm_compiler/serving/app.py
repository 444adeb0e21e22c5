"""The HTTP app: llama-agents-server's workflow API, the live page and the AG-UI route.

Everything is one Starlette app (the workflow server's own, so its lifespan, CORS and
error handlers apply): the server's built-in UI, which loads from a CDN, is replaced by
the page in ``static/``; ``/api/info`` tells the page what is served, ``/api/runs``
lists runs with their questions, ``/api/runs/{handler_id}/mermaid`` draws one;
``/agui/{name}`` speaks AG-UI; ``POST /events/{id}`` only takes what clients may send
(:mod:`~llm_compiler.serving.client_events`). A :class:`~llm_compiler.serving.guard.RequestGuard`
wraps it all, and a :class:`~llm_compiler.serving.security.SecurityGuard` wraps that.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from workflows import Workflow
from workflows.events import Event

from llm_compiler.engine.state import CompilerState
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.errors import ConfigurationError
from llm_compiler.events import PlanApprovalResponse
from llm_compiler.serving.guard import MAX_BODY_BYTES, ASGIApp, RequestGuard
from llm_compiler.serving.mermaid import to_mermaid
from llm_compiler.serving.security import SecurityGuard, SecurityPolicy

if TYPE_CHECKING:
    from llama_agents.server import AbstractWorkflowStore, WorkflowServer

    from llm_compiler.durable.store import ServedDurable as Durable

STATIC = Path(__file__).with_name("static")
#: The name the compiler workflow is served under.
COMPILER = "compiler"
DEMO_QUESTION = "What are the capitals of France and Japan?"


@dataclass
class ServedApp:
    """What :func:`build_app` returns.

    Attributes:
        app: The ASGI app to serve (guards, then the workflow server's Starlette app).
        server: The ``WorkflowServer`` (``start()``/``stop()`` it when not served by
            uvicorn's lifespan).
        info: What ``/api/info`` returns.
        policy: Who may use the server (hosts, origins, token).
    """

    app: ASGIApp
    server: WorkflowServer
    info: dict[str, Any] = field(default_factory=dict)
    durable: Durable | None = None
    policy: SecurityPolicy = field(default_factory=SecurityPolicy)


def make_store(spec: str | None) -> AbstractWorkflowStore | None:
    """The workflow store for ``--store``: ``memory`` (None), ``sqlite:///path``, ``postgresql://``.

    Raises:
        ConfigurationError: An unknown scheme.
    """
    from llama_agents.server import SqliteWorkflowStore

    if spec in (None, "", "memory"):
        return None
    if spec.startswith("sqlite:///"):
        path = Path(spec.removeprefix("sqlite:///")).expanduser()
        path.parent.mkdir(parents=True, exist_ok=True)
        return SqliteWorkflowStore(str(path))
    if spec.startswith(("postgres://", "postgresql://")):
        # The only public route to it: the package does not export it at top level.
        from llama_agents.server._store.postgres_workflow_store import PostgresWorkflowStore

        return PostgresWorkflowStore(spec)
    raise ConfigurationError(
        f"Unknown store {spec!r}: use memory, sqlite:///path/to/runs.db or postgresql://..."
    )


def build_app(
    workflows: Mapping[str, Workflow],
    *,
    store: AbstractWorkflowStore | None = None,
    info: Mapping[str, Any] | None = None,
    max_body: int = MAX_BODY_BYTES,
    durable: Durable | None = None,
    max_runs: int | None = None,
    policy: SecurityPolicy | None = None,
) -> ServedApp:
    """Build the app serving `workflows` (name -> workflow) with the live page.

    Args:
        workflows: Registered under their names (``compiler`` is the page's default); an
            ``AgentWorkflow`` team is served through :class:`~llm_compiler.serving.team.ServedTeam`.
        store: Where runs and their events are kept (memory when None).
        info: Extra fields for ``/api/info`` (e.g. ``model``, ``question``).
        max_body: Largest request body in bytes.
        durable: Keep runs in a journal (:func:`llm_compiler.durable.open_durable`): runs survive
            crashes and workers sharing its Postgres share the runs; `store` is ignored.
        max_runs: Runs of each workflow this process holds at once (the rest wait; with
            `durable`, in the database for any worker).
        policy: Who may use the server (default: loopback names, same origin, no token).
    """

    from llm_compiler.serving.agui import agui_route
    from llm_compiler.serving.client_events import gate_route
    from llm_compiler.serving.starts import start_routes

    if not workflows:
        raise ConfigurationError("Give at least one workflow to serve.")
    from llama_index.core.agent.workflow import AgentWorkflow

    from llm_compiler.serving.team import ServedTeam

    workflows = {
        n: ServedTeam(w) if isinstance(w, AgentWorkflow) else w for n, w in workflows.items()
    }
    # Only a compiler run's state is a CompilerState (the question is read from it).
    compilers = {n for n, w in workflows.items() if isinstance(w, LLMCompilerWorkflow)}
    policy = policy or SecurityPolicy()
    server, store = _workflow_server(workflows.values(), store, durable, max_runs, cors(policy))
    extras: dict[str, list[type[Event]]] = {}
    for name, workflow in workflows.items():
        # A human's plan verdict is sent to a running compiler with POST /events/{id}.
        extras[name] = [PlanApprovalResponse] if name in compilers else []
        server.add_workflow(name, workflow, additional_events=extras[name] or None)
    payload = {
        "workflows": list(workflows),
        "default": COMPILER if COMPILER in workflows else next(iter(workflows)),
        "question": DEMO_QUESTION,
        **(info or {}),
    }

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    async def api_info(request: Request) -> Response:
        return JSONResponse(payload)

    async def api_runs(request: Request) -> Response:
        runs = await recent_runs(store, list(workflows), compilers)
        if durable is not None:
            held = await durable.holders([r["run_id"] for r in runs if r["run_id"]])
            for run in runs:
                run["worker"] = held.get(run["run_id"] or "")
        return JSONResponse({"runs": runs})

    async def api_mermaid(request: Request) -> Response:
        chart = await run_mermaid(store, request.path_params["handler_id"])
        if chart is None:
            return JSONResponse({"detail": "Run not found."}, status_code=404)
        return PlainTextResponse(chart, headers={"cache-control": "no-cache"})

    routes: list[BaseRoute] = [
        Route("/", index, methods=["GET"]),
        *([Route("/health", durable_health(durable), methods=["GET"])] if durable else []),
        Route("/api/info", api_info, methods=["GET"]),
        Route("/api/runs", api_runs, methods=["GET"]),
        Route("/api/runs/{handler_id}/mermaid", api_mermaid, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="page"),
        agui_route(server, store, workflows),
    ]
    # Ours first; the server's CDN-loading UI (its catch-all mount named "ui") goes.
    kept = [r for r in server.app.router.routes if getattr(r, "name", None) != "ui"]
    routes.append(gate_route(store, workflows, extras, kept))
    routes += start_routes(store, kept)
    server.app.router.routes[:] = routes + kept
    guarded = RequestGuard(server.app, workflows=list(workflows), max_body=max_body)
    app = SecurityGuard(guarded, policy)
    return ServedApp(app=app, server=server, info=payload, policy=policy, durable=durable)


def durable_health(durable: Durable) -> Any:
    """``GET /health`` of a durable server: ``degraded`` (503) while its database does not
    answer (runs pause, the worker reconnects), else ``healthy``."""

    async def health(request: Request) -> Response:
        if durable.degraded:
            return JSONResponse({"status": "degraded", "worker": durable.worker}, 503)
        return JSONResponse({"status": "healthy", "worker": durable.worker})

    return health


def cors(policy: SecurityPolicy) -> Middleware:
    """CORS for the listed origins only, without credentials (the token is a header)."""
    return Middleware(
        CORSMiddleware,
        allow_origins=sorted(policy.allow_origins),
        allow_methods=["GET", "POST"],
        allow_headers=["authorization", "content-type", "last-event-id"],
        allow_credentials=False,
    )


def _workflow_server(
    workflows: Iterable[Workflow],
    store: AbstractWorkflowStore | None,
    durable: Durable | None,
    max_runs: int | None,
    middleware: Middleware,
) -> tuple[WorkflowServer, AbstractWorkflowStore]:
    """The workflow server on DBOS (`durable`) or on `store`, with the run cap applied."""
    from llama_agents.server import MemoryWorkflowStore, WorkflowServer

    workflows = list(workflows)
    if durable is not None:  # the cap is the worker's: the rest wait in the database
        durable.max_runs = max_runs
        runtime = durable.server_runtime()
        server = WorkflowServer(
            runtime=runtime, workflow_store=durable.store, middleware=[middleware]
        )
        return server, durable.store
    if max_runs is not None:
        for workflow in workflows:
            # No public setter; the in-memory runtime reads it when the workflow is
            # registered (a semaphore per workflow).
            workflow._num_concurrent_runs = max_runs
    store = store or MemoryWorkflowStore()
    return WorkflowServer(workflow_store=store, middleware=[middleware]), store


async def recent_runs(
    store: AbstractWorkflowStore, names: list[str], compilers: set[str], limit: int = 50
) -> list[dict[str, Any]]:
    """The newest runs of `names`, with their questions (read from each run's state)."""
    from llama_agents.server import HandlerQuery

    handlers = await store.query(HandlerQuery(workflow_name_in=names))
    handlers.sort(key=lambda h: h.started_at.timestamp() if h.started_at else 0.0, reverse=True)
    runs = []
    for h in handlers[:limit]:
        runs.append(
            {
                "handler_id": h.handler_id,
                "workflow": h.workflow_name,
                "status": h.status,
                "started_at": h.started_at.isoformat() if h.started_at else None,
                "completed_at": h.completed_at.isoformat() if h.completed_at else None,
                "question": await _question(store, h.run_id, h.workflow_name in compilers),
                "run_id": h.run_id,
                "error": h.error,
            }
        )
    return runs


async def _question(store: AbstractWorkflowStore, run_id: str | None, compiler: bool) -> str | None:
    """The run's question: a compiler's CompilerState, or a served team's ``question`` key."""
    if run_id is None:
        return None
    try:
        if compiler:
            state = await store.create_state_store(run_id, CompilerState).get_state()
            question = getattr(state, "question", None)
        else:
            question = await store.create_state_store(run_id).get("question", None)
    except Exception:  # a state without a question, or none saved yet: none shown
        return None
    return str(question) if question else None


async def run_mermaid(store: AbstractWorkflowStore, handler_id: str) -> str | None:
    """The Mermaid chart of a stored run (None if there is no such run)."""
    from llama_agents.server import HandlerQuery

    found = await store.query(HandlerQuery(handler_id_in=[handler_id]))
    if not found or found[0].run_id is None:
        return None
    events = await store.query_events(found[0].run_id)
    return to_mermaid(e.event.model_dump(mode="json") for e in events)

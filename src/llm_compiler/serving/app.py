"""The HTTP app: llama-agents-server's workflow API, the live page and the AG-UI route.

A parent Starlette app holds our routes (the page in ``static/``; ``/api/info``, what is
served; ``/api/runs``, runs with their questions, newest first, a page at a time;
``/api/runs/{handler_id}``, one of them; ``/api/runs/{handler_id}/mermaid``;
``/agui/{name}``, AG-UI; ``/v1/*``, OpenAI-compatible; ``/mcp``, MCP; ``/a2a`` and its
agent card, A2A) and forwards the workflow server's API routes to the server's own app,
whose CDN-loading UI is left out. A
:class:`~llm_compiler.serving.guard.RequestGuard` in front parses and validates every
request body once (run requests: :mod:`~llm_compiler.serving.start`; events clients send:
:mod:`~llm_compiler.serving.client_events`; AG-UI inputs: :mod:`~llm_compiler.serving.agui`),
and a :class:`~llm_compiler.serving.security.SecurityGuard` stands in front of that.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import AsyncIterator, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from workflows import Workflow
from workflows.events import Event

from llm_compiler import _upstream
from llm_compiler.demo import QUESTION
from llm_compiler.engine.state import CompilerState
from llm_compiler.engine.workflow import LLMCompilerWorkflow
from llm_compiler.errors import ConfigurationError
from llm_compiler.events import PlanApprovalResponse
from llm_compiler.serving.a2a_api import a2a_routes
from llm_compiler.serving.admission import Admission, Refusals
from llm_compiler.serving.agui import agui_body_route, agui_route
from llm_compiler.serving.client_events import events_route
from llm_compiler.serving.guard import (
    MAX_BODY_BYTES,
    ASGIApp,
    BadRequest,
    Receive,
    RequestGuard,
    Scope,
    Send,
)
from llm_compiler.serving.mcp_api import build_mcp
from llm_compiler.serving.mermaid import to_mermaid
from llm_compiler.serving.openai_api import openai_body_route, openai_routes
from llm_compiler.serving.ops import Operations
from llm_compiler.serving.runs import ServedRuns
from llm_compiler.serving.security import SecurityGuard, SecurityPolicy
from llm_compiler.serving.start import run_route

if TYPE_CHECKING:
    from llama_agents.server import AbstractWorkflowStore, PersistentHandler, WorkflowServer

    from llm_compiler.durable.store import ServedDurable as Durable

STATIC = Path(__file__).with_name("static")
#: The name the compiler workflow is served under.
COMPILER = "compiler"
DEMO_QUESTION = QUESTION  # the demo's question, offered first on the page


@dataclass
class ServedApp:
    """What :func:`build_app` returns.

    Attributes:
        app: The ASGI app to serve (guards, then the workflow server's Starlette app).
        server: The ``WorkflowServer`` (``start()``/``stop()`` it when not served by
            uvicorn's lifespan).
        info: What ``/api/info`` returns.
        policy: Who may use the server (hosts, origins, token).
        ops: Probes, the outage gate and the drain state (:mod:`.ops`).
    """

    app: ASGIApp
    server: WorkflowServer
    info: dict[str, Any] = field(default_factory=dict)
    durable: Durable | None = None
    policy: SecurityPolicy = field(default_factory=SecurityPolicy)
    ops: Operations | None = None


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
        return _upstream.postgres_store(spec)
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

    from llama_index.core.agent.workflow import AgentWorkflow

    from llm_compiler.serving.team import ServedTeam

    if not workflows:
        raise ConfigurationError("Give at least one workflow to serve.")
    workflows = {
        n: ServedTeam(w) if isinstance(w, AgentWorkflow) else w for n, w in workflows.items()
    }
    # Only a compiler run's state is a CompilerState (the question is read from it).
    compilers = {n for n, w in workflows.items() if isinstance(w, LLMCompilerWorkflow)}
    policy = policy or SecurityPolicy()
    kept = None if store is None or durable is not None else type(store).__name__
    server, store = _workflow_server(workflows.values(), store, durable, max_runs)
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
    routes = _routes(server, store, payload, compilers, durable)
    runs = ServedRuns(server, store, workflows)
    mcp, mcp_routes = build_mcp(runs, max_body)
    agents = a2a_routes(runs, payload["default"], payload["question"], policy.token is not None)
    parent = Starlette(
        routes=[*routes, *openai_routes(runs), *mcp_routes, *agents, *_forwarded(server)],
        middleware=[cors(policy)],
        exception_handlers={Exception: internal_error},
        lifespan=_lifespan(server, mcp.session_manager.run),
    )
    checks = [
        run_route(workflows, extras),
        agui_body_route(workflows),
        events_route(store, workflows, extras),
        openai_body_route(workflows),
    ]
    guarded = RequestGuard(Refusals(parent), checks, max_body=max_body)
    ops = Operations(workflows, durable, kept)
    Admission(server, ops)  # every run, whatever surface asks, comes in by it
    app = ops.wrap(SecurityGuard(ops.gate(guarded), policy))
    return ServedApp(app, server, payload, durable, policy, ops)


def _routes(
    server: WorkflowServer,
    store: AbstractWorkflowStore,
    payload: dict[str, Any],
    compilers: set[str],
    durable: Durable | None,
) -> list[BaseRoute]:
    """Our routes: the page, ``/api/*`` and AG-UI."""
    names = list(payload["workflows"])

    async def index(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-cache"})

    async def favicon(request: Request) -> Response:
        return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")

    async def api_info(request: Request) -> Response:
        return JSONResponse(payload)

    async def api_runs(request: Request) -> Response:
        try:
            limit, before = _page(request)
        except BadRequest as e:
            return JSONResponse(e.body(), status_code=e.status)
        runs, following = await recent_runs(store, names, compilers, limit, before)
        if durable is not None:
            held = await durable.holders([r["run_id"] for r in runs if r["run_id"]])
            for run in runs:
                run["worker"] = held.get(run["run_id"] or "")
        return AsciiJSONResponse({"runs": runs, "next": following})

    async def api_run(request: Request) -> Response:
        row = await run_row(store, request.path_params["handler_id"], compilers)
        if row is None:
            return JSONResponse({"detail": "Run not found."}, status_code=404)
        return AsciiJSONResponse(row)

    async def api_mermaid(request: Request) -> Response:
        chart = await run_mermaid(store, request.path_params["handler_id"])
        if chart is None:
            return JSONResponse({"detail": "Run not found."}, status_code=404)
        # Text stored before the door refused lone surrogates still draws.
        body = chart.encode("utf-8", "replace")
        return Response(body, media_type="text/plain", headers={"cache-control": "no-cache"})

    return [
        Route("/", index, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        *([Route("/health", durable_health(durable), methods=["GET"])] if durable else []),
        Route("/api/info", api_info, methods=["GET"]),
        Route("/api/runs", api_runs, methods=["GET"]),
        Route("/api/runs/{handler_id}", api_run, methods=["GET"]),
        Route("/api/runs/{handler_id}/mermaid", api_mermaid, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC), name="page"),
        agui_route(server, store),
    ]


def _lifespan(
    server: WorkflowServer, *others: Callable[[], AbstractAsyncContextManager[Any]]
) -> Callable[[Starlette], AbstractAsyncContextManager[None]]:
    """The workflow server app's own lifespan (it starts and stops the server's runs), with
    `others` (the MCP server's session manager) inside it."""

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with server.app.router.lifespan_context(server.app), AsyncExitStack() as stack:
            for other in others:
                await stack.enter_async_context(other())
            yield

    return lifespan


def _forwarded(server: WorkflowServer) -> list[BaseRoute]:
    """The workflow server's API routes, each handed to the server's own app (its error
    handlers apply, a bodiless status kept bodiless); its UI, a catch-all mount that loads
    a CDN page, is not among them."""
    server.app.add_exception_handler(HTTPException, http_error)
    return [
        Route(r.path, server.app, methods=r.methods, name=r.name)
        for r in server.app.routes
        if isinstance(r, Route)
    ]


async def http_error(request: Request, exc: Exception) -> Response:
    """An HTTP error as JSON, as the workflow server answers it, but a 204 or 304 with no
    body (the server answers a stream of a run that just ended with a 204; a body there
    breaks the connection)."""
    if not isinstance(exc, HTTPException):
        raise exc
    if exc.status_code in (204, 304):
        return Response(status_code=exc.status_code, headers=exc.headers)
    return JSONResponse({"detail": exc.detail}, status_code=exc.status_code, headers=exc.headers)


async def internal_error(request: Request, exc: Exception) -> Response:
    """A failure of our routes as JSON, as the workflow server answers its own."""
    return JSONResponse({"detail": f"Internal server error: {exc}"}, status_code=500)


class AsciiJSONResponse(JSONResponse):
    """JSON with non-ASCII text escaped: a lone surrogate stored earlier still encodes."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":")).encode("ascii")


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
) -> tuple[WorkflowServer, AbstractWorkflowStore]:
    """The workflow server on a durable journal (`durable`) or on `store`, with the run cap."""
    from llama_agents.server import MemoryWorkflowStore, WorkflowServer

    # The parent app applies CORS; an empty list would bring back the server's default
    # (every origin, with credentials), so its slot gets a pass-through.
    inner = [Middleware(PassThrough)]
    if durable is not None:  # the cap is the worker's: the rest wait in the database
        durable.max_runs = max_runs
        runtime = durable.server_runtime()
        server = WorkflowServer(runtime=runtime, workflow_store=durable.store, middleware=inner)
        return server, durable.store
    if max_runs is not None:
        for workflow in workflows:
            # The in-memory runtime reads it when the workflow is registered (a semaphore).
            _upstream.set_concurrent_runs(workflow, max_runs)
    store = store or MemoryWorkflowStore()
    return WorkflowServer(workflow_store=store, middleware=inner), store


class PassThrough:
    """ASGI middleware that does nothing (fills the workflow server's middleware slot)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


#: Runs per page of ``/api/runs`` (``?limit=``): the default and the most.
RUNS_PAGE, MAX_RUNS_PAGE = 50, 200
_Key = tuple[float, str]


async def recent_runs(
    store: AbstractWorkflowStore,
    names: list[str],
    compilers: set[str],
    limit: int = RUNS_PAGE,
    before: _Key | None = None,
) -> tuple[list[dict[str, Any]], str | None]:
    """The newest `limit` runs of `names` older than `before`, with their questions, and
    the cursor of the next page (None on the last)."""
    handlers = await newest_handlers(store, names, limit + 1, before)
    page = handlers[:limit]
    runs = [await _run_row(store, h, h.workflow_name in compilers) for h in page]
    following = _cursor(_key(page[-1])) if len(handlers) > limit else None
    return runs, following


async def newest_handlers(
    store: AbstractWorkflowStore, names: list[str], count: int, before: _Key | None
) -> list[PersistentHandler]:
    """The newest `count` handlers of `names` started before `before`.

    A durable store answers with one ordered, limited query (``newest``); the memory
    store's handlers are read where they are; other stores have no ordered or limited
    query, so theirs are fetched, but only `count` are kept (a heap, no sort).
    """
    from llama_agents.server import HandlerQuery, MemoryWorkflowStore

    newest = getattr(store, "newest", None)
    if newest is not None:
        found_newest: list[PersistentHandler] = await newest(names, count, before)
        return found_newest
    wanted = set(names)
    if isinstance(store, MemoryWorkflowStore):
        found: Iterable[PersistentHandler] = store.handlers.values()  # read in one go
    else:
        found = await store.query(HandlerQuery(workflow_name_in=names))
    kept = (h for h in found if h.workflow_name in wanted and (before is None or _key(h) < before))
    return heapq.nlargest(count, kept, key=_key)


def _key(handler: PersistentHandler) -> _Key:
    """A handler's place in the list: its start time, then its id."""
    started = handler.started_at.timestamp() if handler.started_at else 0.0
    return (started, handler.handler_id)


def _cursor(key: _Key) -> str:
    return f"{key[0]!r}~{key[1]}"


def _page(request: Request) -> tuple[int, _Key | None]:
    """``limit`` and ``before`` of a ``/api/runs`` request, or BadRequest."""
    text = request.query_params.get("limit", str(RUNS_PAGE))
    if not text.isdigit() or not 1 <= int(text) <= MAX_RUNS_PAGE:
        raise BadRequest(400, f"limit takes a whole number from 1 to {MAX_RUNS_PAGE}.")
    cursor = request.query_params.get("before")
    if cursor is None:
        return int(text), None
    started, _, handler_id = cursor.partition("~")
    try:
        return int(text), (float(started), handler_id)
    except ValueError:
        raise BadRequest(400, "before takes the next cursor of an earlier page.") from None


async def run_row(
    store: AbstractWorkflowStore, handler_id: str, compilers: set[str]
) -> dict[str, Any] | None:
    """One run as ``/api/runs`` lists it (None if there is no such run)."""
    from llama_agents.server import HandlerQuery

    found = await store.query(HandlerQuery(handler_id_in=[handler_id]))
    if not found:
        return None
    return await _run_row(store, found[0], found[0].workflow_name in compilers)


async def _run_row(
    store: AbstractWorkflowStore, h: PersistentHandler, compiler: bool
) -> dict[str, Any]:
    return {
        "handler_id": h.handler_id,
        "workflow": h.workflow_name,
        "status": h.status,
        "started_at": h.started_at.isoformat() if h.started_at else None,
        "completed_at": h.completed_at.isoformat() if h.completed_at else None,
        "question": await _question(store, h.run_id, compiler),
        "run_id": h.run_id,
        "error": h.error,
    }


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

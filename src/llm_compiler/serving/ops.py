"""What a platform runs the server by: probes, failing fast in an outage, the drain state.

* ``GET /livez``: 200 while the process answers HTTP (a database outage does not fail it:
  a worker rides that out, and a restart would not help).
* ``GET /readyz``: 200 when the worker accepts runs (started, not draining), its store
  answers and its model endpoints answer; else 503. Both are open without the token and
  without a Host check, and say nothing but ``{"status": "ok"}`` or
  ``{"status": "unavailable"}`` (why is logged, once per change); ``/readyz`` adds the
  store the worker keeps its runs in (its password masked), so a worker on the wrong one
  shows.
* While the durable store does not answer, sending an event and listing runs
  (``/api/runs``, ``/handlers``) answer 503 with ``Retry-After`` at once, before the
  request reaches the workflow server. A run asked for meanwhile, or while the worker
  drains, is refused by the admission every run comes in by (:mod:`.admission`), on
  every surface: nothing was started, so the client's retry starts the run once.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from llm_compiler.errors import Unavailable
from llm_compiler.serving.guard import ASGIApp, Message, Receive, Scope, Send, reply

if TYPE_CHECKING:
    from workflows import Workflow

    from llm_compiler.durable.store import ServedDurable

logger = logging.getLogger(__name__)

#: Seconds a client is told to wait before retrying a request refused in an outage.
RETRY_AFTER = Unavailable.retry_after
#: Seconds a model endpoint's answer counts for readiness (probes do not hit it each time).
MODEL_CHECK_TTL = 10.0
#: Seconds a model endpoint has to answer a readiness check.
MODEL_CHECK_TIMEOUT = 3.0
PROBES = frozenset({"/livez", "/readyz"})
#: Requests that would wait on the store (a run's start is the admission's to refuse).
_REFUSED_IN_OUTAGE = re.compile(r"^(?:/events/[^/]+|/api/runs(?:/.*)?|/handlers(?:/.*)?)/?$")


class Operations:
    """The probes' state and checks of one served app (see the module docs).

    Args:
        workflows: The served workflows (their models' endpoints are checked).
        durable: The durable backend, if any (its store is checked).
        store: Where runs are kept, as ``/readyz`` shows it (default: the durable
            store's URL, its password masked, else ``memory``).
    """

    def __init__(
        self,
        workflows: Mapping[str, Workflow],
        durable: ServedDurable | None = None,
        store: str | None = None,
    ) -> None:
        self.durable = durable
        self.store = store or (durable.spec.shown if durable is not None else "memory")
        self.workflows = dict(workflows)
        self.started = False
        self.draining = False
        self.endpoints = sorted(set(model_endpoints(workflows.values())))
        self._checked: dict[str, tuple[float, bool]] = {}
        self._last_reason: str | None = None
        self.extra_routes: dict[str, Callable[[], Awaitable[tuple[int, bytes, str]]]] = {}

    @property
    def outage(self) -> bool:
        """Whether the durable store does not answer right now."""
        return self.durable is not None and self.durable.degraded

    async def unready(self) -> str | None:
        """Why this worker should get no traffic now (None: ready)."""
        if not self.started:
            reason: str | None = "not started"
        elif self.draining:
            reason = "draining"
        elif self.outage:
            reason = "the store does not answer"
        else:
            down = [e for e, ok in zip(self.endpoints, await self._models(), strict=True) if not ok]
            reason = f"the model endpoint {down[0]} does not answer" if down else None
        if reason != self._last_reason:
            logger.info("Ready: %s.", "yes" if reason is None else f"no, {reason}")
            self._last_reason = reason
        return reason

    async def _models(self) -> list[bool]:
        return list(await asyncio.gather(*(self._answers(e) for e in self.endpoints)))

    async def _answers(self, endpoint: str) -> bool:
        """Whether `endpoint` answered HTTP lately (any status below 500)."""
        import httpx

        now = time.monotonic()
        at, ok = self._checked.get(endpoint, (0.0, False))
        if now - at < MODEL_CHECK_TTL:
            return ok
        try:
            async with httpx.AsyncClient(timeout=MODEL_CHECK_TIMEOUT) as client:
                ok = (await client.get(endpoint.rstrip("/") + "/models")).status_code < 500
        except httpx.HTTPError:
            ok = False
        self._checked[endpoint] = (time.monotonic(), ok)
        return ok

    async def drain(self, grace: float) -> None:
        """Stop taking runs and let the tool calls in flight finish, for up to `grace`
        seconds; calls not started yet wait (with a durable store, for the worker that
        takes their run over: they start there, nothing is cut). Then what the runs
        recorded is committed, ready for the handover."""
        self.draining = True
        runtime = self.durable.served if self.durable is not None else None
        if runtime is not None:
            runtime.stop_claiming()
            runtime.calls_gate = asyncio.get_running_loop().create_future()
        calls: set[asyncio.Task[Any]] = set()
        for workflow in self.workflows.values():
            in_flight = getattr(workflow, "tool_calls_in_flight", None)
            calls |= in_flight() if in_flight is not None else set()
        held = len(runtime.holding) if runtime is not None else 0
        logger.info(
            "Draining: %d tool calls in flight, %d runs held; up to %g s.", len(calls), held, grace
        )
        pending: set[asyncio.Task[Any]] = set()
        if calls:
            _, pending = await asyncio.wait(calls, timeout=grace)
        if pending:
            logger.warning(
                "The drain grace (%g s) is over with %d tool calls in flight; handing over.",
                grace,
                len(pending),
            )
        if self.durable is not None and not self.outage:
            await self.durable.journal.commit()
        logger.info("Drained; handing the runs over.")

    def serve_metrics(self) -> None:
        """Record metrics and serve them at ``GET /metrics`` (Prometheus text; behind the
        token like the API). Needs the ``tracing`` extra.

        Raises:
            ConfigurationError: The extra is missing.
        """
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        from llm_compiler.tracing import metrics

        worker = self.durable.worker if self.durable is not None else None
        registry = metrics.start_metrics(worker)
        recorder = metrics.recorder()
        assert recorder is not None
        if self.durable is not None:
            recorder.gauges.outage = lambda: self.outage
            time_commits(self.durable.journal)

        async def scrape() -> tuple[int, bytes, str]:
            recorder.gauges.queued = await self.queued()
            return 200, generate_latest(registry), CONTENT_TYPE_LATEST

        self.extra_routes["/metrics"] = scrape

    async def queued(self) -> int | None:
        """Runs waiting in the durable store for a worker (None: no store, or no answer)."""
        from llm_compiler.durable.backend import ORPHAN

        if self.durable is None or self.outage:
            return None
        query = self.durable.journal.fetch(f"SELECT count(*) FROM llmc_runs WHERE {ORPHAN}")
        try:
            rows = await asyncio.wait_for(query, MODEL_CHECK_TIMEOUT)
        except (TimeoutError, OSError):
            return None
        return int(rows[0][0])

    def wrap(self, app: ASGIApp) -> ASGIApp:
        """`app` with the probes answered in front of it (put it in front of the security
        guard)."""
        return _Front(app, self)

    def gate(self, app: ASGIApp) -> ASGIApp:
        """`app` behind the outage gate, with :attr:`extra_routes` (``GET`` paths) answered
        (put it behind the security guard)."""
        return _Inner(app, self)


def time_commits(journal: Any) -> None:
    """Record how long each commit of `journal` takes (its driver's writes)."""
    from llm_compiler.tracing.metrics import record_commit

    write = journal.driver.write

    async def timed(*args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await write(*args)  # what the fence refused
        finally:
            record_commit(time.perf_counter() - started)

    journal.driver.write = timed


def model_endpoints(workflows: Iterable[Any]) -> list[str]:
    """The HTTP base URLs (``api_base``) of the models `workflows` call."""
    found: list[str] = []
    for workflow in workflows:
        llms = [getattr(workflow, "llm", None)]
        team = getattr(workflow, "team", None)
        agents = getattr(team, "agents", None) or {}
        llms += [getattr(a, "llm", None) for a in agents.values()]
        for llm in llms:
            base = getattr(llm, "api_base", None)
            if isinstance(base, str) and base.startswith(("http://", "https://")):
                found.append(base)
    return found


class _Front:
    """Answers the probes; passes the rest on, and notes the startup and shutdown."""

    def __init__(self, app: ASGIApp, ops: Operations) -> None:
        self.app, self.ops = app, ops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, self._watch_lifespan(send))
            return
        path, method = scope.get("path", ""), scope.get("method", "GET")
        if scope["type"] != "http" or method not in ("GET", "HEAD"):
            await self.app(scope, receive, send)
        elif path in PROBES:
            ready = path == "/livez" or await self.ops.unready() is None
            said = {"status": "ok" if ready else "unavailable"}
            said |= {"store": self.ops.store} if path == "/readyz" else {}
            body = json.dumps(said).encode()
            await _answer(send, 200 if ready else 503, body, "application/json")
        else:
            await self.app(scope, receive, send)

    def _watch_lifespan(self, send: Send) -> Send:
        async def watched(message: Message) -> None:
            if message["type"] == "lifespan.startup.complete":
                self.ops.started = True
            elif message["type"] == "lifespan.shutdown.complete":
                self.ops.started = False
            await send(message)

        return watched


class _Inner:
    """The extra routes; 503 with Retry-After for requests that would wait on a store that
    does not answer."""

    def __init__(self, app: ASGIApp, ops: Operations) -> None:
        self.app, self.ops = app, ops

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        route = self.ops.extra_routes.get(scope.get("path", ""))
        if route is not None and scope["type"] == "http" and scope.get("method") == "GET":
            await _answer(send, *await route())
            return
        if (
            scope["type"] == "http"
            and self.ops.outage
            and _REFUSED_IN_OUTAGE.match(scope.get("path", ""))
            and not (scope.get("method") == "GET" and scope["path"].startswith("/events/"))
        ):
            detail = (
                f"The run store does not answer; nothing was done. Retry after {RETRY_AFTER} s."
            )
            await reply(send, 503, detail, [(b"retry-after", str(RETRY_AFTER).encode())])
            return
        await self.app(scope, receive, send)


async def _answer(send: Send, status: int, body: bytes, kind: str) -> None:
    headers = [
        (b"content-type", kind.encode()),
        (b"content-length", b"%d" % len(body)),
        (b"cache-control", b"no-store"),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})

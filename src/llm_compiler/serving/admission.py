"""The door every served run comes in by, whatever surface asked for it.

The native ``POST /workflows/{name}/run`` and ``run-nowait``, ``/v1/chat/completions`` and
``/v1/responses``, ``/a2a``, ``/mcp`` and AG-UI all start a run through the workflow
server's ``start_workflow``, which :class:`Admission` replaces (:meth:`Admission.start`):

- while the worker drains, or its durable store does not answer, the run is refused at
  once with :class:`~llm_compiler.errors.Unavailable` (503, ``Retry-After``): nothing is
  started, so a client's retry starts the run once;
- a handler id names one run: a start naming one that exists (or that another request,
  on this worker or another, is starting) gets that run, never a second one; on a durable
  store the id is claimed in the database (:meth:`~llm_compiler.durable.backend.Durable.admit`),
  with the run's start, before the run starts, so the start is committed before any
  surface answers.

A surface answers a refusal in its protocol (an OpenAI error object, an A2A task
rejected, an MCP tool error); :class:`Refusals` turns the native endpoints' answer to it
(the workflow server answers any error of ``start_workflow`` with a 500) into the 503.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from workflows import Workflow
from workflows.events import StartEvent

from llm_compiler import _upstream
from llm_compiler.errors import Unavailable
from llm_compiler.serving.guard import ASGIApp, Message, Receive, Scope, Send, reply

if TYPE_CHECKING:
    from llama_agents.client.protocol import HandlerData
    from llama_agents.server import WorkflowServer
    from workflows import Context

    from llm_compiler.serving.ops import Operations


@dataclass
class _Refusal:
    """Where :meth:`Admission.start` leaves its refusal of the current request."""

    error: Unavailable | None = None


_REFUSAL: ContextVar[_Refusal | None] = ContextVar("llmc_refusal", default=None)


class _QuietRefusals(logging.Filter):
    """Drops the workflow server's error log of a run the admission refused (a 503 the
    client retries, not a failure)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, Unavailable)


_QUIET = _QuietRefusals()


class Admission:
    """Every run of `server` starts by :meth:`start` (see the module).

    Args:
        server: The workflow server (its ``start_workflow`` is replaced).
        ops: The worker's drain and outage state.
    """

    def __init__(self, server: WorkflowServer, ops: Operations) -> None:
        self.service = _upstream.workflow_service(server)
        self.store = self.service.store
        self.ops = ops
        self._runtime = _upstream.admit_through(server, self.start)
        self._starting: dict[str, asyncio.Future[None]] = {}
        logging.getLogger(_upstream.SERVER_API_LOGGER).addFilter(_QUIET)

    def gate(self) -> None:
        """Refuse a new run while this worker drains or its store does not answer.

        Raises:
            Unavailable: It does.
        """
        if self.ops.draining:
            raise Unavailable(
                "This worker is draining; nothing was started (another worker takes it). "
                f"Retry after {Unavailable.retry_after} s."
            )
        if self.ops.durable is not None:
            self.ops.durable.gate()

    async def start(
        self,
        workflow: Workflow,
        handler_id: str,
        start_event: StartEvent | None = None,
        context: Context | None = None,
    ) -> HandlerData:
        """Start a run of `workflow` as `handler_id`, or give the run that has that id.

        Raises:
            Unavailable: The worker drains or its store does not answer (nothing started).
        """
        try:
            self.gate()
            while (other := self._starting.get(handler_id)) is not None:
                await asyncio.shield(other)  # this worker starts it already: that run
            self._starting[handler_id] = asyncio.get_running_loop().create_future()
            try:
                existing = await self.service.load_handler(handler_id)
                if existing is not None:
                    return existing
                return await self._start(workflow, handler_id, start_event, context)
            finally:
                self._starting.pop(handler_id).set_result(None)
        except Unavailable as e:
            refusal = _REFUSAL.get()
            if refusal is not None:
                refusal.error = e
            raise

    async def _start(
        self,
        workflow: Workflow,
        handler_id: str,
        start_event: StartEvent | None,
        context: Context | None,
    ) -> HandlerData:
        """The run's id claimed (a durable store), its handler written, the run started."""
        run_id = uuid.uuid4().hex
        admit = getattr(self.store, "admit", None)
        if admit is not None:
            if start_event is None:
                raise ValueError("A served run starts with its start event.")
            body = workflow.runtime.get_serializer(workflow).serialize(start_event)
            if not await admit(run_id, handler_id, workflow.workflow_name, body):
                existing = await self.service.load_handler(handler_id)
                if existing is None:
                    raise Unavailable(f"Run {handler_id!r} was deleted as it was started.")
                return existing  # another worker started it
        await self._runtime.run_workflow_handler(handler_id, workflow.workflow_name, run_id)
        workflow.run(ctx=context, start_event=start_event, run_id=run_id)
        started = await self.service.load_handler(handler_id)
        if started is None:
            raise RuntimeError(f"Run {handler_id!r} has no handler after its start.")
        return started


class Refusals:
    """ASGI middleware: a request whose run the admission refused, which the app behind
    answered with a 500 (the workflow server's answer to any error of its start), is
    answered 503 with ``Retry-After`` and the refusal's detail. (The workflow server logs
    nothing of it: :class:`_QuietRefusals`.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = _Refusal()
        token = _REFUSAL.set(refusal)
        replaced = False

        async def answer(message: Message) -> None:
            nonlocal replaced
            if message["type"] == "http.response.start":
                replaced = refusal.error is not None and message["status"] == 500
            if not replaced:
                await send(message)
            elif message["type"] == "http.response.start":
                assert refusal.error is not None
                retry = [(b"retry-after", str(Unavailable.retry_after).encode())]
                await reply(send, 503, refusal.error.detail, retry)

        try:
            await self.app(scope, receive, answer)
        finally:
            _REFUSAL.reset(token)

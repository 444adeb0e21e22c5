"""``POST /workflows/{name}/run`` and ``run-nowait``: a handler id names one run, for good.

The workflow server starts a new run under a handler id a client names even when a run
finished under it, replacing that run's record (its question disappears from the run
list); and it takes any text as an id. These routes stand in front of the server's own:
an id must look like one (:data:`HANDLER_ID`: letters, digits, ``_ - . :``, at most 128,
not starting with a dot), else 400; an id some run already has is a 409.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from starlette.routing import Route

from llm_compiler.serving.guard import (
    BadRequest,
    Receive,
    Scope,
    Send,
    parse_json_object,
    replay,
    reply,
)

if TYPE_CHECKING:
    from llama_agents.server import AbstractWorkflowStore

HANDLER_ID = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9_.:-]{0,127}")


def check_handler_id(value: Any) -> None:
    """Raise :class:`BadRequest` (400) unless `value` is a usable handler id."""
    if not isinstance(value, str) or not HANDLER_ID.fullmatch(value):
        shown = repr(value)[:80]
        raise BadRequest(
            400,
            f"Invalid handler_id {shown}: use 1 to 128 letters, digits, '_', '-', '.' or ':' "
            "(not starting with '.').",
        )


class StartGate:
    """The ASGI endpoint of a run route, in front of the server's own (see the module)."""

    def __init__(self, store: AbstractWorkflowStore, forward: Route) -> None:
        self.store, self.forward = store, forward

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        from llama_agents.server import HandlerQuery

        body = b""
        try:
            body = await _body(receive)
            handler_id = parse_json_object(body).get("handler_id")
            if handler_id is not None:
                check_handler_id(handler_id)
                found = await self.store.query(HandlerQuery(handler_id_in=[handler_id]))
                if found:
                    raise BadRequest(
                        409,
                        f"A run with handler_id {handler_id!r} exists ({found[0].status}); "
                        "a handler id names one run: choose another.",
                    )
        except BadRequest as e:
            await reply(send, e.status, e.detail)
            return
        await self.forward.handle(scope, replay(body, receive), self._durably(send))

    def _durably(self, send: Send) -> Send:
        """`send`, answering only once the store committed the new run (durable stores)."""
        committed = getattr(self.store, "committed", None)
        if committed is None:
            return send

        async def after_commit(message: Any) -> None:
            if message["type"] == "http.response.start":
                await committed()
            await send(message)

        return after_commit


def start_routes(store: AbstractWorkflowStore, server_routes: Sequence[Any]) -> list[Route]:
    """The gated run routes (listed before the server's own)."""
    out = []
    for route in server_routes:
        if isinstance(route, Route) and route.path.startswith("/workflows/{name}/run"):
            out.append(Route(route.path, StartGate(store, route), methods=["POST"]))
    return out


async def _body(receive: Receive) -> bytes:
    """The whole request body (the guard in front already bounded its size)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise BadRequest(400, "Client disconnected before sending the body.")
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)

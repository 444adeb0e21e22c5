"""An ASGI guard in front of the workflow server: size limits and request validation.

The workflow server turns some bad requests into 500s (an empty question only fails
inside the run) and reads bodies of any size. The guard reads request bodies up to a
limit, checks run requests before the server sees them, and replays the body.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Collection, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Largest request body accepted (a question, a sent event, an AG-UI input).
MAX_BODY_BYTES = 256 * 1024
_RUN_PATH = re.compile(r"^/workflows/(?P<name>[^/]+)/(run|run-nowait)/?$")
_AGUI_PATH = re.compile(r"^/agui/(?P<name>[^/]+)/?$")


class BadRequest(Exception):
    """A request the guard answers itself with `status` and `detail`."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail


class RequestGuard:
    """Wraps an ASGI app; rejects oversized bodies and invalid run requests with a 4xx.

    Args:
        app: The app to protect.
        workflows: Names of the registered workflows (others get a 404 on run paths).
        max_body: Largest request body in bytes.
    """

    def __init__(
        self, app: ASGIApp, workflows: Collection[str], max_body: int = MAX_BODY_BYTES
    ) -> None:
        self.app = app
        self.workflows = workflows
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        try:
            body = await self._read_body(scope, receive)
            check_request(scope["path"], body, self.workflows)
        except BadRequest as e:
            await reply(send, e.status, e.detail)
            return
        await self.app(scope, replay(body, receive), send)

    async def _read_body(self, scope: Scope, receive: Receive) -> bytes:
        length = dict(scope.get("headers") or []).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            raise BadRequest(413, f"Request body too large (limit {self.max_body} bytes).")
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise BadRequest(400, "Client disconnected before sending the body.")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                raise BadRequest(413, f"Request body too large (limit {self.max_body} bytes).")
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)


def check_request(path: str, body: bytes, workflows: Collection[str]) -> None:
    """Validate a run or AG-UI request body; raise :class:`BadRequest` when it is wrong."""
    run = _RUN_PATH.match(path)
    agui = _AGUI_PATH.match(path)
    match = run or agui
    if match is None:
        return
    name = match["name"]
    if name not in workflows:
        known = ", ".join(sorted(workflows)) or "none"
        raise BadRequest(404, f"Unknown workflow {name!r}; known: {known}.")
    data = parse_json_object(body)
    if run is not None:
        _check_start_event(data)


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or :class:`BadRequest`."""
    try:
        data = json.loads(body or b"{}")
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(400, f"Malformed JSON body: {e}") from None
    if not isinstance(data, dict):
        raise BadRequest(400, "The JSON body must be an object.")
    return data


def _check_start_event(data: dict[str, Any]) -> None:
    start = data.get("start_event", data.get("kwargs"))
    if not isinstance(start, dict):
        raise BadRequest(400, 'Give the question as {"start_event": {"user_msg": "..."}}.')
    question = start.get("user_msg")
    if not isinstance(question, str) or not question.strip():
        raise BadRequest(400, "start_event.user_msg must be a non-empty question.")
    if start.get("compiler_run_id") is not None:  # it keys the run's events and journal
        raise BadRequest(400, "start_event.compiler_run_id is chosen by the server, not a client.")


def replay(body: bytes, receive: Receive) -> Receive:
    """A receive callable that yields `body` once, then defers to the real one."""
    sent = False

    async def once() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return once


async def reply(
    send: Send, status: int, detail: str, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Answer with `status` and ``{"detail": detail}``."""
    payload = json.dumps({"detail": detail}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})

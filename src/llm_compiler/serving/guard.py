"""The body-parsing middleware: every request body is read, parsed and validated once.

:class:`RequestGuard` reads a request body up to a size limit, parses it as JSON once
(refusing JSON nested too deep and text that is not Unicode), runs the validator of the
route it is for, and puts the result in the request's scope (:func:`parsed`) for our
endpoints. What reaches the app is the body the validator passes on, so a layer behind
never sees what the guard did not check.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from llm_compiler.errors import RequestError

if TYPE_CHECKING:
    from pydantic import ValidationError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Largest request body accepted (a question, a sent event, an AG-UI input).
MAX_BODY_BYTES = 256 * 1024
#: Deepest nesting of lists and objects accepted in a request body.
MAX_JSON_DEPTH = 64
#: Where the guard leaves a validated body in the request's scope.
SCOPE_KEY = "llm_compiler.body"
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOO_DEEP = f"The JSON body is nested deeper than {MAX_JSON_DEPTH} levels."


class BadRequest(RequestError):
    """A request the guard answers itself with `status` and `detail` (and `fields`, more
    members of the JSON answer, e.g. a task's ``state`` or an edit's field ``errors``)."""

    def __init__(self, status: int, detail: str, fields: Mapping[str, Any] | None = None) -> None:
        super().__init__(status, detail)
        self.fields = dict(fields or {})

    def body(self) -> dict[str, Any]:
        """The JSON answer: ``detail`` and the `fields`."""
        return {"detail": self.detail, **self.fields}


@dataclass(frozen=True)
class Checked:
    """A validated body: `value` for our endpoints, `body` (bytes) for the app behind."""

    value: Any
    body: bytes


#: A route's validator: the path's match and the parsed JSON object in, a Checked out.
Validator = Callable[["re.Match[str]", dict[str, Any], bytes], Awaitable[Checked]]


@dataclass(frozen=True)
class BodyRoute:
    """The POST path a validator checks (a regex over the whole path)."""

    path: re.Pattern[str]
    validate: Validator


class RequestGuard:
    """ASGI middleware: bounded bodies, parsed once, validated by their route.

    Args:
        app: The app behind.
        routes: Validators by path; a JSON body of any other path is only parsed.
        max_body: Largest request body in bytes.
    """

    def __init__(
        self, app: ASGIApp, routes: Sequence[BodyRoute] = (), max_body: int = MAX_BODY_BYTES
    ) -> None:
        self.app = app
        self.routes = list(routes)
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        try:
            checked = await self._check(scope["path"], await self._read_body(scope, receive))
        except BadRequest as e:
            await reply(send, e.status, e.detail, fields=e.fields)
            return
        scope[SCOPE_KEY] = checked.value
        await self.app(scope, replay(checked.body, receive), send)

    async def _check(self, path: str, body: bytes) -> Checked:
        data = parse_json_object(body)
        for route in self.routes:
            match = route.path.match(path)
            if match is not None:
                return await route.validate(match, data, body)
        return Checked(data, body)

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


def parsed(scope: Scope) -> Any:
    """The validated body :class:`RequestGuard` left for this request."""
    return scope[SCOPE_KEY]


def parse_json_object(body: bytes) -> dict[str, Any]:
    """The body as a JSON object (see :func:`loads_checked`), or BadRequest."""
    data = loads_checked(body or b"{}")
    if not isinstance(data, dict):
        raise BadRequest(400, "The JSON body must be an object.")
    return data


def loads_checked(text: str | bytes) -> Any:
    """JSON of text at most :data:`MAX_JSON_DEPTH` deep, or BadRequest."""
    try:
        data = json.loads(text)
    except RecursionError:
        raise BadRequest(400, _TOO_DEEP) from None
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(400, f"Malformed JSON body: {e}") from None
    check_json(data)
    return data


def check_json(data: Any) -> None:
    """Refuse nesting deeper than :data:`MAX_JSON_DEPTH` and lone surrogates in strings."""
    stack = [(data, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, str):
            if _SURROGATE.search(node):
                raise BadRequest(
                    400,
                    "The JSON body holds a lone UTF-16 surrogate (such as \\ud800): not text. "
                    "Send valid Unicode.",
                )
            continue
        if not isinstance(node, dict | list):
            continue
        if depth > MAX_JSON_DEPTH:
            raise BadRequest(400, _TOO_DEEP)
        items = [*node.keys(), *node.values()] if isinstance(node, dict) else node
        stack.extend((item, depth + 1) for item in items)


def field_errors(error: ValidationError, limit: int = 6) -> str:
    """Every invalid or missing field of a validation error, by name (the first `limit`)."""
    parts = []
    for item in error.errors()[:limit]:
        where = ".".join(str(p) for p in item["loc"]) or "body"
        parts.append(f"{where}: {item['msg']}")
    more = len(error.errors()) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


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
    send: Send,
    status: int,
    detail: str,
    extra: list[tuple[bytes, bytes]] | None = None,
    fields: Mapping[str, Any] | None = None,
) -> None:
    """Answer with `status` and ``{"detail": detail, **fields}``."""
    payload = json.dumps({"detail": detail, **(fields or {})}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]
    headers += extra or []
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})

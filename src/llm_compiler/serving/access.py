"""The access log (``serve --access-log``): a record per request, with its fields.

Logged on the logger named "llm_compiler.access" at INFO once the response ends, with ``method``,
``path`` (without the query string), ``status``, ``duration_ms`` (from the request to the
end of the response; for an event stream, its whole life) and ``handler_id`` when the path
names a run. Text logs show them as one line; JSON logs as fields
(:class:`~llm_compiler.logs.JsonFormatter`).
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from llm_compiler.serving.guard import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger("llm_compiler.access")
#: Paths that name a run by its handler id (events, handlers, the run list's entries).
_RUN_PATH = re.compile(r"^/(?:events|handlers|api/runs)/([^/]+)")


class AccessLog:
    """ASGI middleware logging each HTTP request once it is answered."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app fails before it answers

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            _log(scope, status, (time.perf_counter() - started) * 1000)


def _log(scope: Scope, status: int, duration_ms: float) -> None:
    path = str(scope.get("path", ""))
    fields: dict[str, Any] = {
        "method": scope.get("method", ""),
        "path": path,
        "status": status,
        "duration_ms": round(duration_ms, 1),
    }
    run = _RUN_PATH.match(path)
    if run is not None:
        fields["handler_id"] = run.group(1)
    logger.info("%s %s %d %.1f ms", fields["method"], path, status, duration_ms, extra=fields)

"""Real MCP servers (official SDK) as subprocesses on loopback, for the MCP tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp_fixtures import HttpServer  # noqa: E402


@pytest.fixture
def http_server() -> Iterator[type[HttpServer]]:
    """Start HTTP servers with ``http_server(argv, env)``; all are killed at the end."""
    started: list[HttpServer] = []

    class Started(HttpServer):
        def __init__(self, argv: list[str], env: dict[str, str] | None = None) -> None:
            super().__init__(argv, env)
            started.append(self)

    yield Started
    for server in started:
        server.stop()

"""The demo tools (encyclopedia ``search`` and ``lookup``, ``calculator``) as an MCP server.

Run over stdio (what ``tools_from_mcp("python -m llm_compiler.demo.mcp_server")`` starts)::

    python -m llm_compiler.demo.mcp_server

or over streamable HTTP on loopback (``--port 0`` picks a free port; the first line
printed is the endpoint's URL)::

    python -m llm_compiler.demo.mcp_server --http --port 8765

Needs the ``mcp`` extra. ``DEMO_TOOL_LATENCY`` sets the lookups' delay, as in ``make demo``.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import inspect
import socket
import sys
from collections.abc import Callable
from typing import Any, cast

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations

from llm_compiler.demo import tools as demo_tools


def build_server() -> MCPServer:
    """An MCP server with the demo tools; their results are structured (typed) values."""
    server: MCPServer = MCPServer(
        "llm-compiler-demo",
        instructions="An offline encyclopedia (countries, mountains, rivers, planets, people) "
        "and a calculator.",
        log_level="WARNING",
    )
    tools = cast("list[Callable[..., Any]]", demo_tools.TOOLS)
    for fn in tools:  # lookups: clients may run them again (llm-compiler: ``pure``)
        server.add_tool(_telling(fn), annotations=ToolAnnotations(read_only_hint=True))
    return server


def _telling(fn: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` whose ValueError/LookupError messages reach the client.

    The SDK reports other exceptions as "Error executing tool X" only; the demo's own
    messages ("No entry for 'Atlantis'") are what lets the joiner replan.
    """

    @functools.wraps(fn)
    async def call(*args: Any, **kwargs: Any) -> Any:
        try:
            result = fn(*args, **kwargs)
            return await result if inspect.isawaitable(result) else result
        except (ValueError, LookupError) as e:
            raise ToolError(str(e)) from e

    return call


async def serve_http(server: MCPServer, host: str = "127.0.0.1", port: int = 0) -> None:
    """Serve `server` over streamable HTTP; print the endpoint's URL once listening."""
    import uvicorn

    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    app = server.streamable_http_app(host=host)
    config = uvicorn.Config(app, log_level="warning")
    uv = uvicorn.Server(config)
    startup = uv.startup

    async def announce(sockets: list[socket.socket] | None = None) -> None:
        await startup(sockets=sockets)
        shown = f"[{host}]" if ":" in host else host
        print(f"http://{shown}:{sock.getsockname()[1]}/mcp", flush=True)  # noqa: T201

    uv.startup = announce  # type: ignore[method-assign]
    await uv.serve(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """Entry point: stdio by default, ``--http`` for streamable HTTP."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--http", action="store_true", help="serve streamable HTTP")
    parser.add_argument("--host", default="127.0.0.1", help="HTTP bind address")
    parser.add_argument("--port", type=int, default=0, help="HTTP port (0: a free one)")
    args = parser.parse_args(argv)
    server = build_server()
    if args.http:
        asyncio.run(serve_http(server, args.host, args.port))
    else:
        server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())

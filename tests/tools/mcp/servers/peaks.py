"""A real MCP server (official SDK) for the tests: typed tools and faults on request.

stdio by default; ``--http`` serves streamable HTTP on a free loopback port and prints
the URL. Environment:

- ``PEAKS_BARRIER=n``: every ``height`` call waits until n calls are in flight (proof
  that they overlap: sequential calls would time out there).
- ``PEAKS_BROKEN_FLAG=path``: ``crash`` creates the file; while it exists the server
  refuses to start.
- ``PEAKS_STARTS=path``: each process appends its pid to the file when it starts.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from pathlib import Path

import uvicorn
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel

HEIGHTS = {"Everest": 8849, "K2": 8611, "Kangchenjunga": 8586}
if os.environ.get("PEAKS_STARTS"):
    with open(os.environ["PEAKS_STARTS"], "a") as starts:
        starts.write(f"{os.getpid()}\n")
FLAG = os.environ.get("PEAKS_BROKEN_FLAG")
if FLAG and Path(FLAG).exists():
    print(f"refusing to start: {FLAG} says the last run crashed", file=sys.stderr, flush=True)
    sys.exit(1)

server: MCPServer = MCPServer("peaks", log_level="WARNING")
_barrier = asyncio.Barrier(int(os.environ.get("PEAKS_BARRIER", "1")))
_state = {"in_flight": 0, "cancelled": 0}
_changed = asyncio.Condition()


class Peak(BaseModel):
    name: str
    height: int


async def _bump(key: str, by: int) -> None:
    async with _changed:
        _state[key] += by
        _changed.notify_all()


@server.tool()
async def height(peak: str) -> int:
    """The height of a mountain in metres."""
    if peak not in HEIGHTS:
        raise ToolError(f"No mountain called {peak!r}.")
    try:
        await asyncio.wait_for(_barrier.wait(), 10)
    except TimeoutError:
        raise ToolError("height calls did not overlap: the barrier timed out") from None
    return HEIGHTS[peak]


@server.tool()
def subtract(a: int, b: int) -> int:
    """a minus b."""
    return a - b


@server.tool()
def peak_info(name: str) -> Peak:
    """A mountain's name and height."""
    return Peak(name=name, height=HEIGHTS[name])


@server.tool()
def peak_names() -> list[str]:
    """The known mountains."""
    return list(HEIGHTS)


@server.tool()
def describe(name: str):  # noqa: ANN201 - no annotation: an unstructured (text) result
    """Text about a mountain."""
    return f"{name} is {HEIGHTS[name]} m high."


@server.tool(name="peak.rank")
def rank(from_: str = "Everest") -> int:
    """A tool whose name is no identifier; its rank among the known mountains."""
    return sorted(HEIGHTS, key=HEIGHTS.__getitem__, reverse=True).index(from_) + 1


@server.tool()
def fail(message: str) -> str:
    """Always reports an error with `message`."""
    raise ToolError(message)


@server.tool()
async def hang(x: str) -> str:
    """Never returns; counts its cancellations."""
    await _bump("in_flight", 1)
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        await asyncio.shield(_bump("cancelled", 1))
        raise
    finally:
        await asyncio.shield(_bump("in_flight", -1))
    return x


@server.tool()
async def wait_until(key: str, at_least: int, timeout: float = 10) -> int:
    """Wait until `hang` calls in flight (key "in_flight") or cancelled reach `at_least`."""

    async def reached() -> None:
        async with _changed:
            await _changed.wait_for(lambda: _state[key] >= at_least)

    try:
        await asyncio.wait_for(reached(), timeout)
    except TimeoutError:
        pass
    return _state[key]


@server.tool()
def header(name: str, ctx: Context) -> str | None:
    """The value of an HTTP request header (None on stdio)."""
    return (ctx.headers or {}).get(name)


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
def crash() -> str:
    """Exits the server process at once."""
    if FLAG:
        Path(FLAG).touch()
    print("crashing on purpose", file=sys.stderr, flush=True)
    os._exit(3)


async def serve_http() -> None:
    """Streamable HTTP on a free loopback port; the URL is printed once it listens.

    (Not llm_compiler.demo.mcp_server.serve_http: importing llm_compiler would double
    this server's start-up time.)
    """
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    uv = uvicorn.Server(uvicorn.Config(server.streamable_http_app(), log_level="warning"))
    startup = uv.startup

    async def announce(sockets=None) -> None:
        await startup(sockets=sockets)
        print(f"http://127.0.0.1:{sock.getsockname()[1]}/mcp", flush=True)

    uv.startup = announce
    await uv.serve(sockets=[sock])


if __name__ == "__main__":
    if "--http" in sys.argv:
        asyncio.run(serve_http())
    else:
        server.run("stdio")

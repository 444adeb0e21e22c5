"""Loading the tools of MCP servers: :func:`tools_from_mcp` and :class:`MCPTools`."""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Sequence
from typing import Any

from llm_compiler.errors import ConfigurationError
from llm_compiler.tools.mcp.connection import MCPConnection
from llm_compiler.tools.mcp.tool import MCPTool


class MCPTools(list[MCPTool]):
    """The tools of one or more MCP servers, loaded by ``await`` or ``async with``.

    Loading opens each connection (takes a reference, see :class:`MCPConnection`);
    ``async with`` gives the references back at the end; after ``await``, call
    :meth:`aclose` yourself. A connection nobody else opened is then closed for good:
    its tools raise :class:`MCPServerError` instead of starting a server again.
    """

    def __init__(
        self,
        connections: Sequence[MCPConnection],
        include: Sequence[str] | None = None,
        exclude: Sequence[str] = (),
    ) -> None:
        super().__init__()
        self.connections = list(connections)
        self.include = None if include is None else list(include)
        self.exclude = set(exclude)
        self._opened: list[MCPConnection] = []  # the references this loader holds
        self._loaded = False

    async def load(self) -> MCPTools:
        """Open every connection (one reference each) and list its tools; once.

        Raises:
            MCPServerError: A server did not start or answer, or a connection is closed;
                the connections opened so far are given back.
            ConfigurationError: `include` names a tool no server has, or two servers
                have a tool of the same name (give one a ``prefix``).
        """
        if self._loaded:
            return self
        try:
            for connection in self.connections:
                await connection.open()
                self._opened.append(connection)
                self.extend(t for t in await self._listed(connection) if self._wanted(t.name))
            self._check_names()
        except BaseException:
            await self.aclose()
            raise
        self._loaded = True
        return self

    async def _listed(self, connection: MCPConnection) -> list[MCPTool]:
        return [MCPTool(connection, listed) for listed in await connection.list_tools()]

    def _check_names(self) -> None:
        seen: dict[str, MCPTool] = {}
        for tool in self:
            other = seen.setdefault(tool.name, tool)
            if other is not tool:
                raise ConfigurationError(
                    f"Two MCP tools are named {tool.name!r} (servers {other.connection.name} "
                    f"and {tool.connection.name}): give one server a prefix, e.g. "
                    f"MCPConnection(..., prefix='x_'), or exclude one."
                )
        missing = [n for n in self.include or () if n not in seen]
        if missing:
            raise ConfigurationError(
                f"No MCP server has the tool(s) {', '.join(map(repr, missing))} "
                f"(servers: {', '.join(c.name for c in self.connections)})."
            )

    def _wanted(self, name: str) -> bool:
        return (self.include is None or name in self.include) and name not in self.exclude

    async def aclose(self) -> None:
        """Give back the connections this loader opened (the last user closes each)."""
        opened, self._opened = self._opened, []
        await asyncio.gather(*(c.aclose() for c in opened))

    def __await__(self) -> Generator[Any, None, MCPTools]:
        return self.load().__await__()

    async def __aenter__(self) -> MCPTools:
        return await self.load()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def tools_from_mcp(
    *servers: str | Sequence[str] | MCPConnection,
    include: Sequence[str] | None = None,
    exclude: Sequence[str] = (),
    **options: Any,
) -> MCPTools:
    """Tools from MCP servers: ``await`` it, or use it with ``async with``.

    Args:
        servers: URLs (streamable HTTP), command lines (stdio), or :class:`MCPConnection`.
        include: Only these tools (an unknown name is a ``ConfigurationError``); names
            as plans see them, with the server's ``prefix``.
        exclude: Not these tools.
        options: :class:`MCPConnection` options (``env``, ``cwd``, ``headers``,
            ``connect_timeout``, ``call_timeout``, ``prefix``, ``policy``,
            ``tool_policies``, ``max_concurrency``) for servers given as text.
    """
    if not servers:
        raise ConfigurationError("tools_from_mcp needs at least one MCP server.")
    connections = [
        s if isinstance(s, MCPConnection) else MCPConnection(s, **options) for s in servers
    ]
    return MCPTools(connections, include, exclude)

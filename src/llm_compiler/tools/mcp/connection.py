"""One MCP server and its session: :class:`MCPConnection`.

A connection goes through three phases, never back (httpx's client does the same)::

    UNOPENED --open()--> OPEN --the last aclose()--> CLOSED

Each ``open()`` (or ``async with``) takes a reference and each ``aclose()`` gives one back;
the last one closes the session and the connection for good. Using a connection that is
not open (a call, a tool listing, ``open()`` again after it closed) raises
:class:`MCPServerError` at once and starts nothing, so no server process outlives the
connection's owner.

While the connection is open, one session serves every task and run; parallel tasks share
it (MCP multiplexes requests). The session lives in a task of its own, so a transport that
breaks ends that task, never the caller's. A call whose server failed to start, died or
broke the connection raises :class:`MCPServerError` (the executor makes it an error
observation); the next call starts a new session. Cancelling a call (a cancelled run,
``tool_timeout``) cancels the request on the server (the MCP cancellation notification).
Sessions belong to the event loop that opened them: a call from another loop opens a new
one.

A stdio server gets only a safe subset of the environment (``PATH``, ``HOME``, ...; the
SDK's default) plus ``env``; what it writes to stderr is kept in a temporary file, and
its last lines explain a failure to start or a crash.
"""

from __future__ import annotations

import asyncio
import enum
import os
import shlex
import tempfile
from collections.abc import Generator, Mapping, Sequence
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import IO, Any, TextIO, cast

from llm_compiler import _upstream
from llm_compiler.errors import ConfigurationError, LLMCompilerError
from llm_compiler.tools.policy import ToolPolicy

#: Characters of a stdio server's stderr quoted in an error message.
STDERR_TAIL = 1500
_CONNECTION_CLOSED = -32000  # the SDK's code for a transport that went away


class MCPServerError(LLMCompilerError):
    """An MCP server could not be started or reached, broke its connection, answered
    with something that is no MCP result, or its connection is not open."""


class _Phase(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


@dataclass
class _Session:
    """One session of one event loop: the SDK client, held open by the `runner` task
    until `stop` is set or the transport ends; `reason` says why it ended badly."""

    loop: asyncio.AbstractEventLoop | None = None
    runner: asyncio.Task[None] | None = None
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    client: Any = None
    reason: str = ""
    broken: bool = False  # the transport went away (else it ended because we stopped it)

    @property
    def ended(self) -> bool:
        return self.runner is not None and self.runner.done()

    @property
    def usable(self) -> bool:
        return (
            self.client is not None
            and not self.ended
            and not self.stop.is_set()
            and self.loop is asyncio.get_running_loop()
        )


class MCPConnection:
    """One MCP server: a stdio command or a streamable-HTTP URL, and its session.

    Args:
        server: ``http://`` or ``https://`` URL (streamable HTTP), else a command line
            (a string, split like a shell does, or an argv list) started over stdio.
        env: Variables added to a stdio server's environment.
        cwd: A stdio server's working directory.
        headers: HTTP headers sent to a URL server (e.g. ``Authorization``).
        connect_timeout: Seconds to start the server and finish the MCP handshake.
        call_timeout: Seconds one call may take (None: no limit of its own; the run's
            ``tool_timeout`` still applies).
        prefix: Put before each of this server's tool names in plans (``"geo_"`` makes
            its ``length`` the tool ``geo_length``); the server is still called with its
            own name. For two servers whose tools share a name.
        policy: The :class:`~llm_compiler.tools.policy.ToolPolicy` of this server's tools
            (default: what each tool's MCP annotations state, ``readOnlyHint`` -> pure,
            ``idempotentHint`` -> idempotent, else the default policy).
        tool_policies: Policies of single tools, by their name on the server.
        max_concurrency: Most calls to this server at once in a run (a limit its tools
            share, ``mcp:<name>``).

    Open it with ``async with`` (or ``open()`` and ``aclose()``); :func:`tools_from_mcp`
    does so for the connections it loads. See the module docstring for its lifetime.
    """

    def __init__(
        self,
        server: str | Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        headers: Mapping[str, str] | None = None,
        connect_timeout: float = 30.0,
        call_timeout: float | None = None,
        prefix: str = "",
        policy: ToolPolicy | None = None,
        tool_policies: Mapping[str, ToolPolicy] | None = None,
        max_concurrency: int | None = None,
    ) -> None:
        self.url: str | None = None
        self.argv: list[str] = []
        if isinstance(server, str) and server.strip().startswith(("http://", "https://")):
            self.url = server.strip()
        else:
            self.argv = shlex.split(server) if isinstance(server, str) else [str(a) for a in server]
            if not self.argv:
                raise ConfigurationError("An MCP server needs a URL or a command, got nothing.")
        self.env = dict(env or {})
        self.cwd = cwd
        self.headers = dict(headers or {})
        self.connect_timeout = connect_timeout
        self.call_timeout = call_timeout
        self.prefix = prefix
        self.name = self.url or shlex.join(self.argv)
        self.policy = policy
        self.tool_policies = dict(tool_policies or {})
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError("An MCP server's max_concurrency must be at least 1.")
        self.max_concurrency = max_concurrency
        self.sessions_opened = 0
        """How many sessions were opened (1 + reconnections)."""
        self._phase = _Phase.UNOPENED
        self._users = 0  # open() calls not yet matched by an aclose()
        self._session = _Session()
        self._opening: asyncio.Future[_Session] | None = None

    def __repr__(self) -> str:
        return f"MCPConnection({self.name!r}, {self._phase.value})"

    # ------------------------------------------------------------------ lifetime

    @property
    def closed(self) -> bool:
        """Whether the connection was closed (for good)."""
        return self._phase is _Phase.CLOSED

    async def open(self) -> None:
        """Take a reference; start the server (stdio) or connect (HTTP) unless open.

        Raises:
            MCPServerError: The connection was closed, or the server did not start or
                did not finish the handshake in time (the reference is given back).
        """
        if self._phase is _Phase.CLOSED:
            raise self._refusal()
        self._users += 1
        self._phase = _Phase.OPEN
        try:
            await self._current()
        except BaseException:
            self._users -= 1
            if self._users == 0:
                self._phase = _Phase.UNOPENED
                await self._stop_session()
            raise

    async def aclose(self) -> None:
        """Give a reference back; the last one closes the session and the connection.

        A stdio server gets EOF and is ended if it lingers. Closing a connection that is
        not open closes it too (it can no longer be opened); closing it again does nothing.
        """
        if self._phase is _Phase.OPEN:
            self._users -= 1
            if self._users > 0:
                return
        if self._phase is not _Phase.CLOSED:
            self._phase = _Phase.CLOSED
            await self._stop_session()

    async def __aenter__(self) -> MCPConnection:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _refusal(self) -> MCPServerError:
        """The error for using a connection that is not open."""
        if self._phase is _Phase.CLOSED:
            return MCPServerError(
                f"The MCP connection to {self.name} is closed (aclose() or the end of its "
                "`async with`): make a new connection to call this server again."
            )
        return MCPServerError(
            f"The MCP connection to {self.name} is not open: use `async with` (or "
            "`await open()`) first, or load its tools with tools_from_mcp()."
        )

    async def _stop_session(self) -> None:
        """End this loop's session, one still starting included."""
        loop = asyncio.get_running_loop()
        opening = self._opening
        if opening is not None and opening.get_loop() is loop:
            await asyncio.wait({opening})  # a session still starting is closed too
        session = self._session
        if session.loop is not loop:
            return  # never opened, or on another loop: nothing this loop can close
        session.stop.set()
        if session.runner is not None:
            await asyncio.wait({session.runner}, timeout=10)

    async def _current(self) -> _Session:
        """This loop's session, started if there is none; only while the connection is open."""
        if self._phase is not _Phase.OPEN:
            raise self._refusal()
        if self._session.usable:
            return self._session
        if self._opening is None or self._opening.get_loop() is not asyncio.get_running_loop():
            # Parallel callers share one attempt, and one failure.
            self._opening = asyncio.ensure_future(self._start())
        opening = self._opening
        try:
            session = await asyncio.shield(opening)
        finally:
            if opening.done() and self._opening is opening:
                self._opening = None
        if self._phase is not _Phase.OPEN:  # closed while it was starting
            raise self._refusal()
        return session

    async def _start(self) -> _Session:
        if self._session.loop is asyncio.get_running_loop():
            self._session.stop.set()  # an ended session's runner finishes
        # A session of another (maybe closed) loop is let go: its server gets EOF when
        # the pipes are collected.
        session = _Session(loop=asyncio.get_running_loop())
        ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        session.runner = asyncio.create_task(self._run(session, ready), name=f"mcp {self.name}")
        try:
            await asyncio.wait_for(asyncio.shield(ready), self.connect_timeout)
        except TimeoutError:
            session.runner.cancel()  # ends the process it started, if any
            await asyncio.wait({session.runner}, timeout=10)
            if ready.done() and not ready.cancelled():
                ready.exception()  # "was stopped": retrieved, the timeout is the news
            raise MCPServerError(
                f"The MCP server {self.name} did not answer within {self.connect_timeout:g} s."
            ) from None
        self._session = session
        self.sessions_opened += 1
        return session

    async def _run(self, session: _Session, ready: asyncio.Future[None]) -> None:
        """Hold the SDK client open until asked to stop or its transport ends."""
        errlog = None if self.url else await asyncio.to_thread(tempfile.TemporaryFile, "w+b")
        try:
            async with AsyncExitStack() as stack:
                client = await self._client(stack, errlog)
                session.client = await stack.enter_async_context(client)
                ready.set_result(None)
                await session.stop.wait()
            if session.broken:
                session.reason = await self._reason(None, errlog)
        except Exception as e:  # noqa: BLE001 - whatever broke, callers get it as a reason
            session.reason = await self._reason(e, errlog)
            if not ready.done():
                ready.set_exception(
                    MCPServerError(f"The MCP server {self.name} failed to start: {session.reason}")
                )
        finally:
            if not ready.done():  # cancelled while starting
                ready.set_exception(MCPServerError(f"The MCP server {self.name} was stopped."))
            if errlog is not None:
                # Closed here, not in a thread: an await in this finally may itself be
                # cancelled (the runner is cancelled on a timeout), leaving the file open.
                # Closing a temporary file's descriptor does not block.
                errlog.close()

    async def _client(self, stack: AsyncExitStack, errlog: IO[bytes] | None) -> Any:
        """The SDK client for this server (not entered); `stack` closes what it needs."""
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client
        from mcp.client.streamable_http import streamable_http_client

        if self.url is not None:
            create_http_client = _upstream.mcp_http_client()
            http = await stack.enter_async_context(create_http_client(headers=self.headers or None))
            return Client(streamable_http_client(self.url, http_client=http), cache=None)
        params = StdioServerParameters(
            command=self.argv[0], args=self.argv[1:], env=self.env or None, cwd=self.cwd
        )
        assert errlog is not None
        # Only the file's descriptor is used (the child's stderr): a binary file will do.
        return Client(stdio_client(params, errlog=cast(TextIO, errlog)), cache=None)

    async def _reason(self, e: BaseException | None, errlog: IO[bytes] | None) -> str:
        """What went wrong: the exception(s), and the last of a stdio server's stderr."""
        leaves = _leaves(e) if e is not None else ()
        reason = "; ".join(f"{type(x).__name__}: {x}".rstrip(": ") for x in leaves)
        tail = await asyncio.to_thread(_tail, errlog) if errlog is not None else ""
        if tail:
            reason = f"{reason} (stderr: {tail})" if reason else f"stderr: {tail}"
        return reason

    # ------------------------------------------------------------------ calls

    async def list_tools(self) -> list[Any]:
        """The server's tools (``mcp.types.Tool``), every page.

        Raises:
            MCPServerError: The server could not be reached or answered wrongly.
        """
        session = await self._current()
        tools: list[Any] = []
        cursor: str | None = None
        for _ in range(1000):  # a paginator that never ends cannot hang us
            page = await self._request(
                session, "tools/list", session.client.list_tools(cursor=cursor)
            )
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        return tools

    async def call_tool(self, name: str, arguments: Mapping[str, Any]) -> Any:
        """Call a tool and return the ``CallToolResult`` as the server sent it.

        Raises:
            MCPServerError: The server could not be reached, or the connection broke.
        """
        session = await self._current()
        call = session.client.call_tool(
            name, dict(arguments), read_timeout_seconds=self.call_timeout
        )
        return await self._request(session, name, call)

    async def _request(self, session: _Session, what: str, coro: Any) -> Any:
        """Await `coro` unless the session ends first; cancelling us cancels it."""
        request = asyncio.ensure_future(coro)
        assert session.runner is not None
        try:
            await asyncio.wait({request, session.runner}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not request.done():
                request.cancel()  # the SDK sends notifications/cancelled for it
        if not request.done():
            raise MCPServerError(
                f"The MCP server {self.name} closed the connection during {what}: "
                f"{session.reason or 'no reason given'}"
            )
        try:
            return request.result()
        except Exception as e:
            if getattr(getattr(e, "error", None), "code", None) != _CONNECTION_CLOSED:
                raise MCPServerError(
                    f"The MCP server {self.name} failed {what}: {type(e).__name__}: {e}"
                ) from None
        # The transport is gone (a stdio server exited): end the session, so the next
        # call starts a new one, and say why if the server's stderr does.
        session.broken = True
        session.stop.set()
        await asyncio.wait({session.runner}, timeout=5)
        reason = f": {session.reason}" if session.reason else "."
        raise MCPServerError(
            f"The MCP server {self.name} closed the connection during {what}{reason}"
        )


def _leaves(e: BaseException) -> Generator[BaseException, None, None]:
    inners = getattr(e, "exceptions", None)  # an (anyio) exception group
    if isinstance(inners, (list, tuple)):
        for inner in inners:
            yield from _leaves(inner)
    else:
        yield e


def _tail(errlog: IO[bytes]) -> str:
    """The last lines a server wrote to stderr, on one line (bytes: any encoding)."""
    errlog.seek(0, os.SEEK_END)
    errlog.seek(max(0, errlog.tell() - 4 * STDERR_TAIL))
    lines = errlog.read().decode("utf-8", errors="replace").splitlines()
    text = " | ".join(line.strip() for line in lines if line.strip())
    return text[-STDERR_TAIL:]

"""Run a :class:`~llm_compiler.serving.app.ServedApp` with uvicorn."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
from collections.abc import Callable
from types import FrameType
from typing import Any

from llm_compiler.errors import ConfigurationError
from llm_compiler.serving.access import AccessLog
from llm_compiler.serving.app import ServedApp
from llm_compiler.serving.security import SecurityPolicy

logger = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
#: Seconds an idle keep-alive connection stays open. Longer than the 5 s after which
#: httpx's default pool drops an idle connection: with equal times, a client could send
#: on a connection the server is closing that moment, and get a ReadError.
KEEP_ALIVE_SECONDS = 30


#: Seconds open responses (event streams) get once the server stops, after any drain: a
#: stream's run goes on on another worker, where its client reconnects.
STREAMS_GRACE = 1.0


def _draining_server(config: Any, served: ServedApp, grace: float | None) -> Any:
    """A uvicorn server whose first stop signal drains `served` for up to `grace` s."""
    import uvicorn

    loop = asyncio.get_running_loop()

    class Server(uvicorn.Server):
        drain: asyncio.Task[None] | None = None
        asked = False

        def handle_exit(self, sig: int, frame: FrameType | None) -> None:
            if grace is None or served.ops is None or self.asked:
                if self.asked and not self.should_exit:
                    logger.warning("A second stop signal: handing the runs over now.")
                super().handle_exit(sig, frame)
                return
            self.asked = True  # a signal handler: the loop starts the drain
            self._captured_signals.append(sig)
            loop.call_soon_threadsafe(self._start_drain)

        def _start_drain(self) -> None:
            self.drain = loop.create_task(self._drain_then_exit())

        async def _drain_then_exit(self) -> None:
            assert served.ops is not None and grace is not None
            try:
                await served.ops.drain(grace)
            finally:
                self.should_exit = True

    return Server(config)


def is_loopback(host: str) -> bool:
    """Whether `host` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_exposure(policy: SecurityPolicy, host: str) -> None:
    """Refuse to serve beyond loopback without a token, unless the policy says insecure;
    warn when an insecure policy serves without one (beyond loopback, or any host name).

    Raises:
        ConfigurationError: `host` is reachable from other machines and no token is set.
    """
    if policy.token is not None:
        return
    if not is_loopback(host) and not policy.insecure:
        raise ConfigurationError(
            f"Refusing to serve on {host} without a token: anyone who can reach it could run "
            "tools. Set LLM_COMPILER_TOKEN (or --token), or pass --insecure to serve anyway."
        )
    if not is_loopback(host):
        _warn(f"serving on {host} WITHOUT A TOKEN; anyone who can reach this address")
    elif policy.any_host:
        _warn("answering any host name WITHOUT A TOKEN; any web page you visit (DNS rebinding)")


def _warn(who: str) -> None:
    logger.warning("--insecure: %s can run tools on this machine.", who)


def bound_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on `host`:`port` (port 0 picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP, not 0: asyncio turns Nagle off (TCP_NODELAY) only on sockets that say
    # so, and without it a keep-alive response waits 40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


async def serve(
    served: ServedApp,
    host: str = LOOPBACK,
    port: int = 8000,
    *,
    on_ready: Callable[[str], None] | None = None,
    sock: socket.socket | None = None,
    stop: asyncio.Event | None = None,
    drain_grace: float | None = None,
    **uvicorn_options: Any,
) -> None:
    """Serve until cancelled or interrupted (uvicorn handles Ctrl-C).

    Args:
        served: From :func:`~llm_compiler.serving.build_app`.
        host: Bind address; loopback unless you mean to expose the server.
        port: TCP port (0: a free one; the URL passed to `on_ready` has the real one).
        on_ready: Called with the page's URL once the server listens.
        sock: An already bound socket (then `host` and `port` only name it).
        stop: Set it to shut the server down gracefully.
        drain_grace: With it, the first SIGTERM or Ctrl-C drains (see
            :meth:`~llm_compiler.serving.ops.Operations.drain`) for up to this many
            seconds before the shutdown; a second one shuts down at once.
        uvicorn_options: Passed to ``uvicorn.Config`` (e.g. ``log_level``; idle
            connections are kept :data:`KEEP_ALIVE_SECONDS` unless ``timeout_keep_alive``).

    Raises:
        ConfigurationError: `host` is not loopback and the app has no token (see
            :func:`check_exposure`).
    """
    import uvicorn

    check_exposure(served.policy, host)
    sock = sock or bound_socket(host, port)
    actual = sock.getsockname()[1]
    options = {
        "log_level": "warning",
        "timeout_graceful_shutdown": STREAMS_GRACE,
        "timeout_keep_alive": KEEP_ALIVE_SECONDS,
        **uvicorn_options,
    }
    # uvicorn's access line is one preformatted string: ours has fields and the duration.
    app = AccessLog(served.app) if options.pop("access_log", False) else served.app
    config = uvicorn.Config(app, access_log=False, **options)
    server = _draining_server(config, served, drain_grace)
    if on_ready is not None:
        shown = f"[{host}]" if ":" in host else host
        config_started = server.startup

        async def startup(sockets: list[socket.socket] | None = None) -> None:
            await config_started(sockets=sockets)
            on_ready(f"http://{shown}:{actual}/")

        server.startup = startup

    async def stopper() -> None:
        if stop is not None:
            await stop.wait()
            server.should_exit = True

    watcher = asyncio.create_task(stopper())
    try:
        await server.serve(sockets=[sock])
    finally:
        watcher.cancel()
        if server.drain is not None:
            server.drain.cancel()

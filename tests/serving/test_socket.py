"""The served socket: responses on a kept-alive connection are not held back by Nagle."""

from __future__ import annotations

import asyncio
import socket

from llm_compiler.serving.server import bound_socket


async def test_accepted_connections_have_nagle_off():
    """asyncio sets TCP_NODELAY only on sockets created with IPPROTO_TCP; without it a
    response's body waits ~40 ms for the client's delayed ACK of its headers."""
    accepted: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    class Probe(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            sock = transport.get_extra_info("socket")
            accepted.set_result(sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            transport.close()

    listener = bound_socket("127.0.0.1", 0)
    server = await asyncio.get_running_loop().create_server(Probe, sock=listener)
    try:
        port = listener.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            assert await asyncio.wait_for(accepted, 10) != 0
        finally:
            writer.close()
            await writer.wait_closed()
    finally:
        server.close()
        await server.wait_closed()

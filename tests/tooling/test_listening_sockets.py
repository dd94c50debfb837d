"""The local servers' listening sockets serve a streamed reply without Nagle's delay: a connection
accepted by asyncio (uvicorn's API) has TCP_NODELAY, as on a socket asyncio makes itself. Without
it each small SSE write waits for the client's delayed ACK (about 40 ms on Linux)."""

import asyncio
import socket

import pytest

from infra.local.ports import listen_on, port_of

pytestmark = pytest.mark.unit


async def _accepted_nodelay() -> int:
    listener = listen_on("127.0.0.1", 0)
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted_socket = writer.get_extra_info("socket")
        seen.set_result(accepted_socket.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    server = await asyncio.start_server(accepted, sock=listener)
    async with server:
        _, writer = await asyncio.open_connection("127.0.0.1", port_of(listener))
        try:
            return await asyncio.wait_for(seen, 10)
        finally:
            writer.close()


def test_a_connection_asyncio_accepts_on_a_local_listener_has_nagle_off() -> None:
    assert asyncio.run(_accepted_nodelay()) != 0

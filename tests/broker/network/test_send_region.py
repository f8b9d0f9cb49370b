"""Segment bytes leave by sendfile, or by pread where sendfile cannot serve the socket
(logstore/broker/network/connection.py's ``send_region``), on real loopback sockets."""

from __future__ import annotations

import asyncio
import os
import pathlib
import socket
import struct

import pytest

from logstore.broker.network.connection import LoopSendfile, send_region
from logstore.protocol.frames import FileRegion

pytestmark = pytest.mark.unit

PAYLOAD = bytes(range(256)) * 64  # 16 KiB


class _Accepted(asyncio.Protocol):
    """The server side: hands its transport over and does not read (so it does not see a reset)."""

    def __init__(self, accepted: asyncio.Future[asyncio.Transport]) -> None:
        self.accepted = accepted

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        transport.pause_reading()
        self.accepted.set_result(transport)


async def _server_transport(
    loop: asyncio.AbstractEventLoop,
) -> tuple[asyncio.Server, asyncio.Transport, socket.socket]:
    accepted: asyncio.Future[asyncio.Transport] = loop.create_future()
    server = await loop.create_server(lambda: _Accepted(accepted), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    client = socket.create_connection(("127.0.0.1", port))
    return server, await asyncio.wait_for(accepted, 5), client


def _region(tmp_path: pathlib.Path) -> FileRegion:
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(PAYLOAD)
    fd = os.open(path, os.O_RDONLY)
    try:
        return FileRegion(fd, 1024, len(PAYLOAD) - 1024)
    finally:
        os.close(fd)


def test_a_region_reaches_the_client_by_sendfile(tmp_path: pathlib.Path) -> None:
    async def scenario() -> bytes:
        loop = asyncio.get_running_loop()
        server, transport, client = await _server_transport(loop)
        sendfile = LoopSendfile()
        await send_region(loop, transport, _region(tmp_path), sendfile, tls=False)
        assert sendfile.works
        client.settimeout(5)
        got = b""
        while len(got) < len(PAYLOAD) - 1024:
            got += await loop.run_in_executor(None, client.recv, 1 << 16)
        transport.close()
        client.close()
        server.close()
        return got

    assert asyncio.run(scenario()) == PAYLOAD[1024:]


def test_a_client_that_reset_the_connection_does_not_send_asyncio_into_its_file_fallback(
    tmp_path: pathlib.Path,
) -> None:
    """The peer resets the connection before a byte is sent: the kernel's sendfile fails at once,
    asyncio answers SendfileNotAvailableError, and its own fallback would call
    ``FileRegion.readinto`` (there is none: AttributeError, logged by the broker as an unexpected
    error). The region goes out by pread instead, and the reset is the transport's to report."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server, transport, client = await _server_transport(loop)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()  # an RST, not a FIN
        await asyncio.sleep(0.1)
        sendfile = LoopSendfile()
        await send_region(loop, transport, _region(tmp_path), sendfile, tls=False)
        assert sendfile.works  # a reset says nothing about the loop: the next region tries again
        transport.abort()
        server.close()

    asyncio.run(scenario())


def test_a_transport_already_closing_is_a_connection_error_not_a_runtime_error(
    tmp_path: pathlib.Path,
) -> None:
    """The connection was reset while the fetch was read (bench/chaos.py's flaky fault): asyncio's
    sendfile would raise RuntimeError("Transport is closing"), logged as an unexpected error with
    a traceback; a ConnectionError closes the connection quietly."""

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        server, transport, client = await _server_transport(loop)
        transport.close()
        with pytest.raises(ConnectionError):
            await send_region(loop, transport, _region(tmp_path), LoopSendfile(), tls=False)
        client.close()
        server.close()

    asyncio.run(scenario())

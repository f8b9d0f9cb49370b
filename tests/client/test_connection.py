"""BrokerConnection against a scripted peer on 127.0.0.1: writes the broker's back-pressure stalls."""

from __future__ import annotations

import io
import socket
import struct
import threading
import time
from typing import Any

import pytest

from logstore.client.connection import BrokerConnection
from logstore.protocol import client_codec, from_dict

pytestmark = pytest.mark.integration

SIZE = struct.Struct(">i")


def _read_frame(conn: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        out = bytearray()
        while len(out) < n:
            chunk = conn.recv(n - len(out))
            assert chunk, "the client closed the connection"
            out += chunk
        return bytes(out)

    (size,) = SIZE.unpack(exactly(4))
    return exactly(size)


def _answer(
    conn: socket.socket, api_key: int, version: int, correlation: int, fields: dict[str, Any]
) -> None:
    response_class = client_codec(api_key, version).response_class
    buffer = io.BytesIO()
    from kio.serial import entity_writer

    entity_writer(response_class)(buffer, from_dict(response_class, fields))
    flexible = client_codec(api_key, version).response_flexible
    body = SIZE.pack(correlation) + (b"\x00" if flexible else b"") + buffer.getvalue()
    conn.sendall(SIZE.pack(len(body)) + body)


def test_a_write_stalled_by_back_pressure_waits_instead_of_failing() -> None:
    """The peer reads nothing for 1 s while an 8 MiB request is written (the socket's timeout is the
    reader thread's 0.2 s wake-up): the write goes on when the peer reads, and the answer arrives."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    got: list[int] = []

    def peer() -> None:
        conn, _ = server.accept()
        with conn:
            frame = _read_frame(conn)
            api_key, version, correlation = struct.unpack_from(">hhi", frame)
            assert api_key == 18
            _answer(conn, 18, version, correlation, {
                "error_code": 0, "throttle_time": 0, "supported_features": [], "finalized_features_epoch": -1,
                "finalized_features": [], "zk_migration_ready": False,
                "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 3},
                             {"api_key": 0, "min_version": 3, "max_version": 9}]})  # fmt: skip
            time.sleep(1.0)  # back-pressure: the client's write fills the socket buffers and stalls
            frame = _read_frame(conn)
            got.append(len(frame))
            _, version, correlation = struct.unpack_from(">hhi", frame)
            _answer(conn, 0, version, correlation, {"responses": [], "throttle_time": 0})

    thread = threading.Thread(target=peer, daemon=True)
    thread.start()
    connection = BrokerConnection(-1, "127.0.0.1", port, "t", setup_timeout=5, request_timeout=10)
    try:
        records = b"r" * (8 << 20)
        fields = {"transactional_id": None, "acks": 1, "timeout": 1000,
                  "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": records}]}]}  # fmt: skip
        response = connection.send(0, fields).result(15)
        assert list(response.responses) == []
        assert got and got[0] > 8 << 20
    finally:
        connection.close()
        server.close()
        thread.join(5)

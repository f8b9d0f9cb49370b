"""A minimal blocking Kafka wire client for tests: kio-encoded requests over a socket."""

from __future__ import annotations

import io
import socket
import struct
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType


def request_class(api_key: int, version: int) -> type:
    module = load_payload_module(api_key, version, EntityType.request)
    return next(v for v in vars(module).values() if getattr(v, "__type__", None) == EntityType.request)


def response_class(api_key: int, version: int) -> type:
    module = load_payload_module(api_key, version, EntityType.response)
    return next(v for v in vars(module).values() if getattr(v, "__type__", None) == EntityType.response)


def encode_request(request: Any, correlation_id: int, client_id: str = "wire-test") -> bytes:
    """A whole request frame (size prefix included)."""
    cls = type(request)
    flexible = cls.__flexible__
    header = struct.pack(">hhih", cls.__api_key__, cls.__version__, correlation_id, len(client_id))
    header += client_id.encode()
    if flexible:
        header += b"\x00"
    body = io.BytesIO()
    entity_writer(cls)(body, request)
    payload = header + body.getvalue()
    return struct.pack(">i", len(payload)) + payload


class WireClient:
    """One connection; ``call`` sends a request and decodes its response."""

    def __init__(self, bootstrap: str, timeout: float = 10) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> WireClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, request: Any) -> int:
        self.correlation_id += 1
        self.sock.sendall(encode_request(request, self.correlation_id))
        return self.correlation_id

    def read_frame(self) -> bytes:
        size = struct.unpack(">i", self._read_exact(4))[0]
        return self._read_exact(size)

    def _read_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(n)
            if not chunk:
                raise ConnectionError("broker closed the connection")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def receive(self, request_type: type, correlation_id: int) -> Any:
        frame = self.read_frame()
        (got,) = struct.unpack_from(">i", frame, 0)
        assert got == correlation_id, (got, correlation_id)
        api_key, version = request_type.__api_key__, request_type.__version__  # type: ignore[attr-defined]
        cls = response_class(api_key, version)
        at = 4 + (1 if cls.__flexible__ and api_key != 18 else 0)  # type: ignore[attr-defined]
        response, _ = entity_reader(cls)(frame, at)
        return response

    def call(self, request: Any) -> Any:
        return self.receive(type(request), self.send(request))

"""Kafka wire framing: request headers, kio codecs per (API, version), response frames.

A request frame is ``int32 size`` + header + body. Header v1 is ``api_key
int16, api_version int16, correlation_id int32, client_id nullable int16
string``; header v2 (flexible versions) adds tagged fields. Response header
v0 is the correlation id; v1 adds tagged fields; ApiVersions always answers
with v0 (KIP-511), so a client that does not know our versions can read it.

Bodies are decoded and encoded by kio. A record set in a response may be a
:class:`FileRegion`: the encoder leaves a hole for it, and the connection
fills the hole with ``sendfile`` straight from the segment file.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

NO_THROTTLE = datetime.timedelta(0)
HEADER = struct.Struct(">hhi")
SIZE = struct.Struct(">i")
API_VERSIONS_KEY = 18


class ProtocolError(Exception):
    """A request this broker cannot parse: the connection is closed after a log line."""


@dataclass(frozen=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


def _read_uvarint(frame: bytes | memoryview, at: int) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        if at >= len(frame):
            raise ProtocolError("truncated varint in the request header")
        byte = frame[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise ProtocolError("varint longer than 5 bytes in the request header")


def parse_header(frame: bytes, flexible: bool) -> RequestHeader:
    """The request header; ``flexible`` selects header v2 (tagged fields)."""
    if len(frame) < HEADER.size + 2:
        raise ProtocolError(f"a {len(frame)}-byte frame is shorter than a request header")
    api_key, api_version, correlation_id = HEADER.unpack_from(frame, 0)
    (length,) = struct.unpack_from(">h", frame, HEADER.size)
    at = HEADER.size + 2
    client_id = None
    if length >= 0:
        if at + length > len(frame):
            raise ProtocolError("client_id runs past the end of the frame")
        client_id = bytes(frame[at : at + length]).decode("utf-8", "replace")
        at += length
    elif length != -1:
        raise ProtocolError(f"client_id has negative length {length}")
    if flexible:
        count, at = _read_uvarint(frame, at)
        for _ in range(count):
            _, at = _read_uvarint(frame, at)
            size, at = _read_uvarint(frame, at)
            at += size
        if at > len(frame):
            raise ProtocolError("tagged header fields run past the end of the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, at)


@dataclass(frozen=True)
class Codec:
    """kio's classes for one (API, version)."""

    request_class: type
    response_module: ModuleType
    read: Callable[[bytes, int], Any]
    write: Callable[[Any, Any], None]
    flexible: bool


@functools.cache
def codec(api_key: int, version: int) -> Codec:
    request_module = load_payload_module(api_key, version, EntityType.request)
    response_module = load_payload_module(api_key, version, EntityType.response)
    request_class = _payload_class(request_module, "Request")
    response_class = _payload_class(response_module, "Response")
    return Codec(
        request_class,
        response_module,
        entity_reader(request_class),
        entity_writer(response_class),
        bool(getattr(request_class, "__flexible__", False)),
    )


def _payload_class(module: ModuleType, suffix: str) -> type:
    for name, value in vars(module).items():
        if name.endswith(suffix) and getattr(value, "__type__", None) in (
            EntityType.request,
            EntityType.response,
        ):
            return value
    raise LookupError(f"no {suffix} class in {module.__name__}")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any) -> Any:
    """An instance of a kio class from the values its version has (others dropped).

    Handlers are written once for every version: a field a version lacks is
    simply not passed on.
    """
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


def has_field(cls: type, name: str) -> bool:
    return name in _field_names(cls)


class FileRegion:
    """Bytes of a segment file, sent with ``sendfile``; owns a dup of the file descriptor.

    The dup keeps the bytes readable if the segment is closed or deleted
    before the response is sent (an unlinked file stays readable).
    """

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        return self.fd

    def seek(self, offset: int, whence: int = 0) -> int:
        # asyncio.sendfile updates the file position when done; ours is unused.
        return offset

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


class ResponseBuffer:
    """A kio write target that keeps FileRegions as separate chunks."""

    __slots__ = ("chunks", "current", "size")

    def __init__(self, header: bytes) -> None:
        self.chunks: list[bytes | bytearray | FileRegion] = []
        self.current = bytearray(4)  # the frame size, filled in by frame()
        self.current += header
        self.size = len(header)

    def write(self, data: Any) -> int:
        if isinstance(data, FileRegion):
            self.chunks.append(self.current)
            self.chunks.append(data)
            self.current = bytearray()
        else:
            self.current += data
        self.size += len(data)
        return len(data)

    def frame(self) -> list[bytes | bytearray | FileRegion]:
        self.chunks.append(self.current)
        first = self.chunks[0]
        assert isinstance(first, bytearray)
        SIZE.pack_into(first, 0, self.size)
        return self.chunks


def encode_response(codec_: Codec, correlation_id: int, response: Any, header_v0: bool = False) -> list[Any]:
    """A whole response frame as chunks (bytes and FileRegions)."""
    header = SIZE.pack(correlation_id)
    if codec_.flexible and not header_v0:
        header += b"\x00"  # no tagged fields
    buffer = ResponseBuffer(header)
    codec_.write(buffer, response)
    return buffer.frame()

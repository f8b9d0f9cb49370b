"""Response frames: header, body, and file regions sent with sendfile; bodies encoded later or by hand."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from logstore.protocol.codec import Codec
from logstore.protocol.primitives import SIZE


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


class RawBody(bytes):
    """A response body a handler encoded itself (the hot paths); sent as it is."""


class DeferredBody:
    """A response body that can only be encoded later (when a batched append has settled).

    The connection queues the frame in its place, in request order, and
    calls ``encode`` when it writes the queued responses.
    """

    __slots__ = ("encode",)

    def __init__(self, encode: Callable[[], bytes]) -> None:
        self.encode = encode


class DeferredFrame:
    """A response frame whose body is a :class:`DeferredBody`."""

    __slots__ = ("body", "header")

    def __init__(self, header: bytes, body: DeferredBody) -> None:
        self.header = header
        self.body = body

    def resolve(self) -> bytes:
        body = self.body.encode()
        return SIZE.pack(len(self.header) + len(body)) + self.header + body


def encode_response(codec_: Codec, correlation_id: int, response: Any, header_v0: bool = False) -> list[Any]:
    """A whole response frame as chunks (bytes, FileRegions, or a DeferredFrame)."""
    header = SIZE.pack(correlation_id)
    if codec_.flexible and not header_v0:
        header += b"\x00"  # no tagged fields
    if isinstance(response, RawBody):
        return [SIZE.pack(len(header) + len(response)) + header + response]
    if isinstance(response, DeferredBody):
        return [DeferredFrame(header, response)]
    buffer = ResponseBuffer(header)
    codec_.write(buffer, response)
    return buffer.frame()

"""Confluent's wire format for a record's key or value that names its schema.

::

    byte 0      magic 0
    bytes 1-4   the schema's global id, a big-endian unsigned 32-bit integer
    Protobuf:   the message indexes: the path of the record's message type in its .proto
                (top-level index, then nested indexes), as a count and the indexes, each a
                zigzag varint; the common path [0] is written as the single byte 0
    then        the payload (Avro binary, JSON text, Protobuf binary)

Invariant: :func:`unframe` of :func:`frame` gives back the id, the indexes and
the payload; anything else that does not start with magic 0 and a whole id is
refused with :class:`SerializationError`.
"""

from __future__ import annotations

import struct

from logstore.errors import LogstoreError

MAGIC = 0
_HEADER = struct.Struct(">bI")


class SerializationError(LogstoreError):
    """A value that cannot be serialized, or bytes that are not Confluent's wire format."""


def frame(schema_id: int, payload: bytes, indexes: list[int] | None = None) -> bytes:
    """``payload`` behind the magic byte, the id and (Protobuf) the message indexes."""
    head = _HEADER.pack(MAGIC, schema_id)
    if indexes is None:
        return head + payload
    return head + encode_indexes(indexes) + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """(schema id, the rest) of framed bytes."""
    if len(data) < _HEADER.size:
        raise SerializationError(f"{len(data)} bytes are too short for Confluent's framing (5 at least)")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SerializationError(f"unknown magic byte {magic}: not Confluent's wire format")
    return schema_id, memoryview(data)[_HEADER.size :]


def encode_indexes(indexes: list[int]) -> bytes:
    if indexes == [0]:
        return b"\x00"
    return b"".join(_zigzag(v) for v in [len(indexes), *indexes])


def decode_indexes(data: memoryview) -> tuple[list[int], memoryview]:
    """(the message indexes, the payload after them)."""
    count, at = _read_zigzag(data, 0)
    if count == 0:
        return [0], data[at:]
    if not 0 < count <= 1024:
        raise SerializationError(f"{count} message indexes: not Confluent's Protobuf framing")
    found = []
    for _ in range(count):
        value, at = _read_zigzag(data, at)
        found.append(value)
    return found, data[at:]


def _zigzag(value: int) -> bytes:
    n = (value << 1) ^ (value >> 63)
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_zigzag(data: memoryview, at: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise SerializationError("a truncated varint in the Protobuf message indexes")
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    return (n >> 1) ^ -(n & 1), at

"""Varints, written and read in one place: Kafka's unsigned varint and its zigzag varint/varlong.

The wire protocol's compact lengths and tag sections use unsigned varints
(at most 5 bytes); record fields use zigzag-encoded signed ones (at most 10).
Readers raise :class:`VarintError`, which each caller turns into its own
error with its own context (a malformed request, a damaged offsets record, a
corrupt batch).

>>> uvarint_bytes(300), read_uvarint(b"\\xac\\x02", 0, 2)
(b'\\xac\\x02', (300, 2))
>>> varint_bytes(-1), read_varint(b"\\x01", 0, 1)
(b'\\x01', (-1, 1))
"""

from __future__ import annotations

_ONE_BYTE = [bytes([n]) for n in range(0x80)]  # the usual varints: counts and short lengths


class VarintError(ValueError):
    """A varint that runs past the end of its buffer (``past_end``) or past its longest size."""

    def __init__(self, message: str, past_end: bool) -> None:
        super().__init__(message)
        self.past_end = past_end


def uvarint_bytes(value: int) -> bytes:
    """``value`` (>= 0) as an unsigned varint."""
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_uvarint(
    data: bytes | bytearray | memoryview, at: int, end: int, max_bytes: int = 5
) -> tuple[int, int]:
    """The unsigned varint at ``at``: (value, the offset after it). O(its bytes)."""
    value = shift = 0
    for _ in range(max_bytes):
        if at >= end:
            raise VarintError("runs past the end", True)
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise VarintError(f"varint longer than {max_bytes} bytes", False)


def varint_bytes(value: int) -> bytes:
    """``value`` as a zigzag varlong (Kafka's record fields)."""
    return uvarint_bytes(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def read_varint(
    data: bytes | bytearray | memoryview, at: int, end: int, max_bytes: int = 10
) -> tuple[int, int]:
    """The zigzag varint at ``at``: (value, the offset after it)."""
    raw, at = read_uvarint(data, at, end, max_bytes)
    return (raw >> 1) ^ -(raw & 1), at

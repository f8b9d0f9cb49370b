"""Wire primitives shared by the broker and the client: constants, varints, strings, a bounds-checked cursor."""

from __future__ import annotations

import datetime
import struct

from logstore.records.varint import VarintError, uvarint_bytes
from logstore.records.varint import read_uvarint as _read_uvarint

NO_THROTTLE = datetime.timedelta(0)
AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
"""Kafka's "not asked for" value of every authorized-operations field."""
HEADER = struct.Struct(">hhi")
SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
ITEMS_MAX = 100_000  # array items in one request; each needs several bytes anyway
API_VERSIONS_KEY = 18


class ProtocolError(Exception):
    """Bytes that break the protocol: the broker closes the connection after a log line; the client fails the request and reconnects."""


class MalformedRequest(ProtocolError, ValueError):
    """A request body whose lengths or nulls break its schema, found before kio reads it."""


def _past_end(name: str) -> MalformedRequest:
    return MalformedRequest(f"{name} runs past the end of the frame")


def read_uvarint(frame: bytes | memoryview, at: int, end: int, name: str) -> tuple[int, int]:
    try:
        return _read_uvarint(frame, at, end)
    except VarintError as e:
        raise (_past_end(name) if e.past_end else MalformedRequest(f"{name}: {e}")) from None


class WireCursor:
    """Reads a request body field by field, bounds-checked; errors name ``context``.

    For the hot APIs' direct decoders (Produce): no objects
    but the request's own, views instead of copies.
    """

    __slots__ = ("at", "context", "end", "flexible", "frame")

    def __init__(self, frame: bytes | memoryview, at: int, flexible: bool, context: str) -> None:
        self.frame = frame
        self.at = at
        self.end = len(frame)
        self.flexible = flexible
        self.context = context

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.at + n > self.end:
            raise ProtocolError(f"{self.context}: {what} runs past the end of the frame")

    def int16(self) -> int:
        self.need(2, "an int16")
        (value,) = _I16.unpack_from(self.frame, self.at)
        self.at += 2
        return int(value)

    def int64(self) -> int:
        self.need(8, "an int64")
        (value,) = _I64.unpack_from(self.frame, self.at)
        self.at += 8
        return int(value)

    def int32(self) -> int:
        self.need(4, "an int32")
        (value,) = SIZE.unpack_from(self.frame, self.at)
        self.at += 4
        return int(value)

    def uvarint(self) -> int:
        at = self.at
        if at < self.end:
            byte = self.frame[at]
            if byte < 0x80:  # one byte: lengths, counts and tags nearly always
                self.at = at + 1
                return int(byte)
        value, self.at = read_uvarint(self.frame, at, self.end, self.context)
        return value

    def length(self, legacy: struct.Struct) -> int:
        """A string/bytes/array length; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        self.need(legacy.size, "a length")
        (value,) = legacy.unpack_from(self.frame, self.at)
        self.at += legacy.size
        return int(value)

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        view = memoryview(self.frame)[self.at : self.at + n]
        self.at += n
        return view

    def string(self, nullable: bool, what: str) -> str | None:
        n = self.length(_I16)
        if n < 0:
            if nullable and n == -1:
                return None
            raise ProtocolError(f"{self.context}: {what} is null or has a negative length")
        return bytes(self.take(n, what)).decode("utf-8", "replace")

    def array_count(self, what: str) -> int:
        n = self.length(SIZE)
        if not 0 <= n <= ITEMS_MAX or n > self.end - self.at:
            raise ProtocolError(f"{self.context}: {what} has {n} items")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.need(size, "a tagged field")
            self.at += size


EMPTY_TAGS = b"\x00"
"""An empty tagged-field section (flexible versions)."""


def wire_uvarint(value: int) -> bytes:
    """An unsigned varint.

    >>> wire_uvarint(1), wire_uvarint(300)
    (b'\\x01', b'\\xac\\x02')
    """
    return uvarint_bytes(value)


def wire_string(value: str | None, flexible: bool, nullable: bool) -> bytes:
    """A (compact when ``flexible``) string; None only where the field is nullable.

    >>> wire_string("ab", False, False), wire_string("ab", True, False), wire_string(None, True, True)
    (b'\\x00\\x02ab', b'\\x03ab', b'\\x00')
    """
    if value is None:
        assert nullable
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (wire_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def wire_count(n: int, flexible: bool) -> bytes:
    """An array's length: a compact (n + 1) varint when ``flexible``, else an int32."""
    return wire_uvarint(n + 1) if flexible else SIZE.pack(n)

"""Kafka's primitive types, as the coordinators' records on their internal topics are written.

The records of ``__consumer_offsets`` (:mod:`~logstore.coordinator.group.offsets_schemas`,
:mod:`~logstore.coordinator.group.consumer_records`) and of ``__transaction_state``
(:mod:`~logstore.coordinator.txn.transaction_log`) are Kafka's generated message
classes: a big-endian int16 version, then the fields. :class:`RecordWriter` and
:class:`RecordReader` write and read those fields in both encodings:

- versions that are not flexible: int16-length strings (-1 = null),
  int32-length bytes, int32-count arrays, no tagged fields;
- flexible versions: unsigned varint length + 1 for strings, bytes and arrays
  (0 = null), and a tagged-field section after every struct.

>>> writer = RecordWriter(1, flexible=False)
>>> writer.string("g")
>>> bytes(writer.out).hex()
'0001000167'
>>> reader = RecordReader(writer.out, "key")
>>> reader.int16(), reader.string()
(1, 'g')
"""

from __future__ import annotations

import struct
import uuid

from logstore.records.varint import VarintError, read_uvarint, uvarint_bytes

Record = tuple[bytes, bytes | None]
"""One record of an internal topic (``__consumer_offsets``, ``__transaction_state``): key bytes,
value bytes or None (a tombstone)."""

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class OffsetsSchemaError(ValueError):
    """Bytes that are not a record of a known version, or are cut short (the name is from
``__consumer_offsets``; ``__transaction_state``'s records raise it too)."""


class RecordWriter:
    """Appends Kafka's primitive types; ``flexible`` picks the compact encodings."""

    def __init__(self, version: int, flexible: bool) -> None:
        self.out = bytearray(_I16.pack(version))
        self.flexible = flexible

    def int16(self, value: int) -> None:
        self.out += _I16.pack(value)

    def int32(self, value: int) -> None:
        self.out += _I32.pack(value)

    def int64(self, value: int) -> None:
        self.out += _I64.pack(value)

    def uvarint(self, value: int) -> None:
        self.out += uvarint_bytes(value)

    def _length(self, length: int | None, wide: bool) -> None:
        if self.flexible:
            self.uvarint(0 if length is None else length + 1)
        elif wide:
            self.int32(-1 if length is None else length)
        else:
            self.int16(-1 if length is None else length)

    def string(self, value: str | None) -> None:
        data = None if value is None else value.encode("utf-8")
        self._length(None if data is None else len(data), wide=False)
        if data is not None:
            self.out += data

    def bytes_(self, value: bytes) -> None:
        self._length(len(value), wide=True)
        self.out += value

    def array_length(self, count: int) -> None:
        self._length(count, wide=True)

    def int8(self, value: int) -> None:
        self.out += value.to_bytes(1, "big", signed=True)

    def uuid(self, value: uuid.UUID) -> None:
        self.out += value.bytes

    def tagged_fields(self) -> None:
        if self.flexible:
            self.uvarint(0)


class RecordReader:
    """Reads Kafka's primitive types from ``data`` after its int16 version."""

    def __init__(self, data: bytes | bytearray | memoryview, what: str) -> None:
        self.data = bytes(data)
        self.what = what
        self.pos = 0
        self.flexible = False

    def _take(self, size: int) -> bytes:
        if size < 0 or self.pos + size > len(self.data):
            raise OffsetsSchemaError(f"{self.what} is cut short at byte {self.pos}")
        chunk = self.data[self.pos : self.pos + size]
        self.pos += size
        return chunk

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def int64(self) -> int:
        value: int = _I64.unpack(self._take(8))[0]
        return value

    def uvarint(self) -> int:
        try:
            value, self.pos = read_uvarint(self.data, self.pos, len(self.data))
        except VarintError as e:
            if e.past_end:
                raise OffsetsSchemaError(f"{self.what} is cut short at byte {self.pos}") from None
            raise OffsetsSchemaError(f"{self.what} has a varint longer than 5 bytes") from None
        return value

    def _length(self, wide: bool) -> int | None:
        if self.flexible:
            return None if (length := self.uvarint() - 1) < 0 else length
        length = self.int32() if wide else self.int16()
        return None if length < 0 else length

    def nullable_string(self) -> str | None:
        length = self._length(wide=False)
        if length is None:
            return None
        try:
            return self._take(length).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise OffsetsSchemaError(f"{self.what} has a string that is not UTF-8") from exc

    def string(self) -> str:
        value = self.nullable_string()
        if value is None:
            raise OffsetsSchemaError(f"{self.what} has a null in a non-nullable string")
        return value

    def bytes_(self) -> bytes:
        length = self._length(wide=True)
        if length is None:
            raise OffsetsSchemaError(f"{self.what} has null in a non-nullable bytes field")
        return self._take(length)

    def int8(self) -> int:
        return int.from_bytes(self._take(1), "big", signed=True)

    def uuid(self) -> uuid.UUID:
        return uuid.UUID(bytes=self._take(16))

    def array_length(self) -> int:
        length = self._length(wide=True)
        if length is None:
            raise OffsetsSchemaError(f"{self.what} has a null array")
        return length

    def tagged_fields(self) -> None:
        """Skip a flexible version's tagged fields (none are defined for these records)."""
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self._take(self.uvarint())

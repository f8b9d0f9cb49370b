"""Building v2 record batches from Python records, encoded in C.

The fast path takes a list or tuple of plain ``bytes`` values and encodes it
in one C call (``logstore._speedups``), with no per-record Python at all. Pairs and
:class:`Record` objects take the general path, which flattens keys, values,
headers and timestamps into the same flat buffers.
"""

from __future__ import annotations

import struct
import time
from array import array
from collections.abc import Iterable, Sequence
from typing import Any

from logstore._native import check, ffi, lib
from logstore._speedups import encode_plain
from logstore.errors import InvalidArgumentError
from logstore.records.codecs import codec_id, compress
from logstore.records.record import Record

RecordLike = bytes | bytearray | memoryview | tuple[Any, Any] | Record | None

HEADER_SIZE = lib.LS_BATCH_HEADER_SIZE
# Worst case per record: length, attributes, timestamp delta, offset delta,
# key length, value length, header count; and two lengths per header.
_RECORD_OVERHEAD_MAX = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_OVERHEAD_MAX = 10
_ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = 0x20

# The encoder writes every byte it returns, so skip zero-filling its buffer.
_alloc_uninitialized = ffi.new_allocator(should_clear_after_alloc=False)
_NULL = ffi.NULL


def _i32(values: Sequence[int]) -> Any:
    return ffi.from_buffer("int32_t[]", array("i", values))


class _Flat:
    """Records flattened into the buffers ls_encode_records takes."""

    __slots__ = (
        "header_counts",
        "header_data",
        "header_key_lens",
        "header_value_lens",
        "key_lens",
        "keys",
        "timestamps",
        "value_lens",
        "values",
    )

    def __init__(self, records: Sequence[RecordLike], now: int) -> None:
        keys: list[bytes | None] = []
        values: list[bytes | None] = []
        stamps: list[int] = []
        header_counts: list[int] = []
        header_parts: list[bytes] = []
        header_key_lens: list[int] = []
        header_value_lens: list[int] = []
        for record in records:
            key, value, headers, timestamp = _unpack(record)
            keys.append(key)
            values.append(value)
            stamps.append(now if timestamp is None else timestamp)
            header_counts.append(len(headers))
            for name, data in headers:
                encoded = name.encode() if isinstance(name, str) else bytes(name)
                header_parts.append(encoded)
                header_key_lens.append(len(encoded))
                if data is None:
                    header_value_lens.append(-1)
                else:
                    header_parts.append(data)
                    header_value_lens.append(len(data))
        self.keys = b"".join([k for k in keys if k is not None])
        self.key_lens = [-1 if k is None else len(k) for k in keys]
        self.values = b"".join([v for v in values if v is not None])
        self.value_lens = [-1 if v is None else len(v) for v in values]
        self.timestamps = stamps
        self.header_counts = header_counts
        self.header_data = b"".join(header_parts)
        self.header_key_lens = header_key_lens
        self.header_value_lens = header_value_lens


def _unpack(record: RecordLike) -> tuple[Any, Any, Sequence[tuple[Any, Any]], int | None]:
    if isinstance(record, Record):
        return record.key, record.value, record.headers, record.timestamp
    if isinstance(record, tuple):
        if len(record) != 2:
            raise InvalidArgumentError(f"a tuple record must be a (key, value) pair, got {len(record)} items")
        return record[0], record[1], (), None
    if record is None or isinstance(record, (bytes, bytearray, memoryview)):
        return None, record, (), None
    raise InvalidArgumentError(
        f"cannot build a record from {type(record).__name__}: pass bytes, a (key, value) pair "
        "or a logstore.records.Record"
    )


def has_keyless(records: Sequence[RecordLike]) -> bool:
    """Whether any record has no key (a compacted log refuses those). O(n), no encoding.

    >>> has_keyless([(b"k", b"v"), b"no key"]), has_keyless([(b"k", None)])
    (True, False)
    """
    return any(_unpack(record)[0] is None for record in records)


def _check_fields(
    base_offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
) -> None:
    """Header fields must fit their widths in the format; say which does not."""
    for name, value, low, high in (
        ("base_offset", base_offset, 0, 2**63 - 1),
        ("timestamp", timestamp, -(2**63), 2**63 - 1),
        ("producer_id", producer_id, -(2**63), 2**63 - 1),
        ("producer_epoch", producer_epoch, -(2**15), 2**15 - 1),
        ("base_sequence", base_sequence, -(2**31), 2**31 - 1),
        ("partition_leader_epoch", partition_leader_epoch, -(2**31), 2**31 - 1),
    ):
        if not low <= value <= high:
            raise InvalidArgumentError(
                f"{name}={value} does not fit the batch header: it must be in [{low}, {high}]"
            )


def build_batch(
    records: Iterable[RecordLike],
    *,
    base_offset: int = 0,
    compression: str = "none",
    timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool = False,
) -> bytes:
    """Encode records as one v2 record batch.

    ``records`` are bytes values, ``(key, value)`` pairs or :class:`Record`
    objects; ``timestamp`` (ms) stands in for records without one (default:
    now). Cost: O(total bytes), one pass in C.

    >>> from logstore.records import parse_batches
    >>> batch = build_batch([b"a", (b"k", b"b")], base_offset=7, timestamp=1000)
    >>> [(r.offset, r.key, r.value) for b in parse_batches(batch) for r in b.records]
    [(7, None, b'a'), (8, b'k', b'b')]
    """
    if not isinstance(records, (list, tuple)):
        records = list(records)
    count = len(records)
    if count == 0:
        raise InvalidArgumentError("a record batch needs at least one record")
    codec = codec_id(compression)
    now = int(time.time() * 1000) if timestamp is None else timestamp
    fields = (base_offset, now, producer_id, producer_epoch, base_sequence, partition_leader_epoch)
    if base_offset < 0:
        _check_fields(*fields)
    attributes = _ATTR_TRANSACTIONAL if transactional else 0
    try:
        # The C encoder's argument parsing bounds every other field by its width.
        batch = encode_plain(
            records,
            base_offset,
            now,
            producer_id,
            producer_epoch,
            base_sequence,
            partition_leader_epoch,
            attributes,
        )
    except OverflowError:
        _check_fields(*fields)  # raises, naming the field
        raise
    if batch is None:
        _check_fields(*fields)
        return _build_general(
            records,
            count,
            codec,
            now,
            base_offset,
            producer_id,
            producer_epoch,
            base_sequence,
            partition_leader_epoch,
            transactional,
        )
    if codec == 0:
        return batch
    section = memoryview(batch)[HEADER_SIZE:]
    out = _alloc_uninitialized("uint8_t[]", len(batch))
    ffi.memmove(out + HEADER_SIZE, section, len(section))
    return _seal(
        out,
        len(batch),
        codec,
        count,
        now,
        now,
        base_offset,
        producer_id,
        producer_epoch,
        base_sequence,
        partition_leader_epoch,
        transactional,
    )


def _build_general(
    records: Sequence[RecordLike],
    count: int,
    codec: int,
    now: int,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    transactional: bool,
) -> bytes:
    flat = _Flat(records, now)
    timestamp_base = flat.timestamps[0]
    cap = (
        HEADER_SIZE
        + len(flat.keys)
        + len(flat.values)
        + len(flat.header_data)
        + _RECORD_OVERHEAD_MAX * count
        + _HEADER_OVERHEAD_MAX * len(flat.header_key_lens)
    )
    out = _alloc_uninitialized("uint8_t[]", cap)
    out_len = ffi.new("int64_t[2]")
    has_headers = bool(flat.header_key_lens)
    check(
        lib.ls_encode_records(
            out + HEADER_SIZE,
            cap - HEADER_SIZE,
            count,
            timestamp_base,
            ffi.from_buffer("int64_t[]", array("q", flat.timestamps)),
            flat.keys,
            _i32(flat.key_lens),
            flat.values,
            _i32(flat.value_lens),
            _i32(flat.header_counts) if has_headers else _NULL,
            flat.header_data if has_headers else _NULL,
            _i32(flat.header_key_lens) if has_headers else _NULL,
            _i32(flat.header_value_lens) if has_headers else _NULL,
            out_len,
            out_len + 1,
        ),
        "encoding records",
    )
    return _seal(
        out,
        HEADER_SIZE + out_len[0],
        codec,
        count,
        timestamp_base,
        out_len[1],
        base_offset,
        producer_id,
        producer_epoch,
        base_sequence,
        partition_leader_epoch,
        transactional,
    )


def _seal(
    out: Any,
    size: int,
    codec: int,
    count: int,
    timestamp_base: int,
    timestamp_max: int,
    base_offset: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    transactional: bool,
) -> bytes:
    if codec:
        section = compress(codec, ffi.buffer(out + HEADER_SIZE, size - HEADER_SIZE))
        size = HEADER_SIZE + len(section)
        out = _alloc_uninitialized("uint8_t[]", size)
        ffi.memmove(out + HEADER_SIZE, section, len(section))
    attributes = codec | (_ATTR_TRANSACTIONAL if transactional else 0)
    check(
        lib.ls_batch_seal(
            out,
            size,
            base_offset,
            partition_leader_epoch,
            attributes,
            count - 1,
            timestamp_base,
            timestamp_max,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        ),
        "sealing the batch",
    )
    return ffi.buffer(out, size)[:]


_CONTROL_KEY = struct.Struct(">hh")  # Kafka's ControlRecordType key: version 0, type
MARKER_VALUE = struct.Struct(">hi")  # EndTransactionMarker: version 0, coordinator epoch


def build_control_batch(
    commit: bool, producer_id: int, producer_epoch: int, coordinator_epoch: int, timestamp: int | None = None
) -> bytes:
    """A transaction marker (KIP-98): one control record, COMMIT or ABORT, as Kafka writes it.

    The batch is transactional and control (attributes 0x30) with no base
    sequence; its record's key is (version 0, type 1 COMMIT or 0 ABORT) and its
    value (version 0, ``coordinator_epoch``).
    """
    key = _CONTROL_KEY.pack(0, 1 if commit else 0)
    value = MARKER_VALUE.pack(0, coordinator_epoch)
    now = int(time.time() * 1000) if timestamp is None else timestamp
    _check_fields(0, now, producer_id, producer_epoch, -1, -1)
    batch = encode_plain(
        [(key, value)], 0, now, producer_id, producer_epoch, -1, -1, _ATTR_TRANSACTIONAL | _ATTR_CONTROL
    )
    assert batch is not None
    return bytes(batch)

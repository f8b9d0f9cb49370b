"""Reading v2 record batches: a header view per batch, records decoded in C.

A :class:`RecordBatch` is a view over a buffer (bytes, a memoryview of an
mmap'd segment, a network frame). Its header fields are read at once; its
records are decoded only when asked, into numpy arrays of offsets and
positions (:meth:`RecordBatch.columns`) or into :class:`Record` objects.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, NamedTuple

import numpy as np

from logstore._native import ffi, lib, raise_for
from logstore._speedups import decode_records
from logstore.errors import CorruptRecordError
from logstore.records.codecs import CODEC_NAMES, decompress
from logstore.records.record import Record

HEADER_SIZE = lib.LS_BATCH_HEADER_SIZE
_HEADER = struct.Struct(">qiibIhiqqqhii")
_ATTR_LOG_APPEND_TIME = 0x08
_ATTR_TRANSACTIONAL = ATTR_TRANSACTIONAL = 0x10
_ATTR_CONTROL = ATTR_CONTROL = 0x20
CONTROL_ABORT = 0  # a control record's type (its key: version int16, type int16)
CONTROL_COMMIT = 1
CONTROL_NONE = -1  # producer_batches' control type of a batch that is not a control batch


class Columns:
    """The records of one batch as numpy arrays over one buffer.

    ``offsets``, ``timestamps`` (int64); ``key_positions``, ``key_lengths``,
    ``value_positions``, ``value_lengths`` (int32, length -1 = null), relative
    to ``buffer`` (the decompressed records section); ``header_first`` and
    ``header_counts`` index the four ``header_*`` arrays.
    """

    __slots__ = (
        "_narrow",
        "_wide",
        "buffer",
        "header_counts",
        "header_first",
        "header_key_lengths",
        "header_key_positions",
        "header_value_lengths",
        "header_value_positions",
        "key_lengths",
        "key_positions",
        "offsets",
        "timestamps",
        "value_lengths",
        "value_positions",
    )
    _wide: np.ndarray
    _narrow: np.ndarray

    def __init__(
        self, buffer: bytes | memoryview, count: int, header_cap: int, reuse: Columns | None = None
    ) -> None:
        self.buffer = buffer
        if reuse is not None and reuse.capacity >= count:
            # Fresh arrays page-fault on first touch; reusing a caller's saves that.
            wide, narrow = reuse._wide[:, :count], reuse._narrow[:, :count]
        else:
            wide = np.empty((2, count), dtype=np.int64)
            narrow = np.empty((6, count), dtype=np.int32)
        self._wide, self._narrow = wide, narrow
        headers = np.empty((4, header_cap), dtype=np.int32)
        self.offsets, self.timestamps = wide
        (
            self.key_positions,
            self.key_lengths,
            self.value_positions,
            self.value_lengths,
            self.header_first,
            self.header_counts,
        ) = narrow
        (
            self.header_key_positions,
            self.header_key_lengths,
            self.header_value_positions,
            self.header_value_lengths,
        ) = headers

    def __len__(self) -> int:
        return len(self.offsets)

    @property
    def capacity(self) -> int:
        """Records these arrays can hold when passed as ``out`` to a later decode."""
        return int(self._wide.shape[1])


def _ptr(kind: str, array: np.ndarray) -> Any:
    return ffi.from_buffer(kind, array)


def _decode_columns(
    section: bytes | memoryview, count: int, delta_max: int, header_cap: int
) -> Columns | int:
    """Decode, or return the header capacity needed when header_cap is short."""
    cols = Columns(section, count, header_cap)
    total = ffi.new("int64_t *")
    i64, i32 = "int64_t[]", "int32_t[]"
    rc = lib.ls_decode_records(
        ffi.from_buffer(section),
        len(section),
        count,
        delta_max,
        _ptr(i64, cols.offsets),
        _ptr(i64, cols.timestamps),
        _ptr(i32, cols.key_positions),
        _ptr(i32, cols.key_lengths),
        _ptr(i32, cols.value_positions),
        _ptr(i32, cols.value_lengths),
        _ptr(i32, cols.header_first),
        _ptr(i32, cols.header_counts),
        count,
        _ptr(i32, cols.header_key_positions),
        _ptr(i32, cols.header_key_lengths),
        _ptr(i32, cols.header_value_positions),
        _ptr(i32, cols.header_value_lengths),
        header_cap,
        total,
    )
    if rc == lib.LS_ERR_CAPACITY:
        return int(total[0])
    if rc != 0:
        raise_for(rc, "decoding the records of a batch")
    return cols


class RecordBatch:
    """A view of one v2 record batch inside a buffer.

    Header fields are attributes; ``records`` decodes (and decompresses) on
    each access, O(batch bytes).
    """

    __slots__ = (
        "_view",
        "attributes",
        "base_offset",
        "base_sequence",
        "base_timestamp",
        "batch_length",
        "crc",
        "last_offset_delta",
        "magic",
        "max_timestamp",
        "partition_leader_epoch",
        "producer_epoch",
        "producer_id",
        "record_count",
    )

    def __init__(self, view: memoryview) -> None:
        (
            self.base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self.last_offset_delta,
            self.base_timestamp,
            self.max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self.record_count,
        ) = _HEADER.unpack_from(view, 0)
        self._view = view[: 12 + self.batch_length]

    @property
    def size(self) -> int:
        """Bytes of the whole batch, log overhead included."""
        return 12 + self.batch_length

    @property
    def last_offset(self) -> int:
        return int(self.base_offset + self.last_offset_delta)

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def compression(self) -> str:
        return CODEC_NAMES[self.attributes & 0x07]

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & _ATTR_LOG_APPEND_TIME else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _ATTR_TRANSACTIONAL)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _ATTR_CONTROL)

    @property
    def raw(self) -> memoryview:
        """The batch's bytes, as stored (zero-copy)."""
        return self._view

    def records_section(self) -> bytes | memoryview:
        """The records section, decompressed when the batch is compressed.

        A record takes at least 7 bytes, so a record count the section cannot
        hold is refused before anything is allocated for it.
        """
        section = self._view[HEADER_SIZE:]
        codec = self.attributes & 0x07
        data = decompress(codec, section) if codec else section
        if self.record_count * 7 > len(data):
            raise CorruptRecordError(
                f"batch at offset {self.base_offset} claims {self.record_count} records in {len(data)} bytes"
            )
        return data

    def columns(self) -> Columns:
        """Decode the records into numpy arrays (offsets, timestamps, positions)."""
        section = self.records_section()
        count = self.record_count
        result = _decode_columns(section, count, self.last_offset_delta, count)
        if isinstance(result, int):
            result = _decode_columns(section, count, self.last_offset_delta, result)
            assert not isinstance(result, int)
        result.offsets += self.base_offset
        if self.attributes & _ATTR_LOG_APPEND_TIME:
            result.timestamps[:] = self.max_timestamp
        else:
            result.timestamps += self.base_timestamp
        return result

    @property
    def records(self) -> list[Record]:
        """The records as :class:`Record` objects, in offset order (one C pass).

        Records that do not parse raise :class:`~logstore.errors.RecordDecodeError`
        (a :class:`~logstore.errors.CorruptRecordError`) naming the record and the
        batch's base offset.
        """
        return decode_records(
            self.records_section(),
            self.record_count,
            self.last_offset_delta,
            self.base_offset,
            self.base_timestamp,
            bool(self.attributes & _ATTR_LOG_APPEND_TIME),
            self.max_timestamp,
        )

    def __iter__(self) -> Iterator[Record]:
        return iter(self.records)

    def __repr__(self) -> str:
        return (
            f"RecordBatch(base_offset={self.base_offset}, last_offset={self.last_offset}, "
            f"records={self.record_count}, compression={self.compression}, size={self.size})"
        )


def batches_of(view: memoryview) -> list[RecordBatch]:
    """Batch views of a buffer of whole, already validated batches. O(batches)."""
    result, at = [], 0
    for _ in range(len(view) // HEADER_SIZE + 1):
        if at >= len(view):
            break
        batch = RecordBatch(view[at:])
        result.append(batch)
        at += batch.size
    return result


def columns_of(view: memoryview, out: Columns | None = None) -> Columns:
    """Columns of every record in a buffer of whole, validated batches.

    Uncompressed batches decode in one C call over ``view`` itself (zero
    copy: positions index ``view``). If any batch is compressed, the
    sections are decompressed and joined into one buffer, and positions
    index that. Header details stay per batch (``RecordBatch.columns``);
    here only ``header_counts`` is filled. ``out``: a previous result whose
    arrays are reused (overwritten) when large enough.
    """
    count = int(scan(view, 0).record_count)
    cols = Columns(view, count, 0, reuse=out)
    out = ffi.new("int64_t *")
    i64, i32 = "int64_t[]", "int32_t[]"
    rc = lib.ls_decode_batches(
        ffi.from_buffer(view), len(view), count,
        _ptr(i64, cols.offsets), _ptr(i64, cols.timestamps),
        _ptr(i32, cols.key_positions), _ptr(i32, cols.key_lengths),
        _ptr(i32, cols.value_positions), _ptr(i32, cols.value_lengths),
        _ptr(i32, cols.header_counts), out,
    )  # fmt: skip
    if rc == lib.LS_ERR_ARGUMENT:
        return _joined_columns(view, count)
    if rc != 0:
        raise_for(rc, "decoding record batches")
    return cols


def _joined_columns(view: memoryview, count: int) -> Columns:
    """Columns over the joined (decompressed) sections of mixed batches."""
    parts = [batch.columns() for batch in batches_of(view)]
    cols = Columns(b"".join(bytes(p.buffer) for p in parts), count, 0)
    shift, slot = 0, 0
    for part in parts:
        n = len(part)
        for name in ("offsets", "timestamps", "key_lengths", "value_lengths", "header_counts"):
            getattr(cols, name)[slot : slot + n] = getattr(part, name)
        for name in ("key_positions", "value_positions"):
            getattr(cols, name)[slot : slot + n] = getattr(part, name) + shift
        shift += len(part.buffer)
        slot += n
    return cols


def scan(buf: Any, flags: int = lib.LS_SCAN_CRC | lib.LS_SCAN_RECORDS, leader_epoch_max: int = -1) -> Any:
    """Run the native scanner over ``buf`` with no index; returns the ls_scan_t."""
    state = ffi.new("ls_scan_t *")
    state.leader_epoch_max = leader_epoch_max
    state.leader_epoch_prev = -1
    state.offset_prev = -1
    state.timestamp_max = -1
    state.timestamp_max_offset = -1
    state.time_index_last = -1
    state.flags = flags
    data = ffi.from_buffer(buf)
    rc = lib.ls_scan_batches(data, len(data), state, ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 0)
    if rc != 0:
        raise_for(rc, "scanning record batches")
    return state


def parse_batches(buf: Any, *, allow_partial: bool = False) -> Iterator[RecordBatch]:
    """Yield the batches of a buffer of concatenated v2 batches.

    Every batch is checked (structure and CRC-32C, in C) before any is
    yielded; a failure raises :class:`CorruptRecordError` once the valid
    batches before it are out. ``allow_partial`` ends quietly at an incomplete
    last batch (as a fetch response may have).

    >>> from logstore.records import build_batch
    >>> [b.last_offset for b in parse_batches(build_batch([b"x", b"y"], base_offset=3))]
    [4]
    """
    view = memoryview(buf).cast("B") if not isinstance(buf, memoryview) else buf.cast("B")
    state = scan(view)
    yield from batches_of(view[: state.bytes_valid])
    if state.stop == lib.LS_ERR_INCOMPLETE and allow_partial:
        return
    if state.stop != 0:
        raise_for(state.stop, f"record batch at byte {state.bytes_valid}")


class ProducerBatches(NamedTuple):
    """The producer fields of a run of batches, one row per batch with a producer id (numpy arrays)."""

    producer_ids: np.ndarray  # int64
    epochs: np.ndarray  # int16
    base_sequences: np.ndarray  # int32
    last_offset_deltas: np.ndarray  # int32
    base_offsets: np.ndarray  # int64
    attributes: np.ndarray  # int16: bits ATTR_TRANSACTIONAL, ATTR_CONTROL, ...
    control_types: np.ndarray  # int16: CONTROL_ABORT, CONTROL_COMMIT, or -1 (not a control batch)


def producer_batches(view: Any) -> ProducerBatches:
    """The producer fields of every batch in ``view`` with a producer id, in C.

    Per batch: producer id, epoch, base sequence, last offset delta, base
    offset, attributes and, for a control batch, its marker type (read from
    its one record's key). The arrays are sized by a header-only count of the
    batches first, not by the worst case of one batch per 61 bytes.
    """
    cap = int(scan(view, 0).batch_count) if len(view) else 0
    ids, epochs = np.empty(cap, np.int64), np.empty(cap, np.int16)
    sequences, deltas, bases = np.empty(cap, np.int32), np.empty(cap, np.int32), np.empty(cap, np.int64)
    attributes, controls = np.empty(cap, np.int16), np.empty(cap, np.int16)
    count = ffi.new("int64_t *")
    rc = lib.ls_producer_batches(
        ffi.from_buffer(view),
        len(view),
        cap,
        ffi.from_buffer("int64_t[]", ids),
        ffi.from_buffer("int16_t[]", epochs),
        ffi.from_buffer("int32_t[]", sequences),
        ffi.from_buffer("int32_t[]", deltas),
        ffi.from_buffer("int64_t[]", bases),
        ffi.from_buffer("int16_t[]", attributes),
        ffi.from_buffer("int16_t[]", controls),
        count,
    )
    if rc != 0:
        raise_for(rc, "reading producer fields of record batches")
    n = int(count[0])
    return ProducerBatches(
        ids[:n], epochs[:n], sequences[:n], deltas[:n], bases[:n], attributes[:n], controls[:n]
    )

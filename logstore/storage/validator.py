"""Kafka's ``LogValidator``: what a log checks before it takes record batches, from one C scan.

Every append path runs one native scan (``ls_scan_batches`` with per-batch
output, :func:`scan_batches`) over the bytes, and everything after it reads
that scan's :class:`ScannedBatches` instead of the bytes: the checks here, the
producer state (:mod:`logstore.storage.producer_state`: producer id, epoch,
sequences of each batch), the Log (offsets to assign, transactional and
control batches, leader epochs) and the active segment's indexes
(``ls_index_batches`` over the scanned batches). Offset assignment
(``ls_assign_offsets``) writes each header once; with LogAppendTime it
re-seals the CRC, as Kafka does.

A producer's batch (:func:`validate_from_client`, Produce v3+) is refused
with Kafka's error (the exception's class; :mod:`logstore.protocol.errors`
maps each to its code), in this order:

- no records: INVALID_RECORD; fewer bytes than a batch header: CORRUPT_MESSAGE;
- magic other than 2: UNSUPPORTED_FOR_MESSAGE_FORMAT;
- not exactly one batch: INVALID_RECORD (bytes after it), CORRUPT_MESSAGE (cut short);
- larger than ``max.message.bytes``: MESSAGE_TOO_LARGE (:func:`check_size`, the
  one check of it, for every path);
- CRC-32C, header or records malformed: CORRUPT_MESSAGE;
- Kafka's ``validateBatch``: record count not positive or not the offset range's,
  a control batch, a producer id with a negative sequence: INVALID_RECORD;
- a compacted topic: a record without a key, INVALID_RECORD naming the records (KIP-467);
- CreateTime: a timestamp outside ``message.timestamp.before/after.max.ms`` of
  now, INVALID_TIMESTAMP naming the records.

Record-level facts (null keys, smallest record timestamp) come from the same
scan (``LS_SCAN_FIELDS``) for uncompressed batches; a compressed batch is
decompressed only when a compacted topic or a bounded
``message.timestamp.before.max.ms`` needs its records, and a refused batch is
decoded once more to name its records (the error path).
"""

from __future__ import annotations

import struct
import time
from typing import Any, NamedTuple

import numpy as np

from logstore._native import ffi, lib, raise_for
from logstore.errors import (
    CorruptRecordError,
    InvalidRecordError,
    InvalidTimestampError,
    RecordTooLargeError,
    UnsupportedMessageFormatError,
)
from logstore.records.batch import ATTR_CONTROL, ATTR_TRANSACTIONAL, columns_of
from logstore.storage.config import LogConfig

HEADER_SIZE = 61
LOG_OVERHEAD = 12
_MAGIC_AT = 16
_LENGTH = struct.Struct(">i")  # batch length, at byte 8
UNBOUNDED_MS = 2**62  # message.timestamp.before.max.ms at or above this: no limit (Kafka's default is Long.MAX)
# Per-batch slots a scan starts with: 8, and one per KiB of data (80 bytes each), so that only
# many batches under 1 KiB outrun them (the scan then runs again with a slot per 61 bytes).
_BATCHES_CAP = 8
_BYTES_PER_SLOT = 1024
LOG_FLAGS = lib.LS_SCAN_CRC | lib.LS_SCAN_RECORDS
CLIENT_FLAGS = LOG_FLAGS | lib.LS_SCAN_CLIENT
_ORDERED = lib.LS_SCAN_MONOTONIC | lib.LS_SCAN_DENSE
_NO_INDEX = (ffi.NULL, ffi.NULL, ffi.NULL, ffi.NULL, 0)
_new_unzeroed = ffi.new_allocator(should_clear_after_alloc=False)


class BatchInfo(NamedTuple):
    """One scanned batch: its ``ls_batch_info_t`` read into Python at once (one unpack, where
    reading the fields one by one through cffi costs ~50 ns each)."""

    position: int
    size: int
    base_offset: int
    timestamp_base: int
    timestamp_max: int
    record_timestamp_min: int
    record_timestamp_max: int
    producer_id: int
    last_offset_delta: int
    record_count: int
    base_sequence: int
    partition_leader_epoch: int
    keyless_count: int
    producer_epoch: int
    attributes: int


_INFO = struct.Struct("@8q5i2h")  # ls_batch_info_t, in its field order and native alignment
assert _INFO.size == ffi.sizeof("ls_batch_info_t"), "ls_batch_info_t changed: update _INFO and BatchInfo"
_new_info = tuple.__new__  # BatchInfo from the unpacked tuple without _make's checks


def batch_info(batches: Any, index: int = 0) -> BatchInfo:
    """Slot ``index`` of a scan's ``ls_batch_info_t`` array as a :class:`BatchInfo`."""
    return _new_info(BatchInfo, _INFO.unpack_from(ffi.buffer(batches), index * _INFO.size))


class ScannedBatches:
    """What one scan found in ``data`` (whole, valid batches): ``state`` (the ``ls_scan_t``:
    counts, offsets, the largest batch, the last leader epoch), ``batches[:count]`` (one
    ``ls_batch_info_t`` each, for the C core) and ``first``, the first batch in Python (a
    produce request's one batch). ``data`` is writable (a copy of read-only input), so offsets
    and epochs are assigned in place."""

    __slots__ = ("batches", "count", "data", "first", "state")

    def __init__(self, data: bytes | bytearray | memoryview, state: Any, batches: Any, count: int = -1) -> None:
        self.data = data
        self.state = state
        self.batches = batches
        self.count = int(state.batch_count) if count < 0 else count
        self.first = batch_info(batches)

    def has_transactional_or_control(self) -> bool:
        """Whether a batch is transactional or a control batch. O(batches)."""
        mask = ATTR_TRANSACTIONAL | ATTR_CONTROL
        return any(self.batches[i].attributes & mask for i in range(self.count))


def scan_batches(data: Any, flags: int, leader_epoch_max: int = -1, cap: int | None = None) -> tuple[Any, Any]:
    """The one native scan of ``data`` with per-batch output: (``ls_scan_t``, ``ls_batch_info_t[]``),
    with ``cap`` slots (default: by size, see ``_BATCHES_CAP``).

    Raises only for bad arguments; the scan's ``stop`` says where and why it stopped."""
    buf = ffi.from_buffer(data)
    size = len(buf)
    state, batches = _scan(buf, size, flags, leader_epoch_max, _BATCHES_CAP + size // _BYTES_PER_SLOT if cap is None else cap)
    if state.stop == lib.LS_ERR_CAPACITY:  # more batches than slots: once more, with room for every one
        state, batches = _scan(buf, size, flags, leader_epoch_max, size // HEADER_SIZE + 1)
    return state, batches


def _scan(buf: Any, size: int, flags: int, leader_epoch_max: int, cap: int) -> tuple[Any, Any]:
    state = ffi.new("ls_scan_t *")  # zeroed: only the inputs the flags read are set
    batches = _new_unzeroed("ls_batch_info_t[]", cap)  # the scan writes each slot it counts
    state.batches = batches
    state.batches_cap = cap
    state.flags = flags
    if flags & _ORDERED:
        state.offset_prev = -1
    if flags & lib.LS_SCAN_EPOCH:
        state.leader_epoch_max = leader_epoch_max
        state.leader_epoch_prev = -1
    rc = lib.ls_scan_batches(buf, size, state, *_NO_INDEX)
    if rc != 0:
        raise_for(rc, "scanning record batches")
    return state, batches


def writable(data: bytes | bytearray | memoryview) -> bytearray | memoryview:
    """``data`` itself when writable (a request's buffer), else a copy."""
    if isinstance(data, bytearray) or (isinstance(data, memoryview) and not data.readonly):
        return data
    return bytearray(data)


def check_size(size: int, config: LogConfig) -> None:
    """``max.message.bytes`` (Kafka's RecordTooLargeException): the one check of it, for every append."""
    if size > config.max_message_bytes:
        raise RecordTooLargeError(
            f"a batch of {size} bytes exceeds max.message.bytes={config.max_message_bytes}; raise it or send "
            "smaller batches"
        )


def record_errors_message(indexes: list[int], reason: str) -> str:
    """Kafka's summary of a batch refused for some of its records (KIP-467)."""
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{reason}')" for i in indexes[:3])
    return (
        f"One or more records have been rejected due to {len(indexes)} record errors in total, and only "
        f"showing the first three errors at most: [{shown}]"
    )


def _record_errors(cls: type[InvalidRecordError], indexes: list[int], reason: str) -> InvalidRecordError:
    return cls(record_errors_message(indexes, reason), tuple((i, reason) for i in indexes))


def validate_from_client(
    records: bytes | memoryview | None, config: LogConfig, where: str, now_ms: int | None = None
) -> ScannedBatches:
    """Kafka's LogValidator for a producer's records: exactly one v2 batch (see the module doc).

    ``where``: the topic partition (``topic-partition``) for messages. One C scan of the bytes;
    returns it with the batch writable."""
    if not records:
        raise InvalidRecordError("the request carries no record batch")
    size_given = len(records)
    if size_given < HEADER_SIZE:
        raise CorruptRecordError("records shorter than a batch header")
    magic = records[_MAGIC_AT]
    if magic != 2:
        raise UnsupportedMessageFormatError(f"magic {magic}; send v2 batches")
    size = LOG_OVERHEAD + _LENGTH.unpack_from(records, 8)[0]
    if size != size_given:
        cls = InvalidRecordError if size < size_given else CorruptRecordError
        raise cls("a produce request must carry exactly one record batch per partition")
    check_size(size, config)
    compact = "compact" in config.cleanup_policy
    create_time = config.message_timestamp_type == "CreateTime"
    bounded = create_time and config.message_timestamp_before_max_ms < UNBOUNDED_MS
    fields = lib.LS_SCAN_FIELDS if compact or bounded else 0
    state, batches = _scan(ffi.from_buffer(records), size, CLIENT_FLAGS | fields, -1, 1)
    if state.stop != 0 or state.batch_count != 1:
        if state.stop == lib.LS_ERR_INVALID:
            _refuse_batch(batch_info(batches), where)
        raise_for(state.stop or lib.LS_ERR_CORRUPT, "validating a produced record batch")
    scanned = ScannedBatches(writable(records), state, batches, 1)
    info = scanned.first
    if compact:
        _check_keys(records, info, where)
    if create_time:
        _check_timestamps(records, info, config, bounded, now_ms)
    return scanned


def _refuse_batch(info: BatchInfo, where: str) -> None:
    """Kafka's ``validateBatch`` for a client's v2 batch (INVALID_RECORD): the scan
    (``LS_SCAN_CLIENT``) found the batch breaks one of its rules; this says which."""
    count, delta = info.record_count, info.last_offset_delta
    if count <= 0:
        raise InvalidRecordError(f"Invalid reported count for record batch: {count} in topic partition {where}.")
    if count != delta + 1:
        base = info.base_offset
        raise InvalidRecordError(
            f"Inconsistent batch offset range [{base}, {base + delta}] and count of records {count} in topic "
            f"partition {where}."
        )
    if info.attributes & ATTR_CONTROL:
        raise InvalidRecordError(f"Clients are not allowed to write control records in topic partition {where}.")
    if info.producer_id >= 0 and info.base_sequence < 0:
        raise InvalidRecordError(
            f"Invalid sequence number {info.base_sequence} in record batch with producerId {info.producer_id} "
            f"in topic partition {where}."
        )


def _check_keys(records: Any, info: BatchInfo, where: str) -> None:
    """A compacted topic takes only records with keys; the scan counted null keys (uncompressed)."""
    if info.keyless_count == 0:
        return
    # Compressed (not walked) or refused: one decode names the records.
    keyless = np.flatnonzero(columns_of(memoryview(records)).key_lengths < 0)
    if len(keyless):
        reason = f"Compacted topic cannot accept message without key in topic partition {where}."
        raise _record_errors(InvalidRecordError, keyless.tolist(), reason)


def _check_timestamps(records: Any, info: BatchInfo, config: LogConfig, bounded: bool, now_ms: int | None) -> None:
    """CreateTime: every timestamp within ``message.timestamp.before/after.max.ms`` of now.

    The header gives the largest and the first timestamp; a later record may be older, so a
    bounded "before" needs the smallest (the scan's, or one decode of a compressed batch)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    before, after = config.message_timestamp_before_max_ms, config.message_timestamp_after_max_ms
    refused = info.timestamp_max - now > after or now - info.timestamp_base > before
    if not refused and bounded:
        if info.keyless_count >= 0:  # the records were walked: their smallest timestamp is known
            refused = now - info.record_timestamp_min > before
        else:
            stamps = columns_of(memoryview(records)).timestamps
            refused = bool(len(stamps)) and now - int(stamps.min()) > before
    if not refused:
        return
    stamps = columns_of(memoryview(records)).timestamps
    late = (now - stamps > before) | (stamps - now > after)
    reason = (
        f"Timestamp out of range: allowed [now - {before} ms, now + {after} ms] "
        "(message.timestamp.before/after.max.ms)"
    )
    raise _record_errors(InvalidTimestampError, np.flatnonzero(late).tolist(), reason)


def validate_for_log(
    data: bytes | bytearray | memoryview, config: LogConfig, where: str, keys_checked: bool = False
) -> ScannedBatches:
    """Batches appended through the Log's API (``append_batch``): CRC and structure, sizes and,
    for a compacted log, keys; any number of batches. One C scan."""
    compact = "compact" in config.cleanup_policy and not keys_checked
    flags = LOG_FLAGS | (lib.LS_SCAN_FIELDS if compact else 0)
    state, batches = scan_batches(data, flags)
    if state.stop != 0 or state.bytes_valid != len(data) or state.batch_count == 0:
        raise_for(state.stop or lib.LS_ERR_CORRUPT, "appending record batches")
    check_size(int(state.size_largest), config)
    scanned = ScannedBatches(writable(data), state, batches)
    if compact and any(batches[i].keyless_count != 0 for i in range(scanned.count)):
        columns = columns_of(memoryview(data))
        if len(columns) and int(columns.key_lengths.min()) < 0:
            raise keyless_error(where, config)
    return scanned


def keyless_error(where: str, config: LogConfig) -> InvalidRecordError:
    """The Log's refusal of a record without a key in a compacted log."""
    return InvalidRecordError(
        f"{where}: a record without a key cannot be appended to a compacted topic "
        f"(cleanup.policy={','.join(config.cleanup_policy)}): compaction keeps the latest "
        "record per key; give every record a key, or change cleanup.policy to delete"
    )


def validate_replicated(
    data: bytes | bytearray | memoryview, flags: int, leader_epoch_max: int, config: LogConfig
) -> ScannedBatches:
    """A leader's batches on a follower (offsets and epochs assigned): the scan's ``flags``
    (CRC, structure, offsets, epochs) and sizes; the bytes stay as they are. One C scan."""
    state, batches = scan_batches(data, flags, leader_epoch_max)
    if state.stop != 0 or state.bytes_valid != len(data):
        raise_for(state.stop or lib.LS_ERR_CORRUPT, "appending replicated record batches")
    check_size(int(state.size_largest), config)
    return ScannedBatches(data, state, batches)  # stored as they are: never written

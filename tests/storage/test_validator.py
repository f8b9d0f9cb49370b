"""storage/validator.py: Kafka's LogValidator from one C scan. Each check refuses what Kafka
refuses, with Kafka's error code (through the broker's one error table)."""

from __future__ import annotations

import struct
import time

import pytest
from kio.schema.errors import ErrorCode

from logstore._native import crc32c, lib
from logstore.errors import CorruptRecordError, InvalidRecordError, LogstoreError, RecordTooLargeError
from logstore.protocol.errors import error_for
from logstore.records import Record, build_batch
from logstore.records.builder import build_control_batch
from logstore.storage.config import LogConfig
from logstore.storage.validator import (
    UNBOUNDED_MS,
    check_size,
    scan_batches,
    validate_for_log,
    validate_from_client,
)

pytestmark = pytest.mark.unit

WHERE = "t-0"


def config(**overrides: object) -> LogConfig:
    return LogConfig.from_dict(overrides)


def refusal(records: bytes | bytearray, cfg: LogConfig | None = None, now_ms: int | None = None) -> LogstoreError:
    with pytest.raises(LogstoreError) as caught:
        validate_from_client(bytes(records), cfg or config(), WHERE, now_ms)
    return caught.value


def code(records: bytes | bytearray, cfg: LogConfig | None = None, now_ms: int | None = None) -> ErrorCode:
    return error_for(refusal(records, cfg, now_ms))


def reseal(batch: bytearray) -> bytearray:
    """Recompute the CRC after editing CRC-covered header fields."""
    struct.pack_into(">I", batch, 17, crc32c(memoryview(batch)[21:]))
    return batch


def test_a_valid_batch_is_scanned_once_with_what_later_steps_need() -> None:
    batch = build_batch([b"a", (b"k", b"b"), b"c"], producer_id=9, producer_epoch=2, base_sequence=5, timestamp=1000)
    scanned = validate_from_client(batch, config(), WHERE, now_ms=1000)
    info = scanned.first
    assert scanned.count == 1 and int(scanned.state.record_count) == 3
    assert (info.size, info.record_count, info.last_offset_delta) == (len(batch), 3, 2)
    assert (info.producer_id, info.producer_epoch, info.base_sequence) == (9, 2, 5)
    assert (info.timestamp_base, info.timestamp_max) == (1000, 1000)
    assert isinstance(scanned.data, bytearray) and scanned.data == batch  # a writable copy of read-only bytes
    view = memoryview(bytearray(batch))
    assert validate_from_client(view, config(), WHERE).data is view  # a writable request buffer, as is


def test_structure_magic_and_count_of_batches() -> None:
    batch = build_batch([b"a"])
    assert code(b"") == ErrorCode.invalid_record
    assert code(batch[:40]) == ErrorCode.corrupt_message
    old = bytearray(batch)
    old[16] = 1
    assert code(old) == ErrorCode.unsupported_for_message_format
    assert code(batch + batch) == ErrorCode.invalid_record  # Produce v3+: one batch per partition
    assert code(batch[:-1]) == ErrorCode.corrupt_message  # cut short


def test_crc_and_records_are_checked() -> None:
    damaged = bytearray(build_batch([b"abc", b"def"]))
    damaged[-1] ^= 0xFF
    assert isinstance(refusal(damaged), CorruptRecordError)
    assert code(damaged) == ErrorCode.corrupt_message
    # A record count the records do not match, CRC resealed: the record walk refuses it.
    lying = bytearray(build_batch([b"abc", b"def"]))
    struct.pack_into(">i", lying, 57, 3)
    struct.pack_into(">i", lying, 23, 2)
    assert code(reseal(lying)) == ErrorCode.corrupt_message


def test_max_message_bytes_is_one_check() -> None:
    batch = build_batch([b"x" * 500])
    assert code(batch, config(**{"max.message.bytes": len(batch) - 1})) == ErrorCode.message_too_large
    validate_from_client(batch, config(**{"max.message.bytes": len(batch)}), WHERE)
    with pytest.raises(RecordTooLargeError):
        check_size(101, config(**{"max.message.bytes": 100}))
    cfg = config(**{"max.message.bytes": len(batch)})
    with pytest.raises(RecordTooLargeError):  # the Log's path: the largest of several batches
        validate_for_log(batch + build_batch([b"x" * 501]), cfg, WHERE)


def test_kafkas_validate_batch_checks() -> None:
    """Kafka's LogValidator.validateBatch for a client's batch: INVALID_RECORD."""
    zero = bytearray(build_batch([b"a"]))  # one record, but the header says none
    struct.pack_into(">i", zero, 57, 0)
    assert code(reseal(zero)) in (ErrorCode.invalid_record, ErrorCode.corrupt_message)
    inconsistent = bytearray(build_batch([b"a", b"b"]))  # two records, offset range of three
    struct.pack_into(">i", inconsistent, 23, 2)
    err = refusal(reseal(inconsistent))
    assert error_for(err) == ErrorCode.invalid_record and "Inconsistent batch offset range [0, 2]" in str(err)
    marker = build_control_batch(True, 5, 0, 1)
    err = refusal(marker)
    assert error_for(err) == ErrorCode.invalid_record and "not allowed to write control records" in str(err)
    no_sequence = build_batch([b"a"], producer_id=5, producer_epoch=0, base_sequence=-1)
    err = refusal(no_sequence)
    assert error_for(err) == ErrorCode.invalid_record and "Invalid sequence number -1" in str(err)


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_a_compacted_topic_refuses_null_keys_naming_them(compression: str) -> None:
    compacted = config(**{"cleanup.policy": "compact"})
    keyed = build_batch([(b"k1", b"a"), (b"k2", b"b")], compression=compression)
    validate_from_client(keyed, compacted, WHERE)
    mixed = build_batch([(b"k1", b"a"), b"no key", (b"k3", b"c"), b"none"], compression=compression)
    err = refusal(mixed, compacted)
    assert isinstance(err, InvalidRecordError) and error_for(err) == ErrorCode.invalid_record
    assert [i for i, _ in err.record_errors] == [1, 3]
    assert "Compacted topic cannot accept message without key in topic partition t-0." in str(err)
    validate_from_client(mixed, config(), WHERE)  # delete policy: keys optional


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_create_time_bounds(compression: str) -> None:
    now = int(time.time() * 1000)
    bounded = config(**{"message.timestamp.before.max.ms": 60_000, "message.timestamp.after.max.ms": 60_000})
    fine = build_batch([Record(value=b"a", timestamp=now - 1000), Record(value=b"b", timestamp=now)], compression=compression)
    validate_from_client(fine, bounded, WHERE, now)
    # The first and the largest timestamps pass; a later, older record does not (the record walk).
    old = build_batch(
        [Record(value=b"a", timestamp=now), Record(value=b"b", timestamp=now - 120_000), Record(value=b"c", timestamp=now)],
        compression=compression,
    )
    err = refusal(old, bounded, now)
    assert error_for(err) == ErrorCode.invalid_timestamp and [i for i, _ in err.record_errors] == [1]  # type: ignore[attr-defined]
    future = build_batch([Record(value=b"a", timestamp=now + 120_000)], compression=compression)
    assert code(future, bounded, now) == ErrorCode.invalid_timestamp
    assert config().message_timestamp_before_max_ms >= UNBOUNDED_MS  # Kafka's default: no "before" bound
    validate_from_client(old, config(), WHERE, now)
    stamped = config(**{"message.timestamp.type": "LogAppendTime", "message.timestamp.before.max.ms": 1})
    validate_from_client(old, stamped, WHERE, now)  # the broker's clock stamps them: not checked


def test_the_scan_reports_record_fields_and_stops_at_limits() -> None:
    """LS_SCAN_FIELDS: null keys and record timestamps per batch; LS_SCAN_LIMITS: a read's span."""
    first = build_batch([Record(value=b"a", timestamp=50), Record(key=b"k", value=b"b", timestamp=20)], base_offset=0)
    second = build_batch([b"c"], base_offset=2, compression="gzip")
    data = first + second
    state, batches = scan_batches(data, lib.LS_SCAN_CRC | lib.LS_SCAN_RECORDS | lib.LS_SCAN_FIELDS)
    assert state.stop == 0 and state.batch_count == 2 and state.size_largest == max(len(first), len(second))
    assert (batches[0].keyless_count, batches[0].record_timestamp_min, batches[0].record_timestamp_max) == (1, 20, 50)
    assert batches[1].keyless_count == -1  # compressed: not walked
    assert (batches[1].position, batches[1].base_offset) == (len(first), 2)
    state, _ = scan_batches(data, lib.LS_SCAN_CRC, cap=1)  # more batches than slots: scanned again
    assert state.stop == 0 and state.batch_count == 2
    limited, _ = scan_batches(data, lib.LS_SCAN_LIMITS | lib.LS_SCAN_CRC)  # offset_limit 0: nothing
    assert limited.stop == 0 and limited.batch_count == 0

"""The Log's retention (by size, time and log start), rolls by time, DeleteRecords and truncation,
and lookups by timestamp."""

from __future__ import annotations

import shutil
import time

import pytest

from logstore import Log
from logstore.errors import OffsetOutOfRangeError
from logstore.records import Record, build_batch

pytestmark = pytest.mark.unit

CONFIG = {"segment.bytes": 1500, "index.interval.bytes": 200}


def fill(log: Log, batches: int, per: int = 4, ts0: int | None = None) -> None:
    """Append batches with timestamps ts0 + i (default: recent, so segment.ms does not roll)."""
    ts0 = int(time.time() * 1000) - 10_000 if ts0 is None else ts0
    for i in range(batches):
        log.append([bytes([i % 256]) * 60] * per, timestamp=ts0 + i)


def test_retention_by_size_time_and_log_start(segment_dir: str) -> None:
    with Log.open(segment_dir, {**CONFIG, "retention.bytes": 3000, "retention.ms": -1}) as log:
        fill(log, 40)
        sizes = [s.size for s in log.segments.values()]
        deleted = log.delete_old_segments()
        # Kafka's rule: drop the oldest while what remains stays >= retention.bytes.
        expected, excess = 0, sum(sizes) - 3000
        for size in sizes[:-1]:
            if excess - size < 0:
                break
            excess -= size
            expected += 1
        assert deleted == expected > 0 and log.size == sum(sizes[expected:])
        assert log.log_start_offset == log.segments.peekitem(0)[1].base_offset
        with pytest.raises(OffsetOutOfRangeError):
            log.read(0)
    shutil.rmtree(segment_dir)
    with Log.open(segment_dir, {**CONFIG, "retention.ms": 1000}) as log:
        fill(log, 40, ts0=50_000)
        # Segments whose newest record is older than now - 1000 go; never the active one.
        assert log.delete_old_segments(now_ms=50_000 + 25 + 1001) > 0
        oldest = log.segments.peekitem(0)[1]
        assert oldest.max_timestamp >= 50_000 + 25 - 1 or len(log.segments) == 1
        assert log.delete_old_segments(now_ms=10**15) == len(log.segments) - 1 or len(log.segments) == 1
        assert len(log.segments) == 1 and log.active_segment.size > 0


def test_retention_stops_at_the_high_watermark(segment_dir: str) -> None:
    with Log.open(segment_dir, {**CONFIG, "retention.ms": 0}) as log:
        fill(log, 30)
        hw = log.segments.keys()[2] + 1  # inside the third segment
        log.high_watermark = hw
        assert log.delete_old_segments(now_ms=10**15) == 2  # the third holds the HW: it stays
        assert log.log_start_offset == log.segments.keys()[0] < hw
        assert log.read(log.log_start_offset, upto="log_end").records[0].offset == log.log_start_offset


def test_delete_records_and_truncate(segment_dir: str) -> None:
    with Log.open(segment_dir, CONFIG) as log:
        fill(log, 30)
        assert log.delete_records(37) == 37
        assert log.log_start_offset == 37 and log.segments.peekitem(0)[1].base_offset <= 37
        assert log.read(37).records[0].offset == 37
        with pytest.raises(OffsetOutOfRangeError):
            log.read(36)
        with pytest.raises(OffsetOutOfRangeError):
            log.delete_records(log.log_end_offset + 1)
        log.truncate_to(90)  # batches of 4: the batch holding 90 starts at 88
        assert log.log_end_offset == 88
        assert log.append([b"z"]).first_offset == 88
        log.truncate_to(10)  # below the log start: start over at 10
        assert log.log_start_offset == log.log_end_offset == 10 and len(log.segments) == 1
    with Log.open(segment_dir, CONFIG) as log:
        assert log.log_start_offset == 10 and log.log_end_offset == 10


def test_roll_by_time(segment_dir: str) -> None:
    with Log.open(segment_dir, {"segment.ms": 50}) as log:
        now = int(time.time() * 1000)
        log.append([b"a"], timestamp=now)
        time.sleep(0.12)
        log.append([b"b"], timestamp=int(time.time() * 1000))
        assert len(log.segments) == 2


def test_offset_for_timestamp(segment_dir: str) -> None:
    with Log.open(segment_dir, CONFIG) as log:
        fill(log, 30, ts0=1000)  # batch i has timestamp 1000 + i, offsets 4i..4i+3
        assert log.offset_for_timestamp(1010) == (1010, 40)
        assert log.offset_for_timestamp(999) == (1000, 0)
        assert log.offset_for_timestamp(5000) is None
        assert log.offset_for_timestamp(-2) == (-1, 0)
        assert log.offset_for_timestamp(-1) == (-1, 120)
        # -3: the first record carrying the largest timestamp (Kafka 3.8, KAFKA-16310), not the
        # last offset of its batch
        assert log.offset_for_timestamp(-3) == (1029, 116)
        log.delete_records(50)
        assert log.offset_for_timestamp(1010) == (1012, 50)


def test_max_timestamp_is_the_records_own_offset(segment_dir: str) -> None:
    """librdkafka's 0081 ListOffsets case: three records in one batch stamped +100, +400, +250:
    MAX_TIMESTAMP answers offset 1 (the +400 record), the batch's last offset would be 2."""
    with Log.open(segment_dir, CONFIG) as log:
        base = 10_000_000
        stamps = (base + 100, base + 400, base + 250)
        log.append_batch(bytearray(build_batch([Record(value=b"m", timestamp=t) for t in stamps])))
        assert log.offset_for_timestamp(-3) == (base + 400, 1)
        assert log.offset_for_timestamp(base + 300) == (base + 400, 1)
        assert log.offset_for_timestamp(base + 150) == (base + 400, 1)
        assert log.offset_for_timestamp(base + 50) == (base + 100, 0)

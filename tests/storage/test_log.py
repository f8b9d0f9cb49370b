"""Log: appends across segment rolls, reads, offsets, high watermark, reopen."""

from __future__ import annotations

import os
import pathlib

import numpy as np
import pytest

from logstore.errors import (
    ClosedError,
    CorruptRecordError,
    InvalidConfigError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
)
from logstore.records import Record, build_batch
from logstore.storage.log import Log

pytestmark = pytest.mark.unit


def test_append_and_read_across_rolls(segment_dir: str) -> None:
    with Log.open(segment_dir, {"segment.bytes": 5000}) as log:
        values = [f"value-{i}".encode() * 20 for i in range(300)]
        for i in range(0, 300, 10):
            info = log.append(values[i : i + 10])
            assert (info.first_offset, info.last_offset) == (i, i + 9)
        assert len(log.segments) > 5 and log.log_end_offset == 300
        assert all(s.size <= 5000 for s in log.segments.values())
        got, offset = [], 0
        for _ in range(400):  # bounded: each read advances by at least one batch
            if offset >= log.log_end_offset:
                break
            records = log.read(offset, max_bytes=1).records
            got += records
            offset = records[-1].offset + 1
        assert [r.value for r in got] == values and [r.offset for r in got] == list(range(300))


def test_append_batch_assigns_offsets_to_producer_batches(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        log.append([b"first"])
        info = log.append_batch(
            build_batch([b"a", b"b"], base_offset=0) + build_batch([(b"k", b"c")], base_offset=0)
        )
        assert (info.first_offset, info.last_offset) == (1, 3)
        records = log.read(1).records
        assert [(r.offset, r.key, r.value) for r in records] == [
            (1, None, b"a"),
            (2, None, b"b"),
            (3, b"k", b"c"),
        ]


def test_read_starts_at_the_requested_offset_within_a_batch(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        log.append([Record(key=b"k", value=bytes([i]), headers=[("i", bytes([i]))]) for i in range(10)])
        result = log.read(7)
        assert [r.offset for r in result.records] == [7, 8, 9]
        assert result.batches[0].base_offset == 0  # the whole batch holding 7 is served
        assert result.file is not None and result.size == os.path.getsize(result.file)


def test_offsets_out_of_range_and_at_the_end(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        log.append([b"x"] * 5)
        assert log.read(5).records == []
        with pytest.raises(OffsetOutOfRangeError, match="outside"):
            log.read(6)
        with pytest.raises(OffsetOutOfRangeError):
            log.read(-1)


def test_high_watermark_bounds_reads(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        for _ in range(4):
            log.append([b"r"] * 5)
        log.high_watermark = 10
        assert [r.offset for r in log.read(0, max_bytes=1 << 20).records] == list(range(10))
        assert log.read(10).records == []
        assert [r.offset for r in log.read(10, upto="log_end").records] == list(range(10, 20))


def test_oversized_and_corrupt_batches_are_refused(segment_dir: str) -> None:
    with Log.open(segment_dir, {"max.message.bytes": 1000}) as log:
        with pytest.raises(RecordTooLargeError, match=r"max\.message\.bytes"):
            log.append_batch(build_batch([b"x" * 2000]))
        damaged = bytearray(build_batch([b"y" * 100]))
        damaged[-5] ^= 0xFF
        with pytest.raises(CorruptRecordError):
            log.append_batch(bytes(damaged))
        assert log.log_end_offset == 0


def test_reopen_keeps_everything(segment_dir: str) -> None:
    with Log.open(segment_dir, {"segment.bytes": 3000}) as log:
        for i in range(20):
            log.append([bytes([i]) * 50] * 5)
        segments = len(log.segments)
    with Log.open(segment_dir, {"segment.bytes": 3000}) as log:
        assert len(log.segments) == segments and log.log_end_offset == 100
        assert log.read(99).records[0].value == bytes([19]) * 50
        info = log.append([b"more"])
        assert info.first_offset == 100


def test_flush_messages_one_advances_the_recovery_point(segment_dir: str) -> None:
    with Log.open(segment_dir, {"flush.messages": 1}) as log:
        log.append([b"a", b"b"])
        assert log.recovery_point == 2


def test_bad_config_and_closed_log(segment_dir: str) -> None:
    with pytest.raises(InvalidConfigError):
        Log.open(segment_dir, {"segment.bites": 1})
    log = Log.open(segment_dir)
    log.close()
    with pytest.raises(ClosedError):
        log.append([b"x"])
    with pytest.raises(ClosedError):
        log.read(0)


def test_get_returns_single_records_across_segments_and_codecs(segment_dir: str) -> None:
    with Log.open(segment_dir, {"segment.bytes": 3000}) as log:
        expected = {}
        for i in range(40):
            records = [
                Record(key=bytes([i]), value=f"{i}-{j}".encode(), headers=[("j", bytes([j]))])
                for j in range(7)
            ]
            if i % 3:
                info = log.append(records)
            else:
                info = log.append_batch(build_batch(records, compression="zstd"))
            for j, offset in enumerate(range(info.first_offset, info.last_offset + 1)):
                expected[offset] = (bytes([i]), f"{i}-{j}".encode(), (("j", bytes([j])),))
        assert len(log.segments) >= 3
        for offset in sorted(expected, key=lambda o: (o * 7919) % len(expected)):
            record = log.get(offset)
            assert record is not None and record.offset == offset
            assert (record.key, record.value, record.headers) == expected[offset]
        with pytest.raises(OffsetOutOfRangeError):
            log.get(log.log_end_offset)


def test_get_never_serves_a_damaged_batch(segment_dir: str) -> None:
    with Log.open(segment_dir, {"segment.bytes": 2000}) as log:
        for i in range(20):
            log.append([bytes([i]) * 100] * 3)
        first = log.segments.peekitem(0)[1]
        path = first.log_path
    with open(path, "r+b") as f:
        f.seek(200)
        byte = f.read(1)
        f.seek(200)
        f.write(bytes([byte[0] ^ 0x01]))
    # A clean shutdown: no rescan on open, so the read path must catch it.
    with Log.open(segment_dir, {"segment.bytes": 2000}) as log, pytest.raises(CorruptRecordError):
        for offset in range(6):
            log.get(offset)


def test_a_read_serves_the_batches_before_a_damaged_one_then_refuses_it(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        for i in range(10):
            log.append([b"record-%d" % i])
        log.high_watermark = 10
    with open(log.segments.peekitem(0)[1].log_path, "r+b") as f:
        data = f.read()
        at = data.find(b"record-6")
        f.seek(at + 7)
        f.write(b"9")  # record 6 now reads "record-9": its batch's CRC no longer matches
    with Log.open(segment_dir) as log:  # a clean shutdown: nothing rescans it on open
        log.high_watermark = 10
        first = log.read(0, max_bytes=1 << 20)
        assert [r.value for r in first.records] == [b"record-%d" % i for i in range(6)]
        with pytest.raises(CorruptRecordError, match="failed its check"):
            log.read(6, max_bytes=1 << 20)
        assert [r.value for r in log.read(7).records] == [b"record-7", b"record-8", b"record-9"]


def test_columnar_read_matches_records_and_reuses_arrays(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        for i in range(6):
            records = [(bytes([i, j]) if j % 2 else None, bytes([j]) * (j + i)) for j in range(50)]
            if i == 3:
                log.append_batch(build_batch(records, compression="snappy"))
            else:
                log.append(records)
        plain = log.read(0, max_bytes=1 << 20, upto="log_end")
        for result in (plain, log.read(0, max_bytes=3 * 400)):
            cols = result.columns()
            data = bytes(cols.buffer)
            got = [
                (
                    int(o),
                    None if kl < 0 else data[kp : kp + kl],
                    None if vl < 0 else data[vp : vp + vl],
                )
                for o, kp, kl, vp, vl in zip(
                    cols.offsets,
                    cols.key_positions,
                    cols.key_lengths,
                    cols.value_positions,
                    cols.value_lengths,
                    strict=True,
                )
            ]
            assert got == [(r.offset, r.key, r.value) for r in result.records]
        first = log.read(0, max_bytes=1).columns()  # uncompressed: positions index the view itself
        assert first.buffer.obj is not None and len(first) == 50
        again = log.read(50, max_bytes=1).columns(out=first)
        assert again.offsets[0] == 50 and np.shares_memory(again.offsets, first.offsets)


def test_log_append_time_replaces_producer_timestamps(segment_dir: str) -> None:
    import time

    with Log.open(segment_dir, {"message.timestamp.type": "LogAppendTime"}) as log:
        before = int(time.time() * 1000)
        log.append([Record(value=b"a", timestamp=5)])
        log.append_batch(build_batch([Record(value=b"b", timestamp=7)]))
        after = int(time.time() * 1000)
        for batch in log.read(0).batches:
            assert batch.timestamp_type == "LogAppendTime"
        stamps = [r.timestamp for r in log.read(0).records]
        assert len(stamps) == 2 and all(before <= t <= after for t in stamps)


def test_append_batch_patches_writable_buffers_in_place(segment_dir: str) -> None:
    with Log.open(segment_dir) as log:
        log.append([b"x"] * 3)
        request = bytearray(build_batch([b"a", b"b"]))
        log.append_batch(memoryview(request))
        assert int.from_bytes(request[:8], "big") == 3  # offsets assigned in the caller's buffer
        frozen = build_batch([b"c"])
        log.append_batch(frozen)
        assert int.from_bytes(frozen[:8], "big") == 0  # bytes are never mutated
        assert [r.value for r in log.read(0).records] == [b"x", b"x", b"x", b"a", b"b", b"c"]


def test_read_result_iterates_over_its_records(tmp_path: pathlib.Path) -> None:
    """``for r in log.read(0)`` is what a user writes first: the records at or after the offset."""
    with Log.open(str(tmp_path / "t-0")) as log:
        log.append([b"a", b"b"])
        log.append([b"c"])
        assert [r.value for r in log.read(0)] == [b"a", b"b", b"c"]
        assert [(r.offset, r.value) for r in log.read(1)] == [(1, b"b"), (2, b"c")]
        assert list(log.read(3)) == []

"""LogSegment: appends, indexed reads, timestamps, recovery, truncation, closing."""

from __future__ import annotations

import os
import random

import pytest

from logstore.errors import ClosedError, CorruptRecordError, InvalidArgumentError
from logstore.records import build_batch, parse_batches
from logstore.storage import IndexFullError, LogSegment, segment_file_name

pytestmark = pytest.mark.unit


def fill(
    segment: LogSegment, batches: int, per_batch: int = 10, size: int = 100, ts0: int = 1_000
) -> list[bytes]:
    """Append ``batches`` batches; returns their bytes (the oracle)."""
    written = []
    for i in range(batches):
        batch = build_batch(
            [bytes([i % 251]) * size] * per_batch, base_offset=segment.next_offset, timestamp=ts0 + i * 10
        )
        segment.append(batch)
        written.append(batch)
    return written


def batch_bounds(written: list[bytes]) -> list[tuple[int, int, int]]:
    """(first offset, last offset, position) of each written batch."""
    bounds, position = [], 0
    for raw in written:
        b = next(parse_batches(raw))
        bounds.append((b.base_offset, b.last_offset, position))
        position += len(raw)
    return bounds


def test_files_are_named_like_kafka(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 1234)
    seg.close()
    assert sorted(os.listdir(segment_dir)) == [
        "00000000000000001234.index",
        "00000000000000001234.log",
        "00000000000000001234.timeindex",
    ]
    assert segment_file_name(5, ".log") == "00000000000000000005.log"


def test_every_offset_reads_from_the_batch_that_holds_it(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=512)
    written = fill(seg, 60)
    assert seg.next_offset == 600 and seg.size == sum(map(len, written))
    for first, last, position in batch_bounds(written):
        for offset in (first, (first + last) // 2, last):
            read = seg.read(offset, max_bytes=1)
            assert read is not None and read.position == position
            assert bytes(read.view) == written[first // 10]  # at least one whole batch
    assert seg.read(600, 1 << 20) is None
    seg.close()


def test_index_entries_follow_kafkas_interval_rule(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=2000)
    written = fill(seg, 40)  # batches of ~1,150 bytes
    # Oracle: an entry before a batch once more than 2000 bytes passed since the last.
    expected, since = [], 0
    for (_, last, position), raw in zip(batch_bounds(written), written, strict=True):
        if since > 2000:
            expected.append((last, position))
            since = 0
        since += len(raw)
    got = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    assert got == expected and len(got) > 5
    seg.close()


def test_read_max_bytes_returns_whole_batches(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0)
    written = fill(seg, 20)
    size = len(written[0])
    read = seg.read(0, max_bytes=size * 3 + size // 2)
    assert read is not None and read.size == size * 3
    assert [b.base_offset for b in parse_batches(read.view)] == [0, 10, 20]
    capped = seg.read(0, max_bytes=1 << 20, max_position=size * 2)
    assert capped is not None and capped.size == size * 2
    seg.close()


def test_timestamp_lookup_matches_a_linear_scan(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=300)
    written = fill(seg, 50)
    records = [r for raw in written for b in parse_batches(raw) for r in b.records]
    for target in [0, 999, 1000, 1001, 1250, 1255, 1490, 1491, 10**9]:
        expected = next(((r.timestamp, r.offset) for r in records if r.timestamp >= target), None)
        assert seg.find_offset_by_timestamp(target) == expected, target
    seg.close()


def test_reopen_sealed_segment_reads_the_same(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 500, index_interval_bytes=1000)
    written = fill(seg, 30)
    entries = [seg.offset_index.entry(i) for i in range(seg.offset_index.entries)]
    seg.seal()
    seg.close()
    index_path = os.path.join(segment_dir, segment_file_name(500, ".index"))
    assert os.path.getsize(index_path) == 8 * len(entries)  # trimmed on roll
    again = LogSegment.open(segment_dir, 500, active=False)
    assert again.next_offset == 800 and again.size == sum(map(len, written))
    assert [again.offset_index.entry(i) for i in range(again.offset_index.entries)] == entries
    with pytest.raises(InvalidArgumentError):
        again.append(build_batch([b"x"], base_offset=800))
    again.close()


@pytest.mark.parametrize("suffix", [".index", ".timeindex"])
def test_missing_index_is_rebuilt_identically(segment_dir: str, suffix: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=700)
    fill(seg, 40)
    seg.seal()
    seg.close()
    path = os.path.join(segment_dir, segment_file_name(0, suffix))
    with open(path, "rb") as f:
        original = f.read()
    os.unlink(path)
    again = LogSegment.open(segment_dir, 0, active=False, index_interval_bytes=700)
    again.close()
    with open(path, "rb") as f:
        assert f.read() == original


def test_damaged_offset_index_is_detected_and_rebuilt(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=700)
    written = fill(seg, 40)
    seg.seal()
    seg.close()
    path = os.path.join(segment_dir, segment_file_name(0, ".index"))
    with open(path, "rb") as f:
        original = f.read()
    rng = random.Random(7)
    for _ in range(30):
        damaged = bytearray(original)
        damaged[rng.randrange(len(damaged))] ^= 1 << rng.randrange(8)
        with open(path, "wb") as f:
            f.write(damaged)
        again = LogSegment.open(segment_dir, 0, active=False, index_interval_bytes=700)
        for first, _, position in batch_bounds(written)[::7]:
            read = again.read(first, 1)
            assert read is not None and read.position == position
        again.close()
        with open(path, "rb") as f:
            assert f.read() == original


def test_recover_truncates_a_torn_tail(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0)
    written = fill(seg, 10)
    seg.close()
    log = os.path.join(segment_dir, segment_file_name(0, ".log"))
    whole = sum(map(len, written))
    with open(log, "ab") as f:
        f.write(written[0][:50])  # half a batch header
    again = LogSegment.open(segment_dir, 0)
    assert again.size == whole and again.next_offset == 100
    again.append(build_batch([b"next"], base_offset=100))  # appends resume at the end
    assert again.next_offset == 101
    again.close()


def test_recover_stops_at_a_crc_failure_and_never_serves_it(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0)
    written = fill(seg, 10)
    seg.close()
    log = os.path.join(segment_dir, segment_file_name(0, ".log"))
    with open(log, "r+b") as f:
        f.seek(len(written[0]) * 6 + 100)  # inside batch 6's records
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    again = LogSegment.open(segment_dir, 0)
    assert again.recover() == len(written[0]) * 4
    assert again.next_offset == 60
    assert again.read(60, 1 << 20) is None
    again.close()


def test_truncate_to_removes_batches_and_index_entries(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=500)
    written = fill(seg, 30)
    removed = seg.truncate_to(150)
    assert removed == sum(map(len, written[15:]))
    assert seg.next_offset == 150
    assert all(seg.offset_index.entry(i)[0] < 150 for i in range(seg.offset_index.entries))
    assert seg.time_index.last_entry()[1] < 150
    assert seg.max_timestamp == 1000 + 14 * 10
    fill(seg, 2)
    assert seg.next_offset == 170
    seg.close()
    again = LogSegment.open(segment_dir, 0)
    assert again.next_offset == 170
    again.close()


def test_append_rejects_bad_input_and_writes_nothing(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0)
    fill(seg, 3)
    size = seg.size
    with pytest.raises(CorruptRecordError):
        seg.append(build_batch([b"x"], base_offset=5))  # offsets go backwards
    good = bytearray(build_batch([b"y"], base_offset=30))
    with pytest.raises(CorruptRecordError):
        seg.append(bytes(good[:-3]))  # incomplete
    with pytest.raises(CorruptRecordError):
        seg.append(b"\x00" * 100)  # garbage
    assert seg.size == size == os.path.getsize(seg.log_path)
    seg.close()


def test_full_index_refuses_before_writing(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0, index_interval_bytes=1, max_index_size=24)
    fill(seg, 3)  # entries before batches 2 and 3 fill the time index's 2 slots (24 // 12)
    assert seg.time_index.is_full and seg.offset_index.entries == 2
    size = seg.size
    with pytest.raises(IndexFullError):
        fill(seg, 1, ts0=5_000)  # a new max timestamp needs a time index slot
    assert seg.size == size
    seg.close()


def test_closed_segment_raises(segment_dir: str) -> None:
    seg = LogSegment.create(segment_dir, 0)
    fill(seg, 2)
    view = seg.read(0, 1 << 20)
    seg.close()
    seg.close()
    for call in (
        lambda: seg.read(0, 100),
        lambda: seg.append(build_batch([b"z"], base_offset=20)),
        seg.flush,
        lambda: seg.find_offset_by_timestamp(0),
        lambda: seg.view(),
    ):
        with pytest.raises(ClosedError):
            call()
    # A view taken before close stays valid (the map lives while it is referenced).
    assert view is not None and len(bytes(view.view)) == view.size

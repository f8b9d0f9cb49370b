"""Microbenchmarks of logstore's hot paths, with peers where there is one.

Peers: the ``crc32c`` package (CRC-32C) and kafka-python's pure-Python v2
record batch code (encode, decode, CRC validation). Each benchmark checks
its result, so a broken benchmark fails instead of timing nothing. Rates
(GB/s, records/s, µs per call) are computed from the median; see
``conftest.report`` and docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import os
import random
import shutil
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import crc32c as crc32c_package
import pytest

with warnings.catch_warnings():
    # kafka-python 3.0 loads its protocol schemas with importlib.resources.read_text,
    # deprecated in 3.11: ~200 warnings at import that say nothing about logstore.
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
    from kafka.record.memory_records import MemoryRecords

from bench.conftest import RECORDS_PER_BATCH, TIMESTAMP, SegmentFixture, report
from logstore._native import crc32c as logstore_crc32c
from logstore._native import lib
from logstore.records import RecordBatch, build_batch, parse_batches
from logstore.records.batch import batches_of, scan
from logstore.storage import LogSegment

# Warm up every benchmark (bounded: at most 1,000 rounds and no more rounds than it
# then times) so first-touch page faults of maps and buffers stay out of the figures.
pytestmark = pytest.mark.benchmark(warmup=True, warmup_iterations=1000)

MIB = 1024 * 1024
LOOKUPS_PER_ROUND = 1_000
READ_MAX_BYTES = MIB
APPEND_BATCHES_PER_ROUND = 32
APPEND_PRIMING_BATCHES = 2


class Cycle:
    """Hands out consecutive chunks of a pre-generated list, wrapping around."""

    def __init__(self, items: Sequence[int], chunk: int) -> None:
        self.chunks = [list(items[i : i + chunk]) for i in range(0, len(items) - chunk + 1, chunk)]
        self.next_index = 0

    def next(self) -> list[int]:
        chunk = self.chunks[self.next_index % len(self.chunks)]
        self.next_index += 1
        return chunk


# -- CRC-32C ---------------------------------------------------------------

CRC_IMPLEMENTATIONS: dict[str, Callable[[bytes], int]] = {
    "logstore": logstore_crc32c,
    "crc32c_pkg": crc32c_package.crc32c,
}


@functools.cache
def crc_input(size: int) -> bytes:
    """One buffer per size, shared by both implementations (same bytes, same address)."""
    return random.Random(size).randbytes(size)


@pytest.mark.parametrize("size", [MIB, 64 * 1024], ids=["1MiB", "64KiB"])
@pytest.mark.parametrize("impl", list(CRC_IMPLEMENTATIONS))
def test_crc32c(benchmark: Any, impl: str, size: int) -> None:
    data = crc_input(size)
    function = CRC_IMPLEMENTATIONS[impl]
    benchmark.group = f"crc32c {size // 1024} KiB"
    result = benchmark(function, data)
    assert result == crc32c_package.crc32c(data)
    report(benchmark, per_call=size, unit="GB/s", scale=1e-9)


# -- encode ----------------------------------------------------------------


def test_encode_values(benchmark: Any, values: list[bytes]) -> None:
    benchmark.group = "encode 1,000 x 100 B"
    result = benchmark(build_batch, values, timestamp=TIMESTAMP)
    assert len(result) == 109_997
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


def test_encode_pairs(benchmark: Any, pairs: list[tuple[bytes, bytes]]) -> None:
    benchmark.group = "encode 1,000 x 100 B"
    result = benchmark(build_batch, pairs, timestamp=TIMESTAMP)
    assert len(result) == 109_997 + RECORDS_PER_BATCH * 10
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


@pytest.mark.parametrize("payload", ["random", "json"])
def test_encode_values_zstd(
    benchmark: Any, payload: str, values: list[bytes], compressible_values: list[bytes]
) -> None:
    records = values if payload == "random" else compressible_values
    benchmark.group = "encode 1,000 x 100 B"
    result = benchmark(build_batch, records, timestamp=TIMESTAMP, compression="zstd")
    decoded = next(parse_batches(result))
    assert decoded.compression == "zstd" and decoded.record_count == RECORDS_PER_BATCH
    benchmark.extra_info["batch_bytes"] = len(result)
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


def _kafka_python_build(values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 30,
    )
    for offset, value in enumerate(values):
        builder.append(offset, timestamp=TIMESTAMP, key=None, value=value, headers=[])
    return bytes(builder.build())


def test_encode_values_kafka_python(benchmark: Any, values: list[bytes], batch: bytes) -> None:
    benchmark.group = "encode 1,000 x 100 B"
    result = benchmark(_kafka_python_build, values)
    # Identical to ours except the partition leader epoch (0 vs -1), outside the CRC.
    assert result[:12] == batch[:12] and result[16:] == batch[16:]
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


# -- decode ----------------------------------------------------------------


def _parsed(batch: bytes) -> RecordBatch:
    return next(parse_batches(batch))


def test_decode_records(benchmark: Any, batch: bytes, values: list[bytes]) -> None:
    parsed = _parsed(batch)
    benchmark.group = "decode 1,000 x 100 B"
    records = benchmark(lambda: parsed.records)
    assert len(records) == RECORDS_PER_BATCH
    assert records[-1].value == values[-1] and records[-1].offset == RECORDS_PER_BATCH - 1
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


def test_decode_columns(benchmark: Any, batch: bytes) -> None:
    parsed = _parsed(batch)
    benchmark.group = "decode 1,000 x 100 B"
    columns = benchmark(parsed.columns)
    assert len(columns) == RECORDS_PER_BATCH
    assert int(columns.offsets[-1]) == RECORDS_PER_BATCH - 1 and int(columns.value_lengths.sum()) == 100_000
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


def test_decode_records_kafka_python(benchmark: Any, batch: bytes, values: list[bytes]) -> None:
    benchmark.group = "decode 1,000 x 100 B"
    records = benchmark(lambda: list(DefaultRecordBatch(batch)))
    assert len(records) == RECORDS_PER_BATCH and records[-1].value == values[-1]
    report(benchmark, per_call=RECORDS_PER_BATCH, unit="records/s")


# -- scan + CRC validation -------------------------------------------------

SCAN_FLAGS = {"crc": lib.LS_SCAN_CRC, "crc+records": lib.LS_SCAN_CRC | lib.LS_SCAN_RECORDS}


@pytest.mark.parametrize("flags", list(SCAN_FLAGS))
def test_scan(benchmark: Any, flags: str, scan_buffer: bytes) -> None:
    benchmark.group = "scan 64 MiB"
    state = benchmark(scan, scan_buffer, SCAN_FLAGS[flags])
    assert state.stop == lib.LS_OK and state.bytes_valid == len(scan_buffer)
    assert state.record_count == state.batch_count * RECORDS_PER_BATCH
    report(benchmark, per_call=len(scan_buffer), unit="GB/s", scale=1e-9)


def _kafka_python_validate(buffer: bytes) -> int:
    count = 0
    for record_batch in MemoryRecords(buffer):
        if not record_batch.validate_crc():
            raise AssertionError(f"batch {count} fails its CRC")
        count += 1
    return count


def test_scan_kafka_python(benchmark: Any, scan_buffer: bytes) -> None:
    benchmark.group = "scan 64 MiB"
    count = benchmark(_kafka_python_validate, scan_buffer)
    assert count == scan(scan_buffer, lib.LS_SCAN_CRC).batch_count
    report(benchmark, per_call=len(scan_buffer), unit="GB/s", scale=1e-9)


# -- index lookup + position search -----------------------------------------


def _check_translate(fixture: SegmentFixture) -> None:
    """translate_offset finds the batch holding the offset (a sample, untimed)."""
    segment = fixture.segment
    for offset in fixture.lookup_offsets[:200]:
        found = segment.translate_offset(offset)
        assert found is not None
        held = RecordBatch(segment.view(*found))
        assert held.base_offset <= offset <= held.last_offset


@pytest.mark.parametrize("which", ["big_segment", "dense_segment"])
def test_translate_offset(benchmark: Any, which: str, request: pytest.FixtureRequest) -> None:
    fixture: SegmentFixture = request.getfixturevalue(which)
    segment = fixture.segment
    _check_translate(fixture)
    cycle = Cycle(fixture.lookup_offsets, LOOKUPS_PER_ROUND)
    translate = segment.translate_offset

    def lookups() -> tuple[int, int] | None:
        found = None
        for offset in cycle.next():
            found = translate(offset)
        return found

    benchmark.group = "lookup (per call = median / 1,000)"
    found = benchmark(lookups)
    assert found is not None and 0 <= found[0] < segment.size
    benchmark.extra_info["index_entries"] = segment.offset_index.entries
    benchmark.extra_info["segment_bytes"] = segment.size
    report(benchmark, per_call=LOOKUPS_PER_ROUND, unit="µs/call")


def test_offset_index_lookup(benchmark: Any, big_segment: SegmentFixture) -> None:
    index = big_segment.segment.offset_index
    cycle = Cycle(big_segment.lookup_offsets, LOOKUPS_PER_ROUND)
    lookup = index.lookup

    def lookups() -> tuple[int, int]:
        found = (-1, -1)
        for offset in cycle.next():
            found = lookup(offset)
        return found

    benchmark.group = "lookup (per call = median / 1,000)"
    offset, position = benchmark(lookups)
    assert 0 <= offset < big_segment.segment.next_offset and 0 <= position < big_segment.segment.size
    report(benchmark, per_call=LOOKUPS_PER_ROUND, unit="µs/call")


def test_bare_ls_offset_index_lookup(benchmark: Any, big_segment: SegmentFixture) -> None:
    segment = big_segment.segment
    pointer, entries, base = segment.offset_index.pointer, segment.offset_index.entries, segment.base_offset
    relative = [offset - base for offset in big_segment.lookup_offsets]
    cycle = Cycle(relative, LOOKUPS_PER_ROUND)
    function = lib.ls_offset_index_lookup

    def lookups() -> int:
        slot = -2
        for target in cycle.next():
            slot = function(pointer, entries, target)
        return int(slot)

    benchmark.group = "lookup (per call = median / 1,000)"
    slot = benchmark(lookups)
    assert -1 <= slot < entries
    report(benchmark, per_call=LOOKUPS_PER_ROUND, unit="µs/call")


def test_lookup_loop_overhead(benchmark: Any, big_segment: SegmentFixture) -> None:
    """The loop the lookup benchmarks run, with no call in it: their floor."""
    cycle = Cycle(big_segment.lookup_offsets, LOOKUPS_PER_ROUND)

    def loop() -> int:
        last = -1
        for offset in cycle.next():
            last = offset
        return last

    benchmark.group = "lookup (per call = median / 1,000)"
    assert benchmark(loop) >= 0
    report(benchmark, per_call=LOOKUPS_PER_ROUND, unit="µs/call")


# -- segment append and read ------------------------------------------------


class FreshSegments:
    """A new segment per benchmark round, in one directory; the previous one is deleted.

    Deleting the previous round's segment frees its page-cache pages just before
    the next round writes, so every round runs on recently freed memory (on this
    VM, memory left free for a few seconds is slow to touch again).
    """

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.live: list[LogSegment] = []

    def create(self) -> LogSegment:
        self.clear()
        os.mkdir(self.directory)
        self.live.append(LogSegment.create(self.directory, 0))
        return self.live[0]

    def clear(self) -> None:
        for old in self.live:
            old.delete()
        self.live.clear()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.mark.parametrize("flush", [False, True], ids=["no-fsync", "flush-every-batch"])
def test_segment_append(benchmark: Any, flush: bool, bench_dir: str, values: list[bytes]) -> None:
    """One round: 32 batches of 1,000 records (~3.4 MiB) appended to a segment.

    Setup (untimed) makes a fresh segment and appends its first two batches, so
    the one-off first write into the new offset index (the second batch's entry;
    see test_segment_first_index_entry) stays out of the steady-state figure.
    """
    batches = [
        build_batch(values, base_offset=i * RECORDS_PER_BATCH, timestamp=TIMESTAMP)
        for i in range(APPEND_PRIMING_BATCHES + APPEND_BATCHES_PER_ROUND)
    ]
    priming, timed = batches[:APPEND_PRIMING_BATCHES], batches[APPEND_PRIMING_BATCHES:]
    round_bytes = sum(len(b) for b in timed)
    segments = FreshSegments(os.path.join(bench_dir, f"append-{'flush' if flush else 'noflush'}"))

    def setup() -> tuple[tuple[LogSegment], dict[str, Any]]:
        segment = segments.create()
        for data in priming:
            segment.append(data)
        assert segment.offset_index.entries == 1
        return (segment,), {}

    def append_all(segment: LogSegment) -> int:
        next_offset = 0
        for data in timed:
            next_offset = segment.append(data)
            if flush:
                segment.flush()
        return next_offset

    benchmark.group = "segment append 32 x 1,000 records"
    result = benchmark.pedantic(append_all, setup=setup, rounds=10 if flush else 30, warmup_rounds=1)
    assert result == len(batches) * RECORDS_PER_BATCH
    assert segments.live[0].size == round_bytes + sum(len(b) for b in priming)
    segments.clear()
    report(benchmark, per_call=round_bytes, unit="MB/s", scale=1e-6)
    report(benchmark, per_call=APPEND_BATCHES_PER_ROUND * RECORDS_PER_BATCH, unit="records/s")


def test_segment_first_index_entry(benchmark: Any, bench_dir: str, values: list[bytes]) -> None:
    """The one-off cost: the second append to a fresh segment, which writes its first index entry."""
    first = build_batch(values, base_offset=0, timestamp=TIMESTAMP)
    second = build_batch(values, base_offset=RECORDS_PER_BATCH, timestamp=TIMESTAMP)
    segments = FreshSegments(os.path.join(bench_dir, "first-index-entry"))

    def setup() -> tuple[tuple[LogSegment], dict[str, Any]]:
        segment = segments.create()
        segment.append(first)
        assert segment.offset_index.entries == 0
        return (segment,), {}

    benchmark.group = "segment append 32 x 1,000 records"
    result = benchmark.pedantic(
        lambda segment: segment.append(second), setup=setup, rounds=10, warmup_rounds=1
    )
    assert result == 2 * RECORDS_PER_BATCH and segments.live[0].offset_index.entries == 1
    segments.clear()
    report(benchmark, per_call=1, unit="µs/call")


def test_segment_read_sequential(benchmark: Any, big_segment: SegmentFixture) -> None:
    """One round: segment.read(offset, 1 MiB) from the start to the end (~100 reads)."""
    segment = big_segment.segment
    starts: list[int] = []
    offset = segment.base_offset
    # Each read returns at least one batch, so there are at most as many reads as batches.
    for _ in range(segment.size // lib.LS_BATCH_HEADER_SIZE + 1):
        if offset >= segment.next_offset:
            break
        starts.append(offset)
        read = segment.read(offset, READ_MAX_BYTES)
        assert read is not None
        offset = batches_of(read.view)[-1].next_offset
    assert offset == segment.next_offset
    read_fn = segment.read

    def read_all() -> int:
        total = 0
        for start in starts:
            total += read_fn(start, READ_MAX_BYTES).size  # type: ignore[union-attr]
        return total

    benchmark.group = "segment read sequential 100 MiB"
    assert benchmark(read_all) == segment.size
    benchmark.extra_info["reads_per_round"] = len(starts)
    report(benchmark, per_call=len(starts), unit="µs/call")
    report(benchmark, per_call=segment.size, unit="GB/s", scale=1e-9)

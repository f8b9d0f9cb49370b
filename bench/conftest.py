"""Shared data, segments and rate reporting of the microbenchmarks.

Run with ``make bench`` (or ``.venv/bin/python -m pytest bench -q --benchmark-only``).
pyproject's ``testpaths = ["tests"]`` keeps these out of the normal suite.

Every input is built once per session from a fixed seed, outside the timed
code. Segments live in a temporary directory that is removed at the end of
the session. Each benchmark turns its median into a rate (GB/s, records/s,
µs per call) with :func:`report`; the rates go into ``extra_info`` (and so
into ``--benchmark-json``) and are printed in a table after the run.
"""

from __future__ import annotations

import os
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from logstore.records import build_batch
from logstore.storage import LogSegment

TIMESTAMP = 1_700_000_000_000
RECORDS_PER_BATCH = 1_000
VALUE_SIZE = 100
KEY_SIZE = 10
SEED = 20_261_121
SCAN_BUFFER_BYTES = 64 * 1024 * 1024
SEGMENT_BYTES = 100 * 1024 * 1024
# Batches of 10 records for the segment with a dense index (one entry every
# ~4 batches, ~23k entries: past the 8 KiB warm section of the C lookup).
SMALL_BATCH_RECORDS = 10
SMALL_BATCHES_PER_APPEND = 1_000
LOOKUP_OFFSETS = 1 << 16

# (benchmark name, metric, value) rows, printed after the run.
_RATES: list[tuple[str, str, float]] = []


def report(benchmark: object, *, per_call: float = 0.0, unit: str, scale: float = 1.0) -> float:
    """Record ``per_call / median`` (times ``scale``) as ``unit`` in extra_info.

    ``per_call`` is how much one timed call handles (bytes, records, calls);
    with ``unit`` "µs/call" the figure is the median divided by ``per_call``
    instead. Returns the figure (0.0 when benchmarks are disabled).
    """
    stats = getattr(benchmark, "stats", None)
    if stats is None:  # --benchmark-disable: the function ran once, untimed
        return 0.0
    median = float(stats.stats.median)
    value = median / per_call * 1e6 if unit == "µs/call" else per_call / median * scale
    benchmark.extra_info[unit] = round(value, 4)  # type: ignore[attr-defined]
    benchmark.extra_info["median_s"] = median  # type: ignore[attr-defined]
    _RATES.append((str(benchmark.name), unit, value))  # type: ignore[attr-defined]
    return value


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if not _RATES:
        return
    terminalreporter.section("rates from the medians (extra_info)")
    width = max(len(name) for name, _, _ in _RATES)
    for name, unit, value in sorted(_RATES):
        terminalreporter.write_line(f"{name:<{width}}  {value:>12.3f} {unit}")


def random_values(count: int, size: int, seed: int) -> list[bytes]:
    """``count`` values of ``size`` random bytes (incompressible)."""
    rng = random.Random(seed)
    return [rng.randbytes(size) for _ in range(count)]


def text_values(count: int, size: int, seed: int) -> list[bytes]:
    """``count`` JSON-like values of exactly ``size`` bytes (compressible, ~8:1 with zstd)."""
    rng = random.Random(seed)
    events = [b"view", b"click", b"scroll", b"purchase", b"login", b"logout"]
    result = []
    for i in range(count):
        head = b'{"id":%d,"user":%d,"event":"%s","ts":%d,"page":"/p/' % (
            i,
            rng.randrange(100_000),
            rng.choice(events),
            TIMESTAMP + i,
        )
        result.append((head + b"abcdefghijklmnopqrstuvwxyz" * 8)[: size - 2] + b'"}')
    return result


@pytest.fixture(scope="session")
def values() -> list[bytes]:
    """1,000 random values of 100 bytes."""
    return random_values(RECORDS_PER_BATCH, VALUE_SIZE, SEED)


@pytest.fixture(scope="session")
def compressible_values() -> list[bytes]:
    """1,000 JSON-like values of 100 bytes."""
    return text_values(RECORDS_PER_BATCH, VALUE_SIZE, SEED)


@pytest.fixture(scope="session")
def pairs(values: list[bytes]) -> list[tuple[bytes, bytes]]:
    """1,000 (10-byte key, 100-byte value) pairs."""
    return [(b"key-%06d" % i, value) for i, value in enumerate(values)]


@pytest.fixture(scope="session")
def batch(values: list[bytes]) -> bytes:
    """One uncompressed batch of the 1,000 random values."""
    return build_batch(values, timestamp=TIMESTAMP)


@pytest.fixture(scope="session")
def scan_buffer(values: list[bytes]) -> bytes:
    """~64 MiB of 1,000-record batches with increasing base offsets."""
    size = len(build_batch(values, timestamp=TIMESTAMP))
    count = -(-SCAN_BUFFER_BYTES // size)
    return b"".join(
        build_batch(values, base_offset=i * RECORDS_PER_BATCH, timestamp=TIMESTAMP) for i in range(count)
    )


@pytest.fixture(scope="session")
def bench_dir() -> Iterator[str]:
    """A temporary directory for the session's segments, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="logstore-bench-") as path:
        yield path


@dataclass
class SegmentFixture:
    segment: LogSegment
    lookup_offsets: list[int]  # random offsets inside the segment, pre-generated


def _lookup_offsets(segment: LogSegment, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randrange(segment.base_offset, segment.next_offset) for _ in range(LOOKUP_OFFSETS)]


@pytest.fixture(scope="session")
def big_segment(bench_dir: str, values: list[bytes]) -> Iterator[SegmentFixture]:
    """~100 MiB of 1,000-record batches (~105 KiB each): every batch has an index entry."""
    directory = os.path.join(bench_dir, "big")
    os.mkdir(directory)
    segment = LogSegment.create(directory, 0)
    size = len(build_batch(values, timestamp=TIMESTAMP))
    for _ in range(SEGMENT_BYTES // size + 1):
        segment.append(build_batch(values, base_offset=segment.next_offset, timestamp=TIMESTAMP))
    assert segment.size >= SEGMENT_BYTES
    assert segment.offset_index.entries == segment.size // size - 1
    yield SegmentFixture(segment, _lookup_offsets(segment, SEED + 1))
    segment.close()


@pytest.fixture(scope="session")
def dense_segment(bench_dir: str, values: list[bytes]) -> Iterator[SegmentFixture]:
    """~100 MiB of 10-record batches (~1.1 KiB each): ~23k index entries."""
    directory = os.path.join(bench_dir, "dense")
    os.mkdir(directory)
    segment = LogSegment.create(directory, 0)
    small = values[:SMALL_BATCH_RECORDS]
    chunk_bytes = len(build_batch(small, timestamp=TIMESTAMP)) * SMALL_BATCHES_PER_APPEND
    for _ in range(SEGMENT_BYTES // chunk_bytes + 1):
        base = segment.next_offset
        segment.append(
            b"".join(
                build_batch(small, base_offset=base + i * SMALL_BATCH_RECORDS, timestamp=TIMESTAMP)
                for i in range(SMALL_BATCHES_PER_APPEND)
            )
        )
    assert segment.size >= SEGMENT_BYTES
    assert segment.offset_index.entries > 20_000
    yield SegmentFixture(segment, _lookup_offsets(segment, SEED + 2))
    segment.close()

"""Offset-range planning for Spark, against Spark's Kafka connector's rules."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from logstore.spark.planning import (
    DataLossError,
    OffsetRange,
    micro_batch_ranges,
    rate_limit,
    split_ranges,
)

pytestmark = pytest.mark.unit


def test_ranges_pass_through_without_min_partitions_and_empty_ones_drop() -> None:
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 5, 5)]
    assert split_ranges(ranges) == [OffsetRange("t", 0, 0, 10)]
    assert split_ranges(ranges, min_partitions=1) == [OffsetRange("t", 0, 0, 10)]


def test_min_partitions_splits_in_proportion_to_size() -> None:
    # Spark's KafkaOffsetRangeCalculator example: sizes 100 and 300, minPartitions 4 -> 1 + 3 parts.
    ranges = [OffsetRange("t", 0, 0, 100), OffsetRange("t", 1, 0, 300)]
    pieces = split_ranges(ranges, min_partitions=4)
    assert pieces == [
        OffsetRange("t", 0, 0, 100),
        OffsetRange("t", 1, 0, 100),
        OffsetRange("t", 1, 100, 200),
        OffsetRange("t", 1, 200, 300),
    ]


@given(
    st.lists(st.integers(0, 10_000), min_size=1, max_size=8),
    st.integers(1, 40),
    st.one_of(st.none(), st.integers(1, 5000)),
)
def test_split_covers_every_offset_once(sizes: list[int], minimum: int, most: int | None) -> None:
    ranges = [OffsetRange("t", i, 7, 7 + size) for i, size in enumerate(sizes)]
    pieces = split_ranges(ranges, min_partitions=minimum, max_records=most)
    for i, size in enumerate(sizes):
        mine = sorted((p.start, p.end) for p in pieces if p.partition == i)
        assert sum(e - s for s, e in mine) == size
        assert all(a[1] == b[0] for a, b in itertools.pairwise(mine))  # contiguous, no overlap
        if mine:
            assert (mine[0][0], mine[-1][1]) == (7, 7 + size)
    if most is not None:
        assert all(p.size <= most for p in pieces)
    assert all(p.size > 0 for p in pieces)


def test_rate_limit_shares_by_size_and_never_starves() -> None:
    start = {("t", 0): 0, ("t", 1): 0, ("t", 2): 50}
    latest = {("t", 0): 1000, ("t", 1): 1, ("t", 2): 50}
    ends = rate_limit(start, latest, 100)
    assert ends[("t", 0)] == 99  # floor(100 * 1000 / 1001)
    assert ends[("t", 1)] == 1  # a share below 1 rounds up: never starved
    assert ends[("t", 2)] == 50  # nothing new
    assert rate_limit(start, latest, 10**9) == latest


@given(
    st.dictionaries(st.integers(0, 5), st.tuples(st.integers(0, 1000), st.integers(0, 1000)), min_size=1),
    st.integers(1, 5000),
)
def test_rate_limit_stays_within_start_and_latest(parts: dict[int, tuple[int, int]], limit: int) -> None:
    start = {("t", p): min(a, b) for p, (a, b) in parts.items()}
    latest = {("t", p): max(a, b) for p, (a, b) in parts.items()}
    ends = rate_limit(start, latest, limit)
    assert all(start[tp] <= ends[tp] <= latest[tp] for tp in latest)
    admitted = sum(ends[tp] - start[tp] for tp in latest)
    assert admitted <= limit + len(latest)  # ceil for small shares adds at most one per partition


def test_micro_batch_ranges_and_data_loss() -> None:
    warnings: list[str] = []
    start = {("t", 0): 10, ("t", 1): 5}
    end = {("t", 0): 20, ("t", 1): 8, ("t", 2): 4}
    earliest = {("t", 0): 0, ("t", 1): 0, ("t", 2): 0}
    ranges = micro_batch_ranges(start, end, earliest, fail_on_data_loss=True, warn=warnings.append)
    assert ranges == [OffsetRange("t", 0, 10, 20), OffsetRange("t", 1, 5, 8), OffsetRange("t", 2, 0, 4)]
    # Retention moved partition 0's start past the batch's start.
    with pytest.raises(DataLossError, match=r"t\[0\]: offsets 10 to 14 are gone .*failOnDataLoss"):
        micro_batch_ranges(
            start, end, {**earliest, ("t", 0): 15}, fail_on_data_loss=True, warn=warnings.append
        )
    ranges = micro_batch_ranges(
        start, end, {**earliest, ("t", 0): 15}, fail_on_data_loss=False, warn=warnings.append
    )
    assert ranges[0] == OffsetRange("t", 0, 15, 20) and "skipped" in warnings[-1]
    with pytest.raises(DataLossError, match=r"partitions t\[1\] are gone"):
        micro_batch_ranges(start, {("t", 0): 20}, earliest, fail_on_data_loss=True, warn=warnings.append)
    with pytest.raises(DataLossError, match=r"new partition t\[2\] starts at offset 3"):
        micro_batch_ranges(
            start, end, {**earliest, ("t", 2): 3}, fail_on_data_loss=True, warn=warnings.append
        )
    with pytest.raises(DataLossError, match=r"went from 10 back to 4"):
        micro_batch_ranges(
            start, {**end, ("t", 0): 4}, earliest, fail_on_data_loss=True, warn=warnings.append
        )

"""Offset ranges for Spark: splitting, rate limiting and data-loss checks.

Pure functions over topic-partition -> offset maps (no Spark, no I/O), so
they are tested on their own. They follow Spark's Kafka connector
(``KafkaOffsetRangeCalculator``, ``KafkaMicroBatchStream.rateLimit`` and
``reportDataLoss``), so a query behaves the same with ``format("logstore")``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

TopicPartition = tuple[str, int]
Offsets = dict[TopicPartition, int]

DATA_LOSS_HINT = (
    "Some data may have been lost because it is no longer in the log (removed by retention or "
    "delete_records, or the topic was deleted) before the query read it. If such loss is acceptable, "
    'set the source option "failOnDataLoss" to "false"; the query then skips what is gone.'
)


class DataLossError(RuntimeError):
    """Offsets the query needs are gone and ``failOnDataLoss`` is true (the default)."""


@dataclass(frozen=True, order=True)
class OffsetRange:
    """Offsets ``start <= offset < end`` of one topic-partition: one Spark task's input."""

    topic: str
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        assert 0 <= self.start <= self.end, self

    @property
    def size(self) -> int:
        return self.end - self.start


def split_ranges(
    ranges: list[OffsetRange], min_partitions: int | None = None, max_records: int | None = None
) -> list[OffsetRange]:
    """Empty ranges dropped; then Spark's ``KafkaOffsetRangeCalculator`` split.

    With ``min_partitions`` above the number of ranges, each range gets
    ``max(round(size / total * min_partitions), 1)`` parts; with
    ``max_records``, no part holds more offsets than that. Parts of one
    range are contiguous and as even as integers allow. O(result).
    """
    ranges = [r for r in ranges if r.size > 0]
    if min_partitions is not None and len(ranges) < min_partitions:
        total = sum(r.size for r in ranges)
        ranges = [piece for r in ranges
                  for piece in _divide(r, max(round(r.size / total * min_partitions), 1))]  # fmt: skip
    if max_records is not None:
        ranges = [piece for r in ranges for piece in _divide(r, math.ceil(r.size / max_records))]
    return ranges


def _divide(r: OffsetRange, parts: int) -> list[OffsetRange]:
    parts = max(1, min(parts, r.size))
    bounds = [r.start + (r.size * i) // parts for i in range(parts + 1)]
    return [OffsetRange(r.topic, r.partition, a, b) for a, b in itertools.pairwise(bounds)]


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], limit: int
) -> Offsets:
    """End offsets that admit about ``limit`` offsets in all (Spark's ``rateLimit``).

    Each partition with new data gets its share ``limit * size / total``,
    rounded down, but at least 1 (small partitions are never starved), and
    never past ``latest``. Partitions missing from ``start`` are taken from 0
    by the caller's resolution (pass their start in ``start``). O(partitions).
    """
    sizes = {tp: end - start[tp] for tp, end in latest.items() if tp in start and end - start[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    result: Offsets = {}
    for tp, end in latest.items():
        size = sizes.get(tp)
        if size is None:
            result[tp] = end
            continue
        share = limit * (size / total)
        step = math.ceil(share) if share < 1 else math.floor(share)
        result[tp] = min(end, start[tp] + step)
    return result


def report_data_loss(message: str, fail: bool, warn: Callable[[str], None]) -> None:
    """Raise :class:`DataLossError` when ``fail``, else hand the message to ``warn``."""
    if fail:
        raise DataLossError(f"{message}. {DATA_LOSS_HINT}")
    warn(f"{message}; skipped (failOnDataLoss=false)")


def micro_batch_ranges(
    start: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    *,
    fail_on_data_loss: bool,
    warn: Callable[[str], None],
) -> list[OffsetRange]:
    """The ranges of one micro-batch from ``start`` to ``end`` (Spark's planInputPartitions).

    A partition new in ``end`` starts at its earliest offset (and should be
    0: anything else is reported as loss). A partition in ``start`` but not
    ``end`` is gone; an end below its start, or a start below the log's
    earliest offset (retention), is loss. Loss raises or is skipped per
    ``fail_on_data_loss``. O(partitions).
    """
    gone = sorted(set(start) - set(end))
    if gone:
        names = ", ".join(f"{t}[{p}]" for t, p in gone)
        report_data_loss(f"partitions {names} are gone", fail_on_data_loss, warn)
    ranges: list[OffsetRange] = []
    for tp, until in sorted(end.items()):
        first = earliest.get(tp, 0)
        if tp in start:
            begin = start[tp]
        else:
            begin = first
            if first != 0:
                report_data_loss(f"new partition {tp[0]}[{tp[1]}] starts at offset {first} instead of 0",
                                 fail_on_data_loss, warn)  # fmt: skip
        if until < begin:
            report_data_loss(f"{tp[0]}[{tp[1]}]'s offset went from {begin} back to {until}",
                             fail_on_data_loss, warn)  # fmt: skip
            continue
        if begin < first:
            report_data_loss(f"{tp[0]}[{tp[1]}]: offsets {begin} to {min(first, until) - 1} are gone "
                             f"(the log starts at {first})", fail_on_data_loss, warn)  # fmt: skip
            begin = min(first, until)
        ranges.append(OffsetRange(tp[0], tp[1], begin, until))
    return ranges

"""Where the data source's offsets and rows come from: a broker, or a data directory.

The driver asks a :class:`Backend` which partitions a subscription covers
and their earliest / latest offsets; executors read one
:class:`~logstore.spark.planning.OffsetRange` with :func:`read_range`,
which yields Arrow record batches decoded in C (no per-row Python).

- :class:`BrokerBackend`: logstore's client (Metadata, ListOffsets, Fetch).
- :class:`FilesBackend`: ``path``, a logstore data directory read straight
  from its segment files (:mod:`logstore.storage.partition_files`): no broker, no
  lock, nothing written, so a live broker may own the directory meanwhile.

:class:`Where` says which; it is small and picklable, so each task carries
it to its executor.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from logstore.errors import LogstoreError, OffsetGoneError
from logstore.spark.options import Subscription
from logstore.spark.planning import DATA_LOSS_HINT, DataLossError, OffsetRange, TopicPartition

if TYPE_CHECKING:
    import pyarrow as pa

READ_BYTES = 8 << 20
"""Bytes of record batches read (and decoded into one Arrow batch) at a time: a Spark task's
Arrow batches are about this big."""


@dataclass(frozen=True)
class Where:
    """A data directory (``path``) or a broker (``client``: logstore client settings)."""

    path: str | None = None
    client: dict[str, str] = field(default_factory=dict)

    @property
    def source(self) -> str | dict[str, str]:
        """What :mod:`logstore.arrow` reads: the directory, or the client settings."""
        return self.path if self.path else dict(self.client)


class Backend(Protocol):
    """The driver's questions about the data."""

    def partitions(self, subscription: Subscription) -> list[TopicPartition]: ...

    def bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]: ...

    def offsets_for_times(self, times: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]: ...

    def partition_counts(self, topics: Iterable[str] | None, create: bool = False) -> dict[str, int]: ...

    def close(self) -> None: ...


def _select(subscription: Subscription, counts: dict[str, int]) -> list[TopicPartition]:
    """The partitions ``subscription`` reads among topics with ``counts`` partitions (assign: as named)."""
    if subscription.assigned:
        return [tp for tp in subscription.assigned if tp[0] in counts and tp[1] < counts[tp[0]]]
    names = sorted(t for t in counts if subscription.matches(t) and not t.startswith("__"))
    return [(t, p) for t in names for p in range(counts[t])]


class FilesBackend:
    """A data directory's topics and offsets, from its files (re-read on every call)."""

    def __init__(self, path: str) -> None:
        from logstore.storage.partition_files import list_topics

        self.path = path
        list_topics(path)  # fail now if it is not a logstore data directory

    def partition_counts(self, topics: Iterable[str] | None = None, create: bool = False) -> dict[str, int]:
        """Topics and their partition counts (``create`` is ignored: a directory is only read here)."""
        from logstore.storage.partition_files import list_topics

        counts = list_topics(self.path)
        return counts if topics is None else {t: counts[t] for t in topics if t in counts}

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        return _select(subscription, self.partition_counts())

    def bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        from logstore.storage.partition_files import PartitionFiles

        result = {}
        for topic, partition in partitions:
            files = PartitionFiles(self.path, topic, partition)
            try:
                result[(topic, partition)] = (files.log_start_offset, files.end_offset())
            finally:
                files.close()
        return result

    def offsets_for_times(self, times: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        from logstore.storage.partition_files import PartitionFiles

        result: dict[TopicPartition, int | None] = {}
        for (topic, partition), timestamp in times.items():
            files = PartitionFiles(self.path, topic, partition)
            try:
                result[(topic, partition)] = files.offset_for_timestamp(timestamp)
            finally:
                files.close()
        return result

    def close(self) -> None:
        pass


class BrokerBackend:
    """A broker's (or cluster's) topics and offsets, through logstore's client."""

    def __init__(self, client: dict[str, str]) -> None:
        from logstore.client.ranges import RangeReader

        self.reader = RangeReader(dict(client))

    def partition_counts(self, topics: Iterable[str] | None = None, create: bool = False) -> dict[str, int]:
        """Topics and their partition counts; ``create``: ask the broker to auto-create missing ones."""
        names = None if topics is None else sorted(set(topics))
        if create and names:
            self.reader.cluster.refresh(names, auto_create=True)
        return self.reader.partition_counts(names)

    def partitions(self, subscription: Subscription) -> list[TopicPartition]:
        return _select(subscription, self.partition_counts())

    def bounds(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, tuple[int, int]]:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in partitions:
            by_topic.setdefault(topic, []).append(partition)
        result = {}
        for topic, numbers in by_topic.items():
            for partition, pair in self.reader.offsets(topic, numbers).items():
                result[(topic, partition)] = pair
        return result

    def offsets_for_times(self, times: dict[TopicPartition, int]) -> dict[TopicPartition, int | None]:
        return dict(self.reader.offsets_for_times(times))

    def close(self) -> None:
        self.reader.close()


def backend_for(where: Where) -> Backend:
    return FilesBackend(where.path) if where.path else BrokerBackend(where.client)


def read_range(
    where: Where, piece: OffsetRange, *, include_headers: bool, fail_on_data_loss: bool
) -> Iterator[pa.RecordBatch]:
    """The rows of ``piece`` as Arrow record batches of up to ~``READ_BYTES`` of records each.

    Offsets below the log's start (removed since the driver planned) are
    data loss: raised (with Spark's hint), or skipped when
    ``fail_on_data_loss`` is false. See :func:`logstore.arrow.read_range`.
    """
    from logstore.arrow import read_range as arrow_range

    if piece.size <= 0:
        return
    try:
        yield from arrow_range(where.source, piece.topic, piece.partition, piece.start, piece.end,
                               include_headers=include_headers, fail_on_data_loss=fail_on_data_loss,
                               read_bytes=READ_BYTES)  # fmt: skip
    except (OffsetGoneError, LogstoreError) as e:
        if not fail_on_data_loss or not _is_loss(e):
            raise
        raise DataLossError(f"{e}. {DATA_LOSS_HINT}") from None


def _is_loss(error: Exception) -> bool:
    return isinstance(error, OffsetGoneError) or "the log ends at offset" in str(error)


def record_sets(where: Where, piece: OffsetRange, *, fail_on_data_loss: bool) -> Iterator[tuple[Any, int]]:
    """Raw record sets (whole batches) covering ``piece``, each with the offset it was read at."""
    from logstore.arrow import record_sets as arrow_sets

    if piece.size <= 0:
        return iter(())
    return arrow_sets(where.source, piece.topic, piece.partition, piece.start, piece.end,
                      fail_on_data_loss=fail_on_data_loss)  # fmt: skip

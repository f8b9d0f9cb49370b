"""The ``logstore`` PySpark data source: batch and streaming reads and writes.

Spark's Kafka connector is the contract (schema, option names, offsets
JSON, failOnDataLoss), so a pipeline swaps ``format("kafka")`` for
``format("logstore")``. See docs/spark.md.

- Reads: the driver plans one task per topic-partition offset range
  (:mod:`logstore.spark.planning`); each task reads its range with
  :func:`logstore.spark.backend.read_range` and hands Spark Arrow record
  batches decoded in C. Streaming offsets are Kafka's JSON
  (``{"topic": {"0": 42}}``), checkpointed by Spark.
- Writes: :mod:`logstore.spark.sink` (batch: executors produce; streaming:
  exactly once, by batch id).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)
from pyspark.sql.types import StructType

from logstore.spark.backend import Backend, Where, backend_for, read_range
from logstore.spark.options import (
    EARLIEST,
    LATEST,
    OptionError,
    SourceOptions,
    format_offsets,
    parse_source_options,
    read_offsets,
)
from logstore.spark.planning import (
    OffsetRange,
    Offsets,
    TopicPartition,
    micro_batch_ranges,
    rate_limit,
    split_ranges,
)

log = logging.getLogger("logstore.spark")

SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
    "timestampType int"
)
HEADERS_SCHEMA = SCHEMA + ", headers array<struct<key: string, value: binary>>"


class RangePartition(InputPartition):
    """One task's input: an offset range, where it lives and how to read it (pickled to the executor)."""

    def __init__(
        self, piece: OffsetRange, where: Where, include_headers: bool, fail_on_data_loss: bool
    ) -> None:
        super().__init__(piece)
        self.piece = piece
        self.where = where
        self.include_headers = include_headers
        self.fail_on_data_loss = fail_on_data_loss


def _read(partition: InputPartition) -> Iterator[pa.RecordBatch]:
    assert isinstance(partition, RangePartition), partition
    yield from read_range(partition.where, partition.piece, include_headers=partition.include_headers,
                          fail_on_data_loss=partition.fail_on_data_loss)  # fmt: skip


def _where(options: SourceOptions) -> Where:
    return Where(path=options.path, client=dict(options.client))


def _flatten(offsets: dict[str, dict[int, int]]) -> Offsets:
    return {(t, p): o for t, parts in offsets.items() for p, o in parts.items()}


def _nest(offsets: Offsets) -> dict[str, dict[int, int]]:
    nested: dict[str, dict[int, int]] = {}
    for (t, p), o in offsets.items():
        nested.setdefault(t, {})[p] = o
    return nested


class OffsetResolver:
    """Turns the starting / ending options into offsets, on the driver (Spark's KafkaOffsetReader)."""

    def __init__(self, options: SourceOptions, backend: Backend) -> None:
        self.options = options
        self.backend = backend

    def partitions(self) -> list[TopicPartition]:
        found = self.backend.partitions(self.options.subscription)
        if self.options.subscription.assigned:
            missing = sorted(set(self.options.subscription.assigned) - set(found))
            if missing:
                names = ", ".join(f"{t}[{p}]" for t, p in missing)
                raise OptionError(f"assign names partitions that do not exist: {names}")
        return found

    def resolve(self, spec: str | dict[str, dict[int, int]], partitions: list[TopicPartition], name: str,
                bounds: dict[TopicPartition, tuple[int, int]]) -> Offsets:  # fmt: skip
        """``earliest`` / ``latest`` / offsets JSON (with -2 / -1) as numbers for ``partitions``."""
        if isinstance(spec, str):
            column = 0 if spec == "earliest" else 1
            return {tp: bounds[tp][column] for tp in partitions}
        given = _flatten(spec)
        if not self.options.subscription.assigned:
            missing = sorted(set(partitions) - set(given))
            if missing:
                names = ", ".join(f"{t}[{p}]" for t, p in missing)
                raise OptionError(f"{name} gives offsets for some partitions but not {names}: name every "
                                  f"partition (-2 for earliest, -1 for latest)")  # fmt: skip
        unknown = sorted(set(given) - set(partitions))
        if unknown:
            names = ", ".join(f"{t}[{p}]" for t, p in unknown)
            raise OptionError(f"{name} names partitions the query does not read: {names}")
        result = {}
        for tp in partitions:
            offset = given.get(tp, EARLIEST)
            low, high = bounds[tp]
            result[tp] = low if offset == EARLIEST else high if offset == LATEST else offset
        return result

    def by_time(self, partitions: list[TopicPartition], bounds: dict[TopicPartition, tuple[int, int]], *,
                ending: bool) -> Offsets | None:  # fmt: skip
        """Offsets from startingOffsetsByTimestamp / startingTimestamp (or the ending ones), else None."""
        per = self.options.ending_by_timestamp if ending else self.options.starting_by_timestamp
        every = self.options.ending_timestamp if ending else self.options.starting_timestamp
        if per is not None:
            times = _flatten(per)
            missing = sorted(set(partitions) - set(times))
            if missing:
                names = ", ".join(f"{t}[{p}]" for t, p in missing)
                kind = "ending" if ending else "starting"
                raise OptionError(f"{kind}OffsetsByTimestamp has no timestamp for {names}")
        elif every is not None:
            times = dict.fromkeys(partitions, every)
        else:
            return None
        found = self.backend.offsets_for_times({tp: times[tp] for tp in partitions})
        result = {}
        for tp in partitions:
            offset = found.get(tp)
            if offset is None:
                if not ending and self.options.timestamp_strategy == "error":
                    raise OptionError(f"no record of {tp[0]}[{tp[1]}] has a timestamp at or after {times[tp]}; "
                                      f"set startingOffsetsByTimestampStrategy=latest to start at the end "
                                      f"instead")  # fmt: skip
                offset = bounds[tp][1]
            result[tp] = offset
        return result

    def starting(
        self, partitions: list[TopicPartition], bounds: dict[TopicPartition, tuple[int, int]]
    ) -> Offsets:
        timed = self.by_time(partitions, bounds, ending=False)
        if timed is not None:
            return timed
        return self.resolve(self.options.starting, partitions, "startingOffsets", bounds)

    def ending(
        self, partitions: list[TopicPartition], bounds: dict[TopicPartition, tuple[int, int]]
    ) -> Offsets:
        timed = self.by_time(partitions, bounds, ending=True)
        if timed is not None:
            return timed
        return self.resolve(self.options.ending, partitions, "endingOffsets", bounds)


class LogstoreBatchReader(DataSourceReader):
    """``spark.read``: one task per topic-partition range (more with minPartitions)."""

    def __init__(self, options: SourceOptions) -> None:
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        backend = backend_for(_where(options))
        try:
            resolver = OffsetResolver(options, backend)
            tps = resolver.partitions()
            bounds = backend.bounds(tps)
            start = resolver.starting(tps, bounds)
            end = resolver.ending(tps, bounds)
        finally:
            backend.close()
        ranges = []
        for tp in tps:
            first, until = start[tp], end[tp]
            if until < first:
                raise OptionError(f"{tp[0]}[{tp[1]}]: the ending offset {until} is before the starting "
                                  f"offset {first}")  # fmt: skip
            ranges.append(OffsetRange(tp[0], tp[1], first, until))
        pieces = split_ranges(ranges, options.min_partitions, options.max_records_per_partition)
        where = _where(options)
        return [RangePartition(p, where, options.include_headers, options.fail_on_data_loss) for p in pieces]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)


class LogstoreStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """``spark.readStream``: micro-batches over Kafka-JSON offsets, admission by maxOffsetsPerTrigger.

    Offsets dicts are ``{"topic": {"0": 42}}``: Spark checkpoints them, so a
    restarted query resumes exactly where its last committed batch ended.
    Partitions that appear later are read from their beginning; loss (a
    start below the log's start, partitions gone, offsets moving back) fails
    the query or is skipped per ``failOnDataLoss``.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._backend: Backend | None = None
        self._until: Offsets | None = None  # Trigger.AvailableNow: the end fixed at the query's start

    @property
    def backend(self) -> Backend:
        if self._backend is None:
            self._backend = backend_for(_where(self.options))
        return self._backend

    def _resolver(self) -> OffsetResolver:
        return OffsetResolver(self.options, self.backend)

    def initialOffset(self) -> dict:
        resolver = self._resolver()
        tps = resolver.partitions()
        bounds = self.backend.bounds(tps)
        return format_offsets(_nest(resolver.starting(tps, bounds)))

    def _latest(self) -> tuple[Offsets, dict[TopicPartition, tuple[int, int]]]:
        tps = self._resolver().partitions()
        bounds = self.backend.bounds(tps)
        return {tp: bounds[tp][1] for tp in tps}, bounds

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        latest, bounds = self._latest()
        if self._until is not None:
            latest = {tp: min(o, self._until.get(tp, bounds[tp][0])) for tp, o in latest.items()}
        begin = _flatten(read_offsets(start))
        # New partitions count from their earliest offset; vanished ones drop out here and are
        # reported when the batch is planned.
        for tp, (low, _) in bounds.items():
            begin.setdefault(tp, low)
        if isinstance(limit, ReadMaxRows):
            latest = rate_limit(begin, latest, int(limit.max_rows))
        return format_offsets(_nest(latest))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.options.max_offsets_per_trigger)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict | None:
        return format_offsets(_nest(self._latest()[0]))

    def prepareForTriggerAvailableNow(self) -> None:
        self._until = self._latest()[0]

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, until = _flatten(read_offsets(start)), _flatten(read_offsets(end))
        if begin == until:
            return []
        tps = sorted(set(until) | set(begin))
        bounds = self.backend.bounds([tp for tp in tps if tp in self._known()])
        earliest = {tp: pair[0] for tp, pair in bounds.items()}
        ranges = micro_batch_ranges(begin, until, earliest, fail_on_data_loss=self.options.fail_on_data_loss,
                                    warn=log.warning)  # fmt: skip
        pieces = split_ranges(ranges, self.options.min_partitions, self.options.max_records_per_partition)
        where = _where(self.options)
        return [RangePartition(p, where, self.options.include_headers, self.options.fail_on_data_loss)
                for p in pieces]  # fmt: skip

    def _known(self) -> set[TopicPartition]:
        counts = self.backend.partition_counts(None)
        return {(t, p) for t, n in counts.items() for p in range(n)}

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return _read(partition)

    def commit(self, end: dict) -> None:
        """Nothing to do: offsets live in Spark's checkpoint (as with Spark's Kafka source)."""

    def stop(self) -> None:
        if self._backend is not None:
            self._backend.close()
            self._backend = None


class LogstoreDataSource(DataSource):
    """``format("logstore")``: Spark's Kafka connector over a logstore broker, cluster or data directory."""

    @classmethod
    def name(cls) -> str:
        return "logstore"

    def schema(self) -> str:
        # Spark asks for the schema when the DataFrame is made: check the options now, before any job.
        options = parse_source_options(self.options, streaming=None)
        return HEADERS_SCHEMA if options.include_headers else SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return LogstoreBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return LogstoreStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        from logstore.spark.sink import LogstoreBatchWriter

        return LogstoreBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        from logstore.spark.sink import LogstoreStreamWriter

        return LogstoreStreamWriter(self.options, schema)


def options_of(source: Any) -> dict[str, str]:
    """The options a DataSource was given (for tests and messages)."""
    return dict(source.options)

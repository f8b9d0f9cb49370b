"""A topic to a ``pyarrow.Table``, without Spark: :func:`read_table` and :func:`read_batches`.

The rows have Spark's Kafka source schema (:func:`logstore.records.arrow.kafka_schema`):
``key``, ``value`` (binary), ``topic``, ``partition``, ``offset``, ``timestamp``
(``timestamp[us, UTC]``), ``timestampType`` and, with ``include_headers``,
``headers`` (list of struct<key string, value binary>). They come from
either source with no per-record Python: record bytes are read whole
(segment files or Fetch answers) and decoded in C straight into Arrow
buffers (:func:`~logstore.records.arrow.decode_arrow`).

``source`` is one of:

- a data directory path (or ``"embedded:///path"``): read from its segment
  files (:class:`~logstore.storage.partition_files.PartitionFiles`), with no broker,
  no lock and nothing written, so a live broker may own the directory;
- a client config dict with ``bootstrap.servers``: read from the brokers
  (:class:`~logstore.client.ranges.RangeReader`: ListOffsets, then Fetch,
  one request ahead of the decoder).

:func:`read_table` decodes partitions on several threads (one per CPU by
default), each with its own files or connection, each partition into one
set of columns (:class:`~logstore.records.arrow.ArrowDecoder`).

Ranges: per partition, ``start <= offset < end``, each given as
``"earliest"`` / ``"latest"``, one offset for every partition, or a dict
partition -> offset (missing partitions: earliest / latest; -2 and -1 mean
earliest and latest, as in Spark's offsets JSON). Bounds are looked up once,
before the first row, so a table is a snapshot even while producers write.

Examples (not doctests: they need data)::

    import logstore.arrow

    table = logstore.arrow.read_table("/var/lib/logstore", "orders")            # a data directory
    table = logstore.arrow.read_table({"bootstrap.servers": "127.0.0.1:9092"},  # a broker
                                      "orders", start={0: 1000}, include_headers=True)

    frame = table.to_pandas()                                   # pandas
    import polars as pl; frame = pl.from_arrow(table)           # polars
    import duckdb; duckdb.sql("select partition, count(*) from table group by 1").show()  # duckdb

    for batch in logstore.arrow.read_batches("/var/lib/logstore", "orders"):   # bounded memory
        handle(batch)   # a pyarrow.RecordBatch of up to ~8 MiB of records

Errors: offsets below a partition's log start (removed by retention or
delete_records) raise :class:`~logstore.errors.OffsetGoneError`
unless ``fail_on_data_loss=False``, which skips to the log start (Spark's
``failOnDataLoss``); an ``end`` past the partition's end raises
:class:`~logstore.errors.InvalidArgumentError`.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import pyarrow as pa

from logstore.errors import InvalidArgumentError, LogstoreError, UnknownTopicError
from logstore.records.arrow import ArrowDecoder, decode_arrow, kafka_schema
from logstore.records.batch import HEADER_SIZE, scan

__all__ = [
    "READ_BYTES",
    "TABLE_READ_BYTES",
    "THREADS_MAX",
    "read_batches",
    "read_range",
    "read_table",
    "record_sets",
]

READ_BYTES = 8 << 20
"""Record bytes read (and decoded into one Arrow batch) at a time, per partition."""
TABLE_READ_BYTES = 2 << 20
"""Record bytes :func:`read_table` reads from a partition's active segment at a time (into one
buffer reused per thread; Fetch answers are ``max.partition.fetch.bytes``)."""
THREADS_MAX = 8
"""The most threads :func:`read_table` decodes partitions on by default."""
EARLIEST = -2
LATEST = -1
_EMBEDDED = "embedded://"

_log = logging.getLogger("logstore.arrow")

Source = str | os.PathLike[str] | Mapping[str, Any]
Bound = int | Mapping[int, int] | str


def read_table(
    source: Source,
    topic: str,
    partitions: Iterable[int] | None = None,
    *,
    start: Bound = "earliest",
    end: Bound = "latest",
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    threads: int | None = None,
) -> pa.Table:
    """The records of ``topic`` (``partitions``: all when None) in ``[start, end)`` as one table.

    Rows are in partition order, then offset order; one chunk per partition
    (more only past 2 GiB of keys or values). ``threads``: partitions decoded
    at once, each thread with its own files or broker connection (default:
    one per CPU, at most ``THREADS_MAX``; 1: all on the calling thread).
    Memory: the whole table; each column of a partition is reserved once, at
    an upper bound (its offsets; the bytes of its segments), in an anonymous
    mapping that costs only the pages written, then cut to its length
    (:class:`~logstore.records.arrow.ArrowDecoder`). Cost: one C pass over
    the record bytes; no per-record Python. See the module for ``source``
    and bounds; :func:`read_batches` streams in bounded memory instead.
    """
    if threads is not None and threads < 1:
        raise InvalidArgumentError(f"threads must be >= 1 (or None: one per CPU), not {threads}")
    reader = _open(source)
    try:
        numbers = reader.partitions(topic, None if partitions is None else list(partitions))
        bounds = reader.bounds(topic, numbers)
        ranges = [(p, *_resolve(topic, p, start, end, bounds[p])) for p in numbers]
        wanted = threads if threads is not None else min(os.cpu_count() or 1, THREADS_MAX)
        chunks = _decode_ranges(
            source, reader, topic, ranges, include_headers, fail_on_data_loss, wanted
        )  # fmt: skip
    finally:
        reader.close()
    batches = [batch for partition in chunks for batch in partition]
    return pa.Table.from_batches(batches, schema=kafka_schema(include_headers))


def read_batches(
    source: Source,
    topic: str,
    partitions: Iterable[int] | None = None,
    *,
    start: Bound = "earliest",
    end: Bound = "latest",
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    read_bytes: int = READ_BYTES,
) -> Iterator[pa.RecordBatch]:
    """:func:`read_table`'s rows as a stream of record batches (never empty ones).

    Memory is bounded by ``read_bytes`` of record bytes and the batch they
    decode to (plus one Fetch answer in flight from a broker; ``read_bytes``
    is also the Fetch size unless the config gives ``max.partition.fetch.bytes``). The bounds of
    every partition are looked up before the first batch is yielded.
    Closing the generator releases the files or connections.
    """
    if read_bytes < 1:
        raise InvalidArgumentError(f"read_bytes must be >= 1, not {read_bytes}")
    reader = _open(source)
    try:
        numbers = reader.partitions(topic, None if partitions is None else list(partitions))
        bounds = reader.bounds(topic, numbers)
        ranges = [(p, *_resolve(topic, p, start, end, bounds[p])) for p in numbers]
        for partition, low, high in ranges:
            yield from _decoded(
                reader, topic, partition, low, high, include_headers, fail_on_data_loss, read_bytes
            )
    finally:
        reader.close()


def read_range(
    source: Source,
    topic: str,
    partition: int,
    low: int,
    high: int,
    *,
    include_headers: bool = False,
    fail_on_data_loss: bool = True,
    read_bytes: int = READ_BYTES,
) -> Iterator[pa.RecordBatch]:
    """The rows of offsets ``[low, high)`` of one partition, with no bounds lookup (the caller
    planned the range: Spark's tasks). Loss as in :func:`read_batches`."""
    reader = _open(source)
    try:
        yield from _decoded(
            reader, topic, partition, low, high, include_headers, fail_on_data_loss, read_bytes
        )
    finally:
        reader.close()


def record_sets(
    source: Source,
    topic: str,
    partition: int,
    low: int,
    high: int,
    *,
    fail_on_data_loss: bool = True,
    read_bytes: int = READ_BYTES,
) -> Iterator[tuple[Any, int]]:
    """The raw record sets (whole batches) covering ``[low, high)``, each with the offset it was
    read at; a set is only valid until the next one is taken (buffers are reused)."""
    reader = _open(source)
    try:
        yield from reader.record_sets(topic, partition, low, high, fail_on_data_loss, read_bytes)
    finally:
        reader.close()


# -- bounds ---------------------------------------------------------------------------


def _bound(value: Bound, partition: int, side: str, default: int) -> int:
    """The offset (or EARLIEST / LATEST) that ``value`` gives ``partition``."""
    if isinstance(value, str):
        named = {"earliest": EARLIEST, "latest": LATEST}.get(value.strip().lower())
        if named is None:
            raise InvalidArgumentError(
                f"{side} must be 'earliest', 'latest', an offset or a dict, not {value!r}"
            )
        return named
    if isinstance(value, Mapping):
        return int(value.get(partition, default))
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidArgumentError(f"{side} must be 'earliest', 'latest', an offset or a dict, not {value!r}")
    return value


def _resolve(
    topic: str, partition: int, start: Bound, end: Bound, bounds: tuple[int, int]
) -> tuple[int, int]:
    """[low, high) of one partition from the user's bounds and the partition's (earliest, latest)."""
    earliest, latest = bounds
    named = {EARLIEST: earliest, LATEST: latest}
    low, high = _bound(start, partition, "start", EARLIEST), _bound(end, partition, "end", LATEST)
    low, high = named.get(low, low), named.get(high, high)
    if low < 0 or high < 0:
        raise InvalidArgumentError(
            f"{topic}[{partition}]: offsets must be >= 0 (or -2 earliest, -1 latest), not start={low}, end={high}"
        )
    if high > latest:
        raise InvalidArgumentError(
            f"{topic}[{partition}]: end offset {high} is past the partition's end {latest}; "
            "use end='latest' or an offset at most that"
        )
    if low > high:
        raise InvalidArgumentError(f"{topic}[{partition}]: start offset {low} is after the end offset {high}")
    return low, high


# -- decoding -------------------------------------------------------------------------


def _decoded(
    reader: _Reader,
    topic: str,
    partition: int,
    low: int,
    high: int,
    headers: bool,
    fail: bool,
    read_bytes: int,
) -> Iterator[pa.RecordBatch]:
    """Arrow batches of ``[low, high)`` of one partition from the reader's record sets."""
    for records, offset in reader.record_sets(topic, partition, low, high, fail, read_bytes):
        # A set decodes in one call, unless a column would pass 2 GiB: then the decoder
        # stops at a batch boundary and says where to go on. Each pass advances.
        whole_end = int(scan(records, 0).offset_last) + 1
        for _ in range(len(records) // HEADER_SIZE + 1):
            rows, after = decode_arrow(records, topic, partition, offset, high, include_headers=headers)
            if rows.num_rows:
                yield rows
            if after >= min(whole_end, high) or after <= offset:
                break
            offset = after


def _decode_ranges(
    source: Source,
    first: _Reader,
    topic: str,
    ranges: list[tuple[int, int, int]],
    headers: bool,
    fail: bool,
    threads: int,
) -> list[list[pa.RecordBatch]]:
    """Each (partition, low, high)'s rows, in order, decoded on up to ``threads`` threads.

    The calling thread works with ``first``; each other thread opens a reader
    of its own (files or connections are not shared between threads) and the
    threads take the next range as they finish one. The first error stops
    the handing out and is raised once every thread has stopped.
    """
    results: list[list[pa.RecordBatch]] = [[] for _ in ranges]
    todo = [i for i, (_, low, high) in enumerate(ranges) if low < high]
    todo.reverse()  # popped from the end: partition order
    lock = threading.Lock()
    failed = threading.Event()

    def work(reader: _Reader) -> None:
        # Each pass takes one range off the list; the list only shrinks.
        for _ in range(len(ranges)):
            with lock:
                if not todo or failed.is_set():
                    return
                i = todo.pop()
            try:
                results[i] = _decode_whole(reader, topic, *ranges[i], headers, fail)
            except BaseException:
                failed.set()
                raise

    def own_reader() -> None:
        reader = _open(source)
        try:
            work(reader)
        finally:
            reader.close()

    helpers = min(threads, len(todo)) - 1
    if helpers <= 0:
        work(first)
        return results
    with ThreadPoolExecutor(helpers, thread_name_prefix="logstore-read-table") as pool:
        futures = [pool.submit(own_reader) for _ in range(helpers)]
        try:
            work(first)
        finally:
            errors = [f.exception() for f in futures]  # waits for every helper
    for error in errors:
        if error is not None:
            raise error
    return results


def _decode_whole(
    reader: _Reader, topic: str, partition: int, low: int, high: int, headers: bool, fail: bool
) -> list[pa.RecordBatch]:
    """The rows of ``[low, high)`` of one partition, in one set of columns (see ArrowDecoder)."""
    decoder = ArrowDecoder(
        topic, partition, low, high, rows=high - low, data=reader.data_bound(topic, partition, low),
        include_headers=headers,
    )  # fmt: skip
    for records, offset in reader.record_sets(topic, partition, low, high, fail, TABLE_READ_BYTES):
        decoder.add(records, offset)
    return decoder.finish()


class _Reader(Protocol):
    """What read_batches needs of a source: partitions, bounds, record sets, close."""

    def partitions(self, topic: str, wanted: list[int] | None) -> list[int]: ...

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]: ...

    def record_sets(
        self, topic: str, partition: int, low: int, high: int, fail: bool, read_bytes: int
    ) -> Iterator[tuple[Any, int]]: ...

    def data_bound(self, topic: str, partition: int, low: int) -> int | None: ...

    def close(self) -> None: ...


def _open(source: Source) -> _Reader:
    """The reader ``source`` names (see the module)."""
    if isinstance(source, Mapping):
        servers = source.get("bootstrap.servers")
        store = source.get("logstore.store")
        if store is not None:
            return _FilesReader(store.data_dir)
        if isinstance(servers, str) and servers.startswith(_EMBEDDED):
            return _FilesReader(_embedded_path(servers))
        return _BrokerReader(source)
    path = os.fspath(source)
    if not isinstance(path, str):
        raise InvalidArgumentError(
            f"source must be a data directory path or a client config dict, not {source!r}"
        )
    return _FilesReader(_embedded_path(path) if path.startswith(_EMBEDDED) else path)


def _embedded_path(servers: str) -> str:
    """The directory of ``embedded:///path`` (as ``logstore.embedded`` reads it)."""
    path = servers[len(_EMBEDDED) :]
    if not path:
        raise InvalidArgumentError(
            f"an embedded address is 'embedded:///absolute/path/to/data', not {servers!r}"
        )
    return os.path.abspath(path)


def _checked_partitions(topic: str, count: int | None, wanted: list[int] | None, where: str) -> list[int]:
    if count is None:
        raise UnknownTopicError(f"topic {topic!r} does not exist in {where}")
    if wanted is None:
        return list(range(count))
    missing = [p for p in wanted if not 0 <= p < count]
    if missing:
        raise UnknownTopicError(f"topic {topic!r} has partitions 0 to {count - 1} in {where}, not {missing}")
    return list(dict.fromkeys(wanted))


class _FilesReader:
    """Record sets from a data directory's segment files (zero-copy for sealed segments)."""

    def __init__(self, path: str) -> None:
        from logstore.storage.partition_files import list_topics

        self.path = path
        list_topics(path)  # not a data directory: a clear error now

    def partitions(self, topic: str, wanted: list[int] | None) -> list[int]:
        from logstore.storage.partition_files import list_topics

        return _checked_partitions(topic, list_topics(self.path).get(topic), wanted, self.path)

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        from logstore.storage.partition_files import PartitionFiles

        result = {}
        for partition in partitions:
            with PartitionFiles(self.path, topic, partition) as files:
                end = files.end_offset()
                result[partition] = (min(files.log_start_offset, end), end)
        return result

    def data_bound(self, topic: str, partition: int, low: int) -> int | None:
        from logstore.storage.partition_files import PartitionFiles

        with PartitionFiles(self.path, topic, partition) as files:
            return int(files.bytes_from(low))

    def record_sets(
        self, topic: str, partition: int, low: int, high: int, fail: bool, read_bytes: int
    ) -> Iterator[tuple[Any, int]]:
        from logstore.errors import OffsetGoneError
        from logstore.storage.partition_files import PartitionFiles

        with PartitionFiles(self.path, topic, partition) as files:
            offset = low
            # Each pass moves offset past at least one batch, or ends.
            while offset < high:
                try:
                    view = files.read(offset, read_bytes, scratch=True)  # decoded before the next read
                except OffsetGoneError as e:
                    offset = _lost(e, fail, high)
                    continue
                if view is None:
                    _ended(topic, partition, offset, high, fail)
                    return
                after = int(scan(view, 0).offset_last) + 1
                yield view, offset
                if after <= offset:
                    raise LogstoreError(
                        f"{files.path}: the read at offset {offset} did not advance; the log is damaged"
                    )
                offset = after

    def close(self) -> None:
        pass


class _BrokerReader:
    """Record sets from the brokers, through :class:`~logstore.client.ranges.RangeReader`."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        from logstore.client.ranges import RangeReader

        self.reader = RangeReader(dict(config))
        self._given = "max.partition.fetch.bytes" in self.reader.config.given

    def fetch_bytes(self, read_bytes: int) -> int | None:
        """Record bytes per Fetch: ``max.partition.fetch.bytes`` when the config gives it, else
        ``read_bytes`` (read_table's 2 MiB answers came in 15% faster than 8 MiB ones, measured)."""
        return None if self._given else read_bytes

    def partitions(self, topic: str, wanted: list[int] | None) -> list[int]:
        count = self.reader.partition_counts([topic]).get(topic)
        return _checked_partitions(topic, count, wanted, "the cluster")

    def bounds(self, topic: str, partitions: list[int]) -> dict[int, tuple[int, int]]:
        return self.reader.offsets(topic, partitions) if partitions else {}

    def data_bound(self, topic: str, partition: int, low: int) -> int | None:
        return None  # Kafka's protocol does not say; the decoder estimates from the first answer

    def record_sets(
        self, topic: str, partition: int, low: int, high: int, fail: bool, read_bytes: int
    ) -> Iterator[tuple[Any, int]]:
        from logstore.errors import OffsetGoneError

        offset = low
        # Each pass either reads to high or restarts past a loss (the log start only grows).
        for _ in range(high - low + 1):
            if offset >= high:
                return
            try:
                size = self.fetch_bytes(read_bytes)
                yield from self.reader.read(topic, partition, offset, high, max_bytes=size)
                return
            except OffsetGoneError as e:
                offset = _lost(e, fail, high)

    def close(self) -> None:
        self.reader.close()


def _lost(error: Any, fail: bool, high: int) -> int:
    """Raise ``error`` (an OffsetGoneError), or log it and return where reading goes on."""
    if fail:
        raise error
    _log.warning("%s; skipping to %d (fail_on_data_loss=False)", error, error.log_start_offset)
    return min(max(int(error.log_start_offset), int(error.offset) + 1), high)


def _ended(topic: str, partition: int, offset: int, high: int, fail: bool) -> None:
    message = (
        f"{topic}[{partition}]: the log ends at offset {offset}, before the end {high} looked up at the start "
        "(it was truncated or deleted meanwhile)"
    )
    if fail:
        raise LogstoreError(message)
    _log.warning("%s; stopping there (fail_on_data_loss=False)", message)

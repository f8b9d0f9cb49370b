"""The ``logstore`` data source's writers: batch (``df.write``) and exactly-once streaming.

Rows: ``value`` (required, binary or string), ``key``, ``topic`` (or the
``topic`` option, which wins, as in Spark's Kafka sink), ``partition``
(int; otherwise Kafka's murmur2 of the key), ``headers``
(``array<struct<key: string, value: binary>>``).

**Batch to a broker**: each task produces its rows with logstore's producer
(idempotent, ``produce_batch``); a failed task is retried by Spark, so a
batch write is at least once, like Spark's Kafka sink.

**Streaming (and batch under ``path``)**: tasks do not write. Each task
routes its rows to partitions and encodes them in C into Kafka record
batches (a null key goes to partition ``task % partitions``, so a replayed
task routes its rows as before), and returns them to the driver in its
commit message; the driver appends them in :meth:`SinkCommitter.commit`.

**Exactly once.** Spark may run a micro-batch again after a crash: before it
recorded the batch as done, or while the driver was appending. The sink
keeps per output partition a state in a consumer group of its own
(``__logstore_spark_sink.<sink id>``, an OffsetCommit whose metadata is
``{"batch": b, "state": "pending"|"done", "start": offset}``: Kafka's own
durable, replicated store; the sink id is the ``sinkId`` option or a hash of
the checkpoint location). Batch ``b`` commits as:

1. fetch the states of the partitions it writes; a partition whose state
   is batch >= ``b`` and done has this batch already: skipped;
2. mark the others pending with their current end offset as ``start`` (a
   partition already pending for ``b`` keeps its ``start``);
3. append; the first record of every record batch carries the header
   ``logstore.spark.sink = <sink id>:<b>:<task>``;
4. mark them done.

After a crash between 2 and 4, the replay finds ``pending``: it reads the
partition from ``start`` and collects the records of the batches marked
``<sink id>:<b>:<task>``; of each task's rows it appends only those not
already there (a multiset difference, so a replay may order rows
differently). Nothing is appended twice and nothing is lost, as long as
the query is deterministic (Spark's own condition for exactly-once sinks).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from logstore.spark.backend import Where, backend_for, record_sets
from logstore.spark.options import OptionError, SinkOptions, parse_sink_options
from logstore.spark.planning import OffsetRange, TopicPartition

log = logging.getLogger("logstore.spark")

MARKER = "logstore.spark.sink"
"""The header on the first record of each record batch a streaming sink appends."""
GROUP_PREFIX = "__logstore_spark_sink."
BATCH_OVERHEAD = 61
RECORD_OVERHEAD = 21
TEXT_TYPES = (pa.string(), pa.large_string())
BINARY_TYPES = (pa.binary(), pa.large_binary())
HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


# -- rows to routed, encoded record batches (executors) -------------------------------------


def _binary(batch: pa.RecordBatch, name: str, required: bool) -> pa.Array | None:
    if name not in batch.schema.names:
        if required:
            raise OptionError(f"the DataFrame has no {name!r} column; the logstore sink needs {name} "
                              f"(binary or string), and takes key, topic, partition and headers too")  # fmt: skip
        return None
    column = batch.column(name)
    if column.type == pa.null():
        column = pa.nulls(len(column), pa.binary())
    if column.type in TEXT_TYPES or column.type == pa.large_binary():
        column = column.cast(pa.binary())
    if column.type != pa.binary():
        raise OptionError(
            f"column {name!r} must be binary or string, not {column.type}; cast it in the query"
        )
    return column


def _check_columns(schema: pa.Schema, topic_option: str | None) -> None:
    known = {"key", "value", "topic", "partition", "headers"}
    extra = sorted(set(schema.names) - known)
    if extra:
        raise OptionError(f"the logstore sink writes columns key, value, topic, partition and headers; "
                          f"drop or rename {', '.join(extra)}")  # fmt: skip
    for name in ("key", "value"):
        if name in schema.names:
            kind = schema.field(name).type
            if kind not in TEXT_TYPES and kind not in BINARY_TYPES and kind != pa.null():
                raise OptionError(
                    f"column {name!r} must be binary or string, not {kind}; cast it in the query"
                )
    if "topic" in schema.names and schema.field("topic").type not in (*TEXT_TYPES, pa.null()):
        raise OptionError(f"column 'topic' must be a string, not {schema.field('topic').type}")
    if "partition" in schema.names and not pa.types.is_integer(schema.field("partition").type):
        raise OptionError(f"column 'partition' must be an int, not {schema.field('partition').type}")
    if "topic" not in schema.names and topic_option is None:
        raise OptionError("no topic: set the topic option or give a topic column")
    if "headers" in schema.names and not _headers_type(schema.field("headers").type):
        raise OptionError(f"column 'headers' must be array<struct<key: string, value: binary>>, "
                          f"not {schema.field('headers').type}")  # fmt: skip


def _headers_type(kind: pa.DataType) -> bool:
    """Whether ``kind`` is list<struct<key: string, value: binary>> (list field names aside)."""
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)):
        return False
    item = kind.value_type
    return (pa.types.is_struct(item) and item.num_fields == 2
            and (item.field(0).name, item.field(1).name) == ("key", "value")
            and item.field(0).type in TEXT_TYPES and item.field(1).type in BINARY_TYPES)  # fmt: skip


def _arrow_schema(schema: StructType) -> pa.Schema:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def _topics(batch: pa.RecordBatch, option: str | None) -> tuple[list[str], np.ndarray]:
    """(distinct topics, each row's index into them)."""
    n = batch.num_rows
    if option is not None:
        return [option], np.zeros(n, dtype=np.int64)
    column = batch.column("topic")
    if column.null_count:
        raise OptionError("a row has a null topic; set the topic option or fill the topic column")
    encoded = column.cast(pa.string()).dictionary_encode()
    return [str(t) for t in encoded.dictionary.to_pylist()], encoded.indices.to_numpy(
        zero_copy_only=False
    ).astype(np.int64)


def _row_sizes(keys: pa.Array | None, values: pa.Array, headers: pa.Array | None) -> np.ndarray:
    """An upper bound of each row's encoded size (for cutting record batches)."""

    def lengths(column: pa.Array) -> np.ndarray:
        return np.asarray(pc.fill_null(pc.binary_length(column), 0), dtype=np.int64)

    size = lengths(values) + RECORD_OVERHEAD
    if keys is not None:
        size += lengths(keys)
    if headers is not None:
        flat = pc.list_flatten(headers)
        per = lengths(flat.field("key")) + lengths(flat.field("value")) + 10
        counts = np.asarray(pc.fill_null(pc.list_value_length(headers), 0), dtype=np.int64)
        ends = np.cumsum(counts)
        sums = np.concatenate([[0], np.cumsum(per)])
        size += sums[ends] - sums[ends - counts]
    return size


def _with_marker(headers: pa.Array | None, n: int, marker: str) -> pa.Array:
    """``headers`` with the marker header first in row 0 (an empty list elsewhere when there were none)."""
    mark = pa.StructArray.from_arrays([pa.array([MARKER], pa.string()), pa.array([marker.encode()], pa.binary())],
                                      names=["key", "value"])  # fmt: skip
    if headers is None:
        offsets = np.ones(n + 1, dtype=np.int32)
        offsets[0] = 0
        return pa.ListArray.from_arrays(pa.array(offsets), mark)
    first = headers.slice(0, 1).to_pylist()[0] or []
    head = pa.array([[{"key": MARKER, "value": marker.encode()}, *first]], HEADERS_TYPE)
    return pa.concat_arrays([head, headers.slice(1)]) if n > 1 else head


def encode_rows(
    keys: pa.Array | None, values: pa.Array, headers: pa.Array | None, batch_bytes: int, marker: str | None
) -> list[bytes]:
    """Record batches of the rows in order, each <= ``batch_bytes`` (one row may exceed it).

    With ``marker``, each batch's first record carries it (the header :data:`MARKER`).
    Encoded in C from the Arrow buffers: O(rows) with no per-row Python.
    """
    from logstore.records.arrow import encode_arrow

    n = len(values)
    if n == 0:
        return []
    if marker is None:
        return encode_arrow(keys, values, headers=headers, max_batch_bytes=batch_bytes)
    sizes = _row_sizes(keys, values, headers) + len(MARKER) + len(marker) + 10
    ends = np.cumsum(sizes)
    cuts = [0]
    while cuts[-1] < n:  # bounded: each step takes at least one row
        start = cuts[-1]
        limit = (ends[start - 1] if start else 0) + batch_bytes - BATCH_OVERHEAD
        cuts.append(max(start + 1, int(np.searchsorted(ends, limit, side="right"))))
    out: list[bytes] = []
    for a, b in itertools.pairwise(cuts):
        part_headers = _with_marker(None if headers is None else headers.slice(a, b - a), b - a, marker)
        out += encode_arrow(None if keys is None else keys.slice(a, b - a), values.slice(a, b - a),
                            headers=part_headers, max_batch_bytes=2**31 - 1)  # fmt: skip
    return out


@dataclass
class Unit:
    """One task's encoded record batches for one topic-partition."""

    topic: str
    partition: int
    task: int
    batches: list[bytes]
    rows: int


@dataclass
class SinkMessage(WriterCommitMessage):
    """What a task hands the driver: its encoded units (streaming, or batch under ``path``) and counts."""

    units: list[Unit] = field(default_factory=list)
    rows: int = 0


def _task_ids() -> tuple[int, int | None]:
    """(this task's partition id, the micro-batch id), from Spark's TaskContext when there is one."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
    except ImportError:  # pragma: no cover - pyspark is a dependency of this module
        context = None
    if context is None:
        return 0, None
    batch = context.getLocalProperty("streaming.sql.batchId")
    return int(context.partitionId()), None if batch is None else int(batch)


class PartitionCounts:
    """Partition counts of output topics, looked up once per task (auto-creating where the broker does)."""

    def __init__(self, where: Where) -> None:
        self.where = where
        self._counts: dict[str, int] = {}

    def __call__(self, topic: str) -> int:
        if topic not in self._counts:
            counts = backend_for(self.where).partition_counts([topic], create=True)
            if topic not in counts:
                hint = (" Create it first (logstore topics create)" if self.where.path
                        else " Create it, or let the broker create topics (auto.create.topics.enable)")  # fmt: skip
                raise OptionError(f"topic {topic!r} does not exist.{hint}")
            self._counts[topic] = counts[topic]
        return self._counts[topic]


def route(batch: pa.RecordBatch, topic_option: str | None, counts: PartitionCounts, task: int,
          sticky_nulls: bool) -> Iterator[tuple[str, int, pa.RecordBatch]]:  # fmt: skip
    """Rows grouped by (topic, partition), each group in input order. O(rows log rows) in numpy.

    Partition: the partition column, else murmur2 of the key (Kafka's), else
    ``task % partitions`` (or -1, "the producer's choice", with ``sticky_nulls``).
    """
    from logstore.records.arrow import partitions_for_keys

    _check_columns(batch.schema, topic_option)
    names, codes = _topics(batch, topic_option)
    n = batch.num_rows
    parts = np.full(n, -1, dtype=np.int64)
    if "partition" in batch.schema.names:
        column = batch.column("partition").cast(pa.int64())
        given = np.asarray(column.fill_null(-1), dtype=np.int64)
        parts = given
    keys = _binary(batch, "key", False)
    for index, topic in enumerate(names):
        count = counts(topic)
        rows = codes == index
        bad = rows & (parts >= count)
        if bad.any():
            raise OptionError(
                f"a row asks for partition {int(parts[bad][0])} of {topic!r}, which has {count}"
            )
        need = rows & (parts < 0)
        if need.any() and keys is not None:
            chosen = np.asarray(partitions_for_keys(keys, count), dtype=np.int64)
            parts = np.where(need, chosen, parts)
            need = rows & (parts < 0)
        if need.any() and not sticky_nulls:
            parts = np.where(need, task % count, parts)
    combined = codes * (1 << 32) + (parts + 1)
    order = np.argsort(combined, kind="stable")
    ordered = combined[order]
    starts = np.flatnonzero(np.concatenate([[True], ordered[1:] != ordered[:-1]]))
    bounds = [*starts.tolist(), n]
    single = len(starts) == 1
    for a, b in itertools.pairwise(bounds):
        first = int(order[a])
        rows_batch = batch if single else batch.take(pa.array(order[a:b]))
        yield names[int(codes[first])], int(parts[first]), rows_batch


def encode_task(batches: Iterable[pa.RecordBatch], options: SinkOptions, marker_of: Any) -> SinkMessage:
    """A task's rows routed and encoded: the commit message of streaming (and ``path``) writes."""
    where = Where(path=options.path, client=dict(options.client))
    counts = PartitionCounts(where)
    task, _ = _task_ids()
    collected: dict[TopicPartition, list[pa.RecordBatch]] = {}
    rows = 0
    for batch in batches:
        if batch.num_rows == 0:
            continue
        rows += batch.num_rows
        for topic, partition, part in route(batch, options.topic, counts, task, sticky_nulls=False):
            collected.setdefault((topic, partition), []).append(part)
    units = []
    for (topic, partition), parts in sorted(collected.items()):
        table = pa.Table.from_batches(parts).combine_chunks()
        merged = table.to_batches()[0] if table.num_rows else parts[0]
        keys = _binary(merged, "key", False)
        values = _binary(merged, "value", True)
        assert values is not None
        headers = merged.column("headers") if "headers" in merged.schema.names else None
        encoded = encode_rows(keys, values, headers, options.batch_bytes, marker_of(task))
        units.append(Unit(topic, partition, task, encoded, merged.num_rows))
    return SinkMessage(units=units, rows=rows)


# -- the driver: appending units, exactly once -------------------------------------------------


def sink_id(options: SinkOptions) -> str:
    """The ``sinkId`` option, else a hash of the checkpoint location (stable across restarts)."""
    if options.sink_id:
        return options.sink_id
    if not options.checkpoint:
        raise OptionError(
            "a streaming write needs a checkpointLocation (or the sinkId option) to be exactly once"
        )
    location = options.checkpoint
    if "://" not in location:
        location = os.path.abspath(location)
    return hashlib.sha256(location.encode()).hexdigest()[:20]


def client_config(where: Where) -> dict[str, Any]:
    if where.path:
        return {"bootstrap.servers": "embedded://" + os.path.abspath(where.path)}
    return dict(where.client)


@dataclass
class PartitionState:
    batch: int
    state: str
    start: int

    def encode(self) -> str:
        return json.dumps({"batch": self.batch, "state": self.state, "start": self.start})

    @classmethod
    def decode(cls, text: str | None) -> PartitionState | None:
        if not text:
            return None
        try:
            value = json.loads(text)
            return cls(int(value["batch"]), str(value["state"]), int(value["start"]))
        except (ValueError, KeyError, TypeError):
            return None


class Appender:
    """Appends encoded record batches to partitions' leaders (Produce, acks=all), all in flight at once.

    Each Produce carries at most one batch per partition (Kafka's rule) and
    the requests to one broker go down one pipelined connection in order, so
    a partition's batches land in the order given. Exactly-once does not
    rest on that order: after a failure, what landed is found by its marker.
    """

    TIMEOUT_MS = 30_000

    def __init__(self, config: dict[str, Any]) -> None:
        from logstore.client.cluster import Cluster
        from logstore.client.config import ClientConfig

        self.cluster = Cluster(ClientConfig.parse(config, "producer"))

    def append(self, topic: str, partition: int, batches: list[bytes]) -> None:
        """``batches`` to one partition (see :meth:`append_all`)."""
        self.append_all([(topic, partition, batches)])

    def append_all(self, items: list[tuple[str, int, list[bytes]]]) -> None:
        """Every batch of every item; raises KafkaException (the first error) once all have answered.

        O(batches) requests, at most one round trip of waiting per
        ``len(longest item)`` requests in flight per broker.
        """
        from logstore.client.errors import KafkaError, KafkaException

        topics = sorted({topic for topic, _, _ in items})
        if any(self.cluster.leader(t, p) < 0 for t, p, _ in items):
            self.cluster.refresh(topics)
        rounds = max((len(batches) for _, _, batches in items), default=0)
        futures = []
        for index in range(rounds):  # request ``index`` carries each partition's batch ``index``
            by_node: dict[int, dict[str, list[dict[str, Any]]]] = {}
            for topic, partition, batches in items:
                if index < len(batches):
                    node = self.cluster.leader(topic, partition)
                    parts = by_node.setdefault(node, {}).setdefault(topic, [])
                    parts.append({"index": partition, "records": batches[index]})
            for node, by_topic in by_node.items():
                fields = {"transactional_id": None, "acks": -1, "timeout": self.TIMEOUT_MS,
                          "topic_data": [{"name": t, "partition_data": ps} for t, ps in by_topic.items()]}  # fmt: skip
                futures.append(self.cluster.send(node, 0, fields))
        first: KafkaException | None = None
        wait = self.TIMEOUT_MS / 1000 + self.cluster.config.seconds("request.timeout.ms")
        for future in futures:
            try:
                response = future.result(wait)
            except KafkaException as e:
                first = first or e
                continue
            except TimeoutError:
                first = first or KafkaException(KafkaError(KafkaError._TIMED_OUT, "appending: no answer"))  # type: ignore[attr-defined]
                continue
            for topic in response.responses:
                for answer in topic.partition_responses:
                    if int(answer.error_code) and first is None:
                        first = KafkaException(KafkaError(int(answer.error_code),
                                                          f"appending to {topic.name} [{answer.index}]"))  # fmt: skip
        if first is not None:
            raise first

    def close(self) -> None:
        self.cluster.close()


class SinkCommitter:
    """The driver's side of a write: appends units, exactly once per (sink, batch) when ``sink`` is set."""

    def __init__(self, where: Where, sink: str | None) -> None:
        self.where = where
        self.sink = sink
        self.config = client_config(where)
        self.appender = Appender(self.config)
        self._consumer: Any = None

    @property
    def group(self) -> str:
        assert self.sink is not None
        return GROUP_PREFIX + self.sink

    def consumer(self) -> Any:
        if self._consumer is None:
            from logstore.client import Consumer

            self._consumer = Consumer({**self.config, "group.id": self.group, "enable.auto.commit": False})
        return self._consumer

    def close(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
        self.appender.close()

    def __enter__(self) -> SinkCommitter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def states(self, tps: list[TopicPartition]) -> dict[TopicPartition, PartitionState | None]:
        from logstore.client import TopicPartition as TP

        found = self.consumer().committed([TP(t, p) for t, p in tps], timeout=30)
        return {(tp.topic, tp.partition): PartitionState.decode(tp.metadata) for tp in found}

    def mark(self, states: dict[TopicPartition, PartitionState]) -> None:
        from logstore.client import TopicPartition as TP

        if states:
            offsets = [TP(t, p, s.start, metadata=s.encode()) for (t, p), s in states.items()]
            self.consumer().commit(offsets=offsets, asynchronous=False)

    def commit(self, units: list[Unit], batch: int | None) -> int:
        """Append ``units``; with a sink id, exactly once for ``batch``. Returns the records appended."""
        by_tp: dict[TopicPartition, list[Unit]] = {}
        for unit in units:
            if unit.batches:
                by_tp.setdefault((unit.topic, unit.partition), []).append(unit)
        if self.sink is None or batch is None:
            self.appender.append_all([(t, p, [b for u in group for b in u.batches])
                                      for (t, p), group in sorted(by_tp.items())])  # fmt: skip
            return sum(u.rows for u in units)
        tps = sorted(by_tp)
        states = self.states(tps)
        ends = backend_for(self.where).bounds(tps)
        pending: dict[TopicPartition, PartitionState] = {}
        resume: dict[TopicPartition, int] = {}
        for tp in tps:
            state = states.get(tp)
            if state is not None and (
                state.batch > batch or (state.batch == batch and state.state == "done")
            ):
                continue  # this batch (or a later one) is already there
            if state is not None and state.batch == batch:
                resume[tp] = state.start  # a crash mid-append: see what landed
                pending[tp] = state
            else:
                pending[tp] = PartitionState(batch, "pending", ends[tp][1])
        self.mark(pending)
        fresh = [tp for tp in sorted(pending) if tp not in resume]
        groups = {tp: sorted(by_tp[tp], key=lambda u: u.task) for tp in pending}
        self.appender.append_all([(t, p, [b for u in groups[(t, p)] for b in u.batches]) for t, p in fresh])
        written = sum(u.rows for tp in fresh for u in groups[tp])
        for tp in sorted(resume):  # a crash mid-append: append what did not land
            written += self._append_rest(tp, groups[tp], self.landed(tp, resume[tp], batch), batch)
        self.mark({tp: PartitionState(batch, "done", s.start) for tp, s in pending.items()})
        return written

    def landed(self, tp: TopicPartition, start: int, batch: int) -> dict[int, collections.Counter[Any]]:
        """Per task, the rows of this sink's ``batch`` already in ``tp`` at or after ``start``."""
        from logstore.records.batch import batches_of

        prefix = f"{self.sink}:{batch}:"
        end = backend_for(self.where).bounds([tp])[tp][1]
        found: dict[int, collections.Counter[Any]] = {}
        piece = OffsetRange(tp[0], tp[1], min(start, end), end)
        for records, offset in record_sets(self.where, piece, fail_on_data_loss=False):
            for record_batch in batches_of(memoryview(records)):
                if record_batch.last_offset < offset or record_batch.is_control:
                    continue
                records_list = record_batch.records
                if not records_list:
                    continue
                marks = [bytes(v or b"").decode() for k, v in records_list[0].headers if k == MARKER]
                if not marks or not marks[0].startswith(prefix):
                    continue
                task = int(marks[0][len(prefix) :])
                counter = found.setdefault(task, collections.Counter())
                for record in records_list:
                    counter[_row_key(record)] += 1
        return found

    def _append_rest(self, tp: TopicPartition, group: list[Unit], landed: dict[int, collections.Counter[Any]],
                     batch: int) -> int:  # fmt: skip
        """Append each unit's rows minus those that already landed (rare: only after a crash)."""
        from logstore.records import build_batch
        from logstore.records.batch import batches_of
        from logstore.records.record import Record

        written = 0
        for unit in group:
            seen = landed.get(unit.task, collections.Counter())
            rest = []
            for encoded in unit.batches:
                for batch_obj in batches_of(memoryview(encoded)):
                    for record in batch_obj.records:
                        key = _row_key(record)
                        if seen[key] > 0:
                            seen[key] -= 1
                        else:
                            rest.append(record)
            marker = f"{self.sink}:{batch}:{unit.task}"
            out = []
            for i in range(0, len(rest), 1000):
                chunk = rest[i : i + 1000]
                records = [Record(key=r.key, value=r.value, headers=([(MARKER, marker.encode())] if j == 0 else [])
                                  + [h for h in r.headers if h[0] != MARKER])
                           for j, r in enumerate(chunk)]  # fmt: skip
                out.append(build_batch(records))
            self.appender.append_all([(tp[0], tp[1], out)])
            written += len(rest)
        return written


def _row_key(record: Any) -> tuple[Any, ...]:
    headers = tuple((k, bytes(v) if v is not None else None) for k, v in record.headers if k != MARKER)
    key = None if record.key is None else bytes(record.key)
    value = None if record.value is None else bytes(record.value)
    return (key, value, headers)


# -- Spark's writer classes --------------------------------------------------------------------


class LogstoreBatchWriter(DataSourceArrowWriter):
    """``df.write.format("logstore")``: tasks produce (broker), or the driver appends (``path``)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(options, streaming=False)
        self.where = Where(path=self.options.path, client=dict(self.options.client))
        _check_columns(_arrow_schema(schema), self.options.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        if self.where.path:
            return encode_task(iterator, self.options, lambda task: None)
        return produce_task(iterator, self.options)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        if not self.where.path:
            return
        units = [u for m in messages if isinstance(m, SinkMessage) for u in m.units]
        with SinkCommitter(self.where, None) as committer:
            committer.commit(units, None)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Tasks that ran have produced (broker): as Spark's Kafka sink, nothing is taken back."""


class LogstoreStreamWriter(DataSourceStreamArrowWriter):
    """``writeStream.format("logstore")``: exactly once (see the module doc)."""

    def __init__(self, options: Mapping[str, str], schema: StructType) -> None:
        self.options = parse_sink_options(options, streaming=True)
        self.where = Where(path=self.options.path, client=dict(self.options.client))
        self.sink = sink_id(self.options)
        _check_columns(_arrow_schema(schema), self.options.topic)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        _, batch = _task_ids()
        return encode_task(iterator, self.options, lambda task: f"{self.sink}:{batch}:{task}")

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        units = [u for m in messages if isinstance(m, SinkMessage) for u in m.units]
        with SinkCommitter(self.where, self.sink) as committer:
            committer.commit(units, batchId)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing was appended yet (tasks only encode), so nothing to take back."""


def produce_task(batches: Iterable[pa.RecordBatch], options: SinkOptions) -> SinkMessage:
    """A batch task's rows produced with logstore's producer (idempotent), flushed before it returns."""
    from logstore.client import KafkaException, Producer

    where = Where(path=None, client=dict(options.client))
    counts = PartitionCounts(where)
    errors: list[Any] = []

    def report(error: Any, message: Any) -> None:
        if error is not None and not errors:
            errors.append(error)

    producer = Producer({"linger.ms": 5, **options.client, "delivery.report.only.error": True})
    rows = 0
    try:
        for batch in batches:
            if batch.num_rows == 0:
                continue
            rows += batch.num_rows
            for topic, partition, part in route(batch, options.topic, counts, 0, sticky_nulls=True):
                keys = _binary(part, "key", False)
                values = _binary(part, "value", True)
                assert values is not None
                if "headers" in part.schema.names:
                    headers = part.column("headers").to_pylist()
                    key_list = [None] * part.num_rows if keys is None else keys.to_pylist()
                    for k, v, h in zip(key_list, values.to_pylist(), headers, strict=True):
                        producer.produce(topic, v, k, partition=partition, headers=[(x["key"], x["value"]) for x in h or []],
                                         on_delivery=report)  # fmt: skip
                        producer.poll(0)
                else:
                    producer.produce_batch(topic, values.to_pylist(), None if keys is None else keys.to_pylist(),
                                           partition=partition, on_delivery=report)  # fmt: skip
                    producer.poll(0)
                if errors:
                    break
        remaining = producer.flush(120)
        if errors:
            raise KafkaException(errors[0])
        if remaining:
            raise OptionError(f"{remaining} records were not acknowledged within 120 s; is the broker up?")
    finally:
        producer.close()
    return SinkMessage(rows=rows)

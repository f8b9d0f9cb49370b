"""logstore.arrow.read_table / read_batches and RangeReader: every column against an oracle.

Two sources, one answer: a data directory read from its files (the oracle
is the Store's own Log.read and RecordBatch.records) and a real broker (the
oracle is what was produced, and the broker's data directory read from its
files while the broker runs and appends).
"""

from __future__ import annotations

import itertools
import os
import random
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from logstore import Store
from logstore.arrow import _BrokerReader, read_batches, read_table
from logstore.client.admin import AdminClient, NewTopic
from logstore.client.errors import KafkaException
from logstore.client.producer import Producer
from logstore.client.ranges import RETRIES, RangeReader
from logstore.client.types import TopicPartition
from logstore.errors import (
    InvalidArgumentError,
    LogstoreError,
    OffsetGoneError,
    OffsetOutOfRangeError,
    UnknownTopicError,
)
from logstore.records import Record, build_batch, parse_batches
from logstore.records.arrow import CorruptArrowError, decode_arrow, kafka_schema
from logstore.records.batch import scan
from logstore.storage.log import Log
from logstore.storage.partition_files import PartitionFiles
from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

NOW_MS = int(time.time() * 1000) - 3_600_000  # recent: segment.ms does not roll every batch
SMALL = {"segment.bytes": 3000, "index.interval.bytes": 200}


def _records(count: int, seed: int) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(count):
        key = None if i % 7 == 0 else f"key-{i}-é".encode()
        value = None if i % 11 == 5 else bytes(rng.randrange(256) for _ in range(rng.randrange(0, 90)))
        headers = [("trace", f"{i}".encode()), ("empty", b""), ("none", None)] if i % 4 == 1 else []
        out.append(
            Record(key=key, value=value, headers=headers, timestamp=NOW_MS + i + rng.randrange(-40, 40))
        )
    return out


def _ms(record: Record) -> int:
    """The record's timestamp (every record here has one)."""
    assert record.timestamp is not None
    return record.timestamp


def _fill(log: Log, records: list[Record], seed: int, codecs: tuple[str, ...] = ("none",)) -> None:
    rng = random.Random(seed)
    at = 0
    while at < len(records):
        n = min(rng.randrange(1, 25), len(records) - at)
        log.append_batch(build_batch(records[at : at + n], compression=rng.choice(codecs)))
        at += n


def _columns(table: pa.Table | pa.RecordBatch) -> dict[str, list[Any]]:
    out = {name: table.column(name).to_pylist() for name in table.schema.names}
    out["timestamp"] = table.column("timestamp").cast(pa.int64()).to_pylist()
    return out


def _expected(
    log: Log, topic: str, partition: int, start: int, end: int, headers: bool
) -> dict[str, list[Any]]:
    """The oracle: the Log's own read, decoded by RecordBatch.records, as columns."""
    out: dict[str, list[Any]] = {name: [] for name in kafka_schema(headers).names}
    offset = start
    while offset < end:
        read = log.read(offset, 1 << 16)
        assert read.size, (offset, end)
        for batch in read.batches:
            kind = 1 if batch.timestamp_type == "LogAppendTime" else 0
            for r in batch.records:
                if not start <= r.offset < end:
                    continue
                out["key"].append(r.key)
                out["value"].append(r.value)
                out["topic"].append(topic)
                out["partition"].append(partition)
                out["offset"].append(r.offset)
                out["timestamp"].append(_ms(r) * 1000)
                out["timestampType"].append(kind)
                if headers:
                    out["headers"].append([{"key": k, "value": v} for k, v in r.headers] or None)
            offset = batch.next_offset
    return out


def _concat(parts: list[dict[str, list[Any]]]) -> dict[str, list[Any]]:
    return {name: [v for part in parts for v in part[name]] for name in parts[0]}


@pytest.fixture
def data(tmp_path: Any) -> Iterator[str]:
    """plain: 3 partitions, small segments; zipped: all four codecs; stamped: LogAppendTime;
    trimmed: its log start moved by delete_records."""
    path = str(tmp_path / "data")
    with Store(path, scheduler=False) as store:
        store.create_topic("plain", partitions=3, config=SMALL)
        store.create_topic("zipped", config=SMALL)
        store.create_topic("stamped", config={**SMALL, "message.timestamp.type": "LogAppendTime"})
        store.create_topic("trimmed", config=SMALL)
        for p in range(3):
            _fill(store.log("plain", p), _records(200 + 50 * p, seed=p), seed=p)
        _fill(
            store.log("zipped"),
            _records(400, seed=7),
            seed=7,
            codecs=("none", "gzip", "snappy", "lz4", "zstd"),
        )
        _fill(store.log("stamped"), _records(90, seed=8), seed=8)
        _fill(store.log("trimmed"), _records(300, seed=9), seed=9)
        store.log("trimmed").delete_records(123)
    yield path


def _oracle(path: str, topic: str, partitions: list[int], bounds: dict[int, tuple[int, int]] | None = None,
            headers: bool = False) -> dict[str, list[Any]]:  # fmt: skip
    with Store(path, scheduler=False) as store:
        parts = []
        for p in partitions:
            log = store.log(topic, p)
            start, end = (bounds or {}).get(p, (log.log_start_offset, log.log_end_offset))
            parts.append(_expected(log, topic, p, start, end, headers))
    return _concat(parts)


# -- a data directory -----------------------------------------------------------------


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("topic", ["plain", "zipped", "stamped", "trimmed"])
def test_read_table_from_a_data_directory_equals_the_log(data: str, topic: str, headers: bool) -> None:
    table = read_table(data, topic, include_headers=headers)
    assert table.schema == kafka_schema(headers)
    partitions = [0, 1, 2] if topic == "plain" else [0]
    expected = _oracle(data, topic, partitions, headers=headers)
    assert _columns(table) == expected
    assert table.num_rows == len(expected["offset"]) > 0
    if topic == "stamped":
        assert set(table.column("timestampType").to_pylist()) == {1}
    if topic == "trimmed":
        assert min(table.column("offset").to_pylist()) == 123


def test_what_was_written_comes_back(data: str, tmp_path: Any) -> None:
    """Against the records handed to the log, not only the log's own reading of them."""
    records = _records(400, seed=7)
    table = read_table("embedded://" + os.path.abspath(data), "zipped", include_headers=True)
    assert table.column("offset").to_pylist() == list(range(400))
    assert table.column("key").to_pylist() == [r.key for r in records]
    assert table.column("value").to_pylist() == [r.value for r in records]
    assert table.column("timestamp").cast(pa.int64()).to_pylist() == [_ms(r) * 1000 for r in records]
    assert table.column("headers").to_pylist() == [
        [{"key": k, "value": v} for k, v in r.headers] or None for r in records
    ]
    assert set(table.column("topic").to_pylist()) == {"zipped"}


def test_bounds_per_partition(data: str) -> None:
    table = read_table(data, "plain", [2, 0], start={0: 10, 2: -2}, end={0: 50, 2: 77})
    assert _columns(table) == _concat(
        [_oracle(data, "plain", [2], {2: (0, 77)}), _oracle(data, "plain", [0], {0: (10, 50)})]
    )
    table = read_table(data, "plain", start=5, end="latest")
    assert _columns(table) == _oracle(data, "plain", [0, 1, 2], {0: (5, 200), 1: (5, 250), 2: (5, 300)})
    assert read_table(data, "plain", [1], start="latest").num_rows == 0
    assert read_table(data, "plain", [1], start=17, end=17).num_rows == 0
    with pytest.raises(InvalidArgumentError, match="past the partition's end 200"):
        read_table(data, "plain", [0], end=201)
    with pytest.raises(InvalidArgumentError, match="after the end"):
        read_table(data, "plain", [0], start=30, end=20)
    with pytest.raises(InvalidArgumentError, match="'earliest', 'latest'"):
        read_table(data, "plain", start="first")


def test_data_loss_raises_or_skips(data: str) -> None:
    with pytest.raises(OffsetGoneError, match="log starts at offset 123") as raised:
        read_table(data, "trimmed", start=100)
    assert isinstance(raised.value, OffsetOutOfRangeError) and raised.value.log_start_offset == 123
    table = read_table(data, "trimmed", start=100, fail_on_data_loss=False)
    assert table.column("offset").to_pylist() == list(range(123, 300))


def test_read_batches_streams_in_bounded_pieces(data: str) -> None:
    pieces = list(read_batches(data, "zipped", read_bytes=700, include_headers=True))
    assert len(pieces) > 10 and all(p.num_rows > 0 and p.schema == kafka_schema(True) for p in pieces)
    assert _concat([_columns(p) for p in pieces]) == _columns(
        read_table(data, "zipped", include_headers=True)
    )


def test_unknown_sources_topics_and_partitions(data: str, tmp_path: Any) -> None:
    with pytest.raises(LogstoreError, match="not a logstore data directory"):
        read_table(str(tmp_path), "plain")
    with pytest.raises(UnknownTopicError, match="does not exist"):
        read_table(data, "nope")
    with pytest.raises(UnknownTopicError, match=r"partitions 0 to 2 .*\[3\]"):
        read_table(data, "plain", [0, 3])


@pytest.mark.parametrize("topic", ["plain", "zipped", "trimmed"])
def test_threads_give_the_same_table_one_chunk_per_partition(data: str, topic: str) -> None:
    one = read_table(data, topic, include_headers=True, threads=1)
    partitions = [0, 1, 2] if topic == "plain" else [0]
    assert _columns(one) == _oracle(data, topic, partitions, headers=True)
    for threads in (2, 3, 8, None):
        table = read_table(data, topic, include_headers=True, threads=threads)
        assert table.equals(one)
        assert [len(c) for c in table.column("offset").chunks] == [
            len(c) for c in one.column("offset").chunks
        ]
    assert one.column("offset").num_chunks == len(partitions)
    # Partitions with nothing in range add no chunk; the others stay in partition order.
    table = read_table(data, "plain", [2, 1, 0], start={1: -1}, threads=2)
    assert table.column("partition").unique().to_pylist() == [2, 0] and table.column("offset").num_chunks == 2
    with pytest.raises(InvalidArgumentError, match="threads must be >= 1"):
        read_table(data, topic, threads=0)


def test_an_error_in_any_thread_is_raised(data: str, tmp_path: Any) -> None:
    copy = str(tmp_path / "copy")
    shutil.copytree(data, copy)
    folder = os.path.join(copy, "plain-2")
    log_path = os.path.join(folder, sorted(n for n in os.listdir(folder) if n.endswith(".log"))[1])
    with open(log_path, "r+b") as f:
        first = f.read()
        at = next(iter(parse_batches(first))).size + 70  # inside the second batch's records
        f.seek(at)
        f.write(bytes([first[at] ^ 0x40]))
    for threads in (1, 3):
        with pytest.raises(CorruptArrowError, match=r"plain \[2\]: .* CRC-32C"):
            read_table(copy, "plain", threads=threads)
    assert read_table(copy, "plain", [0, 1], threads=3).num_rows == 450


def test_a_store_handed_in_is_read_from_its_files(data: str) -> None:
    with Store(data, scheduler=False) as store:
        table = read_table({"logstore.store": store}, "stamped")
        assert table.column("offset").to_pylist() == list(range(90))


class _OldBroker:
    """A Cluster stand-in serving one partition as a broker without KIP-74 would: an answer is cut
    at partition_max_bytes even inside the first batch. Its first answer is NOT_LEADER."""

    def __init__(self, batches: list[bytes], stale: bool = False) -> None:
        self.batches = batches
        self.stale = stale  # answer every fetch with the first batch, whatever the offset
        self.topics: dict[str, Any] = {}
        self.sizes: list[int] = []
        self.refreshes = 0

    def leader(self, topic: str, partition: int) -> int:
        return 1

    def refresh(self, topics: Any = None, **_: Any) -> None:
        self.refreshes += 1

    def send(self, node: int, api: int, fields: dict[str, Any]) -> Any:
        from concurrent.futures import Future
        from types import SimpleNamespace as NS

        asked = fields["topics"][0]["partitions"][0]
        offset, size = asked["fetch_offset"], asked["partition_max_bytes"]
        self.sizes.append(size)
        code, records = 0, b""
        if len(self.sizes) == 1:
            code = 6  # NOT_LEADER_OR_FOLLOWER
        else:
            first = next(
                i for i, b in enumerate(self.batches) if scan(b, 0).offset_last >= offset or self.stale
            )
            records = b"".join(self.batches[first:])[:size]
        answer = NS(partition_index=0, error_code=code, records=records, high_watermark=100,
                    last_stable_offset=100, log_start_offset=0, aborted_transactions=None)  # fmt: skip
        future: Future[Any] = Future()
        future.set_result(NS(error_code=0, responses=[NS(topic="t", partitions=[answer])]))
        return future

    def close(self) -> None:
        pass


def test_range_reader_grows_the_fetch_size_and_retries_not_leader() -> None:
    batches = [build_batch([bytes([i]) * (50 + 400 * (i % 3)) for i in range(b * 10, b * 10 + 10)], base_offset=b * 10)
               for b in range(10)]  # fmt: skip
    cluster = _OldBroker(batches)
    reader = RangeReader({"bootstrap.servers": "127.0.0.1:1", "retry.backoff.ms": 1}, partition_max_bytes=100,
                         cluster=cluster)  # type: ignore[arg-type]  # fmt: skip
    values = []
    for records, at in reader.read("t", 0, 15, 95):
        batch, _ = decode_arrow(records, "t", 0, at, 95)
        values += batch.column("value").to_pylist()
    assert values == [bytes([i]) * (50 + 400 * (i % 3)) for i in range(15, 95)]
    assert cluster.refreshes >= 1 and max(cluster.sizes) > 100 and cluster.sizes[0] == 100
    reader.close()


def test_range_reader_fetch_size_per_read() -> None:
    cluster = _OldBroker([build_batch([b"x" * 40] * 5, base_offset=5 * b) for b in range(4)])
    reader = RangeReader({"bootstrap.servers": "127.0.0.1:1", "retry.backoff.ms": 1},
                         cluster=cluster)  # type: ignore[arg-type]  # fmt: skip
    sets = list(reader.read("t", 0, 0, 20, max_bytes=400))
    assert cluster.sizes[0] == 400 and set(cluster.sizes) == {400} and len(sets) > 1
    with pytest.raises(InvalidArgumentError, match="max_bytes must be 1 to"):
        list(reader.read("t", 0, 0, 20, max_bytes=0))
    # read_table's reader asks for its own size unless the config names one.
    for config, size in [({}, 2 << 20), ({"max.partition.fetch.bytes": 3000}, None)]:
        source = _BrokerReader({"bootstrap.servers": "127.0.0.1:1", **config})
        assert source.fetch_bytes(2 << 20) == size
        source.close()


def test_range_reader_gives_up_on_answers_that_do_not_advance() -> None:
    cluster = _OldBroker([build_batch([b"x"] * 5, base_offset=0)] * 2, stale=True)
    reader = RangeReader({"bootstrap.servers": "127.0.0.1:1", "retry.backoff.ms": 1},
                         cluster=cluster)  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(KafkaException, match="batches end at offset 4"):
        list(reader.read("t", 0, 7, 9))
    assert len(cluster.sizes) == RETRIES + 1  # NOT_LEADER, then stale answers: failures in a row


# -- a broker ----------------------------------------------------------------------------


def _produce(
    bootstrap: str, topic: str, partitions: int, count: int, seed: int, **config: Any
) -> dict[int, list[Record]]:
    """``count`` records spread over the partitions; returns them per partition, in offset order."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2, "batch.num.messages": 20, **config})
    sent: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    for i, record in enumerate(_records(count, seed)):
        p = i % partitions
        producer.produce(topic, record.value, record.key, partition=p, timestamp=_ms(record),
                         headers=list(record.headers) or None)  # fmt: skip
        sent[p].append(record)
        if i % 500 == 499:
            producer.poll(0)
    assert producer.flush(30) == 0
    return sent


def _create(bootstrap: str, topic: str, partitions: int, config: dict[str, str] | None = None) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1, config=config or {})])[topic].result(30)


def _as_sent(sent: dict[int, list[Record]], topic: str, headers: bool) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {name: [] for name in kafka_schema(headers).names}
    for p in sorted(sent):
        for offset, r in enumerate(sent[p]):
            for name, value in (("key", r.key), ("value", r.value), ("topic", topic), ("partition", p),
                                ("offset", offset), ("timestamp", _ms(r) * 1000), ("timestampType", 0)):  # fmt: skip
                out[name].append(value)
            if headers:
                out["headers"].append([{"key": k, "value": v} for k, v in r.headers] or None)
    return out


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_read_table_from_a_broker_equals_what_was_produced(broker: BrokerProcess, compression: str) -> None:
    _create(broker.bootstrap, "events", 3, {"segment.bytes": "20000"})
    sent = _produce(broker.bootstrap, "events", 3, 3000, seed=1, **{"compression.type": compression})
    config = {"bootstrap.servers": broker.bootstrap, "max.partition.fetch.bytes": 3000}
    table = read_table(config, "events", include_headers=True)
    assert _columns(table) == _as_sent(sent, "events", True)
    # The broker's own directory, read from its files while it runs: the same rows.
    assert _columns(read_table(broker.data_dir, "events", include_headers=True)) == _columns(table)
    part = read_table(config, "events", [1], start={1: 100}, end={1: 321})
    assert part.column("offset").to_pylist() == list(range(100, 321))


def test_range_reader_bounds_pipelining_and_errors(broker: BrokerProcess) -> None:
    _create(broker.bootstrap, "r", 1, {"segment.bytes": "5000"})
    sent = _produce(broker.bootstrap, "r", 1, 2000, seed=2)[0]
    with RangeReader(
        {"bootstrap.servers": broker.bootstrap}, partition_max_bytes=500, poll_timeout_ms=300
    ) as reader:
        assert reader.partition_counts(["r", "missing"]) == {"r": 1}
        with pytest.raises(KafkaException, match=r"missing\[0\] does not exist"):
            list(reader.read("missing", 0, 0, 10))
        with pytest.raises(KafkaException, match="not known to the cluster"):
            reader.offsets("missing")
        assert reader.offsets("r") == {0: (0, 2000)}
        sets = list(reader.read("r", 0, 10, 1990))
        assert len(sets) > 20
        assert sets[0][1] == 10 and all(b[1] > a[1] for a, b in itertools.pairwise(sets))
        for records, asked in sets:  # each answer holds the batch with the offset it was asked at
            state = scan(records, 0)
            assert state.bytes_valid > 0 and state.offset_last >= asked
        stamps = {("r", 0): _ms(sent[700])}
        with PartitionFiles(broker.data_dir, "r", 0) as files:
            assert reader.offsets_for_times(stamps) == {("r", 0): files.offset_for_timestamp(_ms(sent[700]))}
        assert reader.offsets_for_times({("r", 0): NOW_MS + 10**9}) == {("r", 0): None}
        with pytest.raises(LogstoreError, match="not in the log"):
            list(reader.read("r", 0, 1990, 2005))
        deleted = AdminClient({"bootstrap.servers": broker.bootstrap}).delete_records(
            [TopicPartition("r", 0, 600)]
        )
        assert next(iter(deleted.values())).result(30).low_watermark == 600
        with pytest.raises(OffsetGoneError, match="log starts at offset 600") as raised:
            list(reader.read("r", 0, 5, 50))
        assert raised.value.log_start_offset == 600
        with pytest.raises(OffsetOutOfRangeError, match="past the log end"):
            list(reader.read("r", 0, 2500, 2600))


def test_a_batch_larger_than_the_fetch_size_is_read(broker: BrokerProcess) -> None:
    _create(broker.bootstrap, "big", 1)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 50, "batch.size": 1 << 20})
    values = [bytes([i]) * 3000 for i in range(100)]
    for v in values:
        producer.produce("big", v, partition=0)
    assert producer.flush(30) == 0
    with RangeReader({"bootstrap.servers": broker.bootstrap}, partition_max_bytes=100) as reader:
        table = pa.Table.from_batches([decode_arrow(records, "big", 0, at, 100)[0]
                                       for records, at in reader.read("big", 0, 0, 100)])  # fmt: skip
    assert table.column("value").to_pylist() == values


def test_files_of_a_live_broker_read_while_it_appends(broker: BrokerProcess) -> None:
    """Snapshots of a directory a broker owns and appends to, across segment rolls: each one is
    a gap-free prefix of what was produced, and they only grow."""
    _create(broker.bootstrap, "live", 2, {"segment.bytes": "4000", "index.interval.bytes": "300"})
    done = threading.Event()
    produced: list[Exception] = []

    def produce() -> None:
        try:
            producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
            for i in range(4000):
                producer.produce("live", b"v%d" % i, partition=i % 2)
                if i % 50 == 0:
                    producer.flush(10)
            assert producer.flush(30) == 0
        except Exception as e:  # reported by the test below
            produced.append(e)
        finally:
            done.set()

    writer = threading.Thread(target=produce)
    writer.start()
    seen = {0: 0, 1: 0}
    snapshots = 0
    while not done.is_set() or snapshots < 3:
        table = read_table(broker.data_dir, "live")
        for p in (0, 1):
            rows = table.filter(pc.equal(table.column("partition"), p))
            offsets = rows.column("offset").to_pylist()
            assert offsets == list(range(len(offsets)))
            assert rows.column("value").to_pylist() == [b"v%d" % (2 * o + p) for o in offsets]
            assert len(offsets) >= seen[p]
            seen[p] = len(offsets)
        snapshots += 1
    writer.join()
    assert not produced, produced
    final = read_table(broker.data_dir, "live")
    assert final.num_rows == 4000 and snapshots >= 3
    assert _columns(final) == _columns(read_table({"bootstrap.servers": broker.bootstrap}, "live"))


def test_the_reader_rides_out_a_broker_restart(broker: BrokerProcess) -> None:
    """The broker goes away mid-range: the reader retries (backing off, refreshing metadata) until
    it is back, and the range comes out whole."""
    _create(broker.bootstrap, "restart", 1)
    sent = _produce(broker.bootstrap, "restart", 1, 3000, seed=3)[0]
    config = {"bootstrap.servers": broker.bootstrap, "retry.backoff.ms": 100, "reconnect.backoff.ms": 50}
    with RangeReader(config, partition_max_bytes=2000) as reader:
        sets = reader.read("restart", 0, 0, 3000)
        first = [next(sets), next(sets)]  # the third Fetch is in flight now
        assert broker.stop() == 0
        down_at = time.monotonic()
        restarter = threading.Timer(1.0, broker.restart)
        restarter.start()
        rest = list(sets)  # fails against the stopped broker, then retries
        restarter.join()
        assert time.monotonic() - down_at >= 1.0
    values = []
    for records, at in [*first, *rest]:
        batch, _ = decode_arrow(records, "restart", 0, at, 3000)
        values += batch.column("value").to_pylist()
    assert values == [r.value for r in sent]

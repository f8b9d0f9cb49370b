"""logstore.client's Producer against a real broker process, and in-process (embedded).

What it produces is read back with confluent-kafka's Consumer (an independent
reader of the wire format) or, embedded, from the Store itself. Every wait is
bounded: flush() and poll() take timeouts, and reading back stops at a deadline.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections import defaultdict
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from logstore.client.config import ConfigError
from logstore.client.errors import KafkaError, KafkaException
from logstore.client.partitioner import murmur2_partition
from logstore.client.producer import Producer
from logstore.client.types import TIMESTAMP_CREATE_TIME, Message
from logstore.records import parse_batches
from logstore.storage.store import Store
from tests.kit.brokerkit import BrokerProcess, create_topic, free_port

pytestmark = [pytest.mark.integration]

DEADLINE_S = 30


def read_back(bootstrap: str, topic: str, partitions: int, count: int) -> dict[int, list[Any]]:
    """``count`` records of ``topic`` read with confluent-kafka, by partition, in offset order."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": f"check-{uuid.uuid4()}", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    out: dict[int, list[Any]] = defaultdict(list)
    got = 0
    deadline = time.monotonic() + DEADLINE_S
    try:
        while got < count and time.monotonic() < deadline:
            for msg in consumer.consume(10_000, 0.5):
                assert msg.error() is None, msg.error()
                out[msg.partition()].append(msg)
                got += 1
    finally:
        consumer.close()
    assert got == count, f"read {got} of {count} records of {topic} within {DEADLINE_S} s"
    return out


class Reports:
    """Delivery reports, thread-safe: (err, msg) in the order they ran."""

    def __init__(self) -> None:
        self.items: list[tuple[KafkaError | None, Message]] = []
        self.lock = threading.Lock()

    def __call__(self, err: KafkaError | None, msg: Message) -> None:
        with self.lock:
            self.items.append((err, msg))

    @property
    def errors(self) -> list[KafkaError]:
        return [e for e, _ in self.items if e is not None]

    def offsets(self) -> dict[int, list[int]]:
        out: dict[int, list[int]] = defaultdict(list)
        for err, msg in self.items:
            assert err is None, err
            out[msg.partition()].append(msg.offset())
        return out


def test_every_codec_round_trips_with_keys_headers_and_timestamps(broker: BrokerProcess) -> None:
    base = int(time.time() * 1000) - 60_000
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        topic = f"codec-{codec}"
        reports = Reports()
        with Producer(
            {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 2}
        ) as p:
            for i in range(300):
                headers = [("i", str(i).encode()), ("none", None)] if i % 3 == 0 else None
                p.produce(topic, value=f"value-{i}", key=b"key-%d" % (i % 7), on_delivery=reports,
                          timestamp=base + i if i % 2 == 0 else 0, headers=headers)  # fmt: skip
            assert p.flush(DEADLINE_S) == 0
            assert len(p) == 0
        assert len(reports.items) == 300 and not reports.errors
        got = read_back(broker.bootstrap, topic, 1, 300)[0]
        assert [m.value() for m in got] == [f"value-{i}".encode() for i in range(300)], codec
        assert [m.key() for m in got] == [b"key-%d" % (i % 7) for i in range(300)]
        for i, m in enumerate(got):
            kind, stamp = m.timestamp()
            assert kind == TIMESTAMP_CREATE_TIME
            if i % 2 == 0:
                assert stamp == base + i
            else:
                assert abs(stamp - time.time() * 1000) < 60_000
            if i % 3 == 0:
                assert m.headers() == [("i", str(i).encode()), ("none", None)]
            else:
                assert not m.headers()
        # The delivery reports carry what was written, with its offset.
        by_offset = {msg.offset(): msg for _, msg in reports.items}
        assert sorted(by_offset) == list(range(300))
        assert by_offset[3].headers() == [("i", b"3"), ("none", None)] and by_offset[4].timestamp() == (
            TIMESTAMP_CREATE_TIME,
            base + 4,
        )


def test_callbacks_report_offsets_in_order_per_partition(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "ordered", 4)
    reports = Reports()
    p = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20, "batch.num.messages": 50})
    keys = [b"k%d" % (i % 13) for i in range(2000)]
    for i, key in enumerate(keys):
        p.produce("ordered", b"%d" % i, key=key, callback=reports)
    assert len(p) == 2000, "queued records count until their reports are served"
    assert p.flush(DEADLINE_S) == 0 and len(p) == 0
    assert p.poll(0) == 0
    offsets = reports.offsets()
    assert sum(map(len, offsets.values())) == 2000
    for partition, seen in offsets.items():
        assert seen == list(range(len(seen))), f"partition {partition}: offsets out of order"
    for _, msg in reports.items:
        assert msg.partition() == murmur2_partition(msg.key(), 4), "keyed records go where Kafka puts them"
    values_by_partition = read_back(broker.bootstrap, "ordered", 4, 2000)
    for msgs in values_by_partition.values():
        numbers = [int(m.value()) for m in msgs]
        assert numbers == sorted(numbers), "production order kept per partition"
    metadata = p.list_topics("ordered", timeout=10)
    assert sorted(metadata.topics["ordered"].partitions) == [0, 1, 2, 3]
    assert list(metadata.brokers) == [0]
    p.close(5)


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks(broker: BrokerProcess, acks: str) -> None:
    reports = Reports()
    topic = f"acks-{acks}"
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": acks, "linger.ms": 1}) as p:
        for i in range(100):
            p.produce(topic, b"%d" % i, on_delivery=reports)
        assert p.flush(DEADLINE_S) == 0
    assert len(reports.items) == 100 and not reports.errors
    offsets = [m.offset() for _, m in reports.items]
    if acks == "0":
        assert set(offsets) == {-1}, "acks=0: no answer, no offset"
    else:
        assert offsets == list(range(100))
    got = read_back(broker.bootstrap, topic, 1, 100)[0]
    assert [m.value() for m in got] == [b"%d" % i for i in range(100)]


def test_idempotence_settings_follow_kafka(broker: BrokerProcess) -> None:
    with pytest.raises(ConfigError, match="acks"):
        Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": 1})
    with pytest.raises(ConfigError, match=r"in\.flight"):
        Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": "true",
                  "max.in.flight.requests.per.connection": 6})  # fmt: skip
    # acks=1 alone turns idempotence off (Kafka 3.x), and works.
    with Producer({"bootstrap.servers": broker.bootstrap, "acks": 1}) as p:
        assert p._sender.idempotence is None
        p.produce("idem-off", b"x")
        assert p.flush(DEADLINE_S) == 0


def test_produce_batch_keyed_and_keyless(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "bulk", 3)
    reports = Reports()
    values = [b"v%06d" % i for i in range(30_000)]
    keys = [b"key%d" % (i % 101) for i in range(30_000)]
    with Producer({"bootstrap.servers": broker.bootstrap, "batch.num.messages": 4000}) as p:
        assert p.produce_batch("bulk", values, keys=keys, on_delivery=reports) == 30_000
        assert p.produce_batch("bulk", ["s1", "s2", None], partition=2) == 3
        assert p.flush(DEADLINE_S) == 0
    assert len(reports.items) == 30_000 and not reports.errors
    got = read_back(broker.bootstrap, "bulk", 3, 30_003)
    expected: dict[int, list[bytes]] = defaultdict(list)
    for key, value in zip(keys, values, strict=True):
        expected[murmur2_partition(key, 3)].append(value)
    expected[2] += [b"s1", b"s2"]
    for partition in range(3):
        seen = [m.value() for m in got[partition]]
        assert seen[: len(expected[partition])] == expected[partition]
    assert got[2][-1].value() is None
    assert {m.partition() for _, m in reports.items} == {0, 1, 2}


def test_unknown_topic_without_auto_create_fails_clearly(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    reports = Reports()
    p = Producer({"bootstrap.servers": broker.bootstrap})
    started = time.monotonic()
    p.produce("nowhere", b"x", on_delivery=reports)
    assert p.flush(10) == 0
    assert time.monotonic() - started < 5
    [error] = reports.errors
    assert error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART and "nowhere" in error.str()
    with pytest.raises(KafkaException) as raised:
        p.produce("nowhere", b"y")
    assert raised.value.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    with pytest.raises(KafkaException) as raised:
        p.produce_batch("nowhere", [b"z"])
    assert raised.value.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # A partition the topic lacks is refused at once.
    create_topic(broker.bootstrap, "two", 2)
    p.produce("two", b"ok", partition=1)
    assert p.flush(10) == 0
    with pytest.raises(KafkaException) as raised:
        p.produce("two", b"x", partition=5)
    assert raised.value.error.code() == KafkaError._UNKNOWN_PARTITION
    p.close(5)


def test_record_over_message_max_bytes_is_refused_at_once(broker: BrokerProcess) -> None:
    with Producer({"bootstrap.servers": broker.bootstrap, "message.max.bytes": 10_000}) as p:
        with pytest.raises(KafkaException) as raised:
            p.produce("big", b"x" * 10_000)
        assert raised.value.error.code() == KafkaError.MSG_SIZE_TOO_LARGE
        with pytest.raises(KafkaException):
            p.produce_batch("big", [b"x", b"y" * 20_000])
        p.produce("big", b"x" * 9_000)
        assert p.flush(DEADLINE_S) == 0
        assert len(p) == 0


def test_nothing_listening_fails_within_the_setup_timeout(tmp_path: Any) -> None:
    errors: list[KafkaError] = []
    reports = Reports()
    config = {
        "bootstrap.servers": f"127.0.0.1:{free_port()}",
        "socket.connection.setup.timeout.ms": 1000,
        "max.block.ms": 2000,
        "error_cb": errors.append,
    }
    started = time.monotonic()
    p = Producer(config)
    p.produce("t", b"x", on_delivery=reports)
    while not errors and time.monotonic() - started < 5:
        p.poll(0.1)
    assert errors and errors[0].code() == KafkaError._ALL_BROKERS_DOWN, errors
    assert time.monotonic() - started < 3, "error_cb hears of it within the connection setup timeout"
    assert p.flush(10) == 0
    assert time.monotonic() - started < 6
    [error] = reports.errors
    assert error.code() == KafkaError._MSG_TIMED_OUT and "max.block.ms" in error.str()
    p.close(1)


def test_idempotent_retries_across_a_broker_kill_lose_and_duplicate_nothing(broker_factory: Any) -> None:
    broker = broker_factory()
    create_topic(broker.bootstrap, "durable", 3)
    count = 30_000
    delivered = Reports()
    p = Producer({
        "bootstrap.servers": broker.bootstrap, "linger.ms": 5, "batch.num.messages": 500,
        "request.timeout.ms": 5000, "retry.backoff.ms": 50, "reconnect.backoff.max.ms": 500,
        "socket.connection.setup.timeout.ms": 2000,
    })  # fmt: skip
    assert p._sender.idempotence is not None, "idempotence is on by default"
    for i in range(count):
        p.produce("durable", b"%d" % i, key=b"%d" % (i % 17), on_delivery=delivered)
        if i == count // 3:
            p.flush(DEADLINE_S)
        if i == count // 2:
            p.poll(0)
            broker.kill()  # kill -9 with requests in flight
        if i == (2 * count) // 3:
            broker.restart()
        if i % 1000 == 0:
            p.poll(0)
    assert p.flush(60) == 0
    assert p._sender.retried > 0, "the broker's death was noticed and retried through"
    assert p._sender.resets == 0, "no sequence reset: every retry kept its sequence"
    assert len(delivered.items) == count
    assert not delivered.errors, delivered.errors[:3]
    got = read_back(broker.bootstrap, "durable", 3, count)
    seen = [int(m.value()) for msgs in got.values() for m in msgs]
    assert sorted(seen) == list(range(count)), "every value exactly once"
    for partition, msgs in got.items():
        numbers = [int(m.value()) for m in msgs]
        assert numbers == sorted(numbers), f"partition {partition} out of production order"
    p.close(5)


def test_embedded_produce_then_read_back(tmp_path: Any) -> None:
    reports = Reports()
    acks: list[tuple[int, KafkaError | None]] = []

    class Upper:
        def on_send(self, msg: Message) -> Message:
            msg.set_value(msg.value().upper())
            return msg

        def on_acknowledgement(self, msg: Message, err: KafkaError | None) -> None:
            acks.append((msg.offset(), err))

    class Broken:
        def on_send(self, msg: Message) -> None:
            raise RuntimeError("interceptor errors are logged, not raised")

    data = os.path.join(str(tmp_path), "data")
    with Producer({
        "bootstrap.servers": f"embedded://{data}",
        "interceptors": [Broken(), Upper()],
        "value.serializer": lambda s: s.encode("ascii"),
        "on_delivery": reports,
    }) as p:  # fmt: skip
        for i in range(50):
            p.produce("local", f"v{i}", key=b"k")
        assert p.flush(DEADLINE_S) == 0
        p.produce_batch("local", ["w1", "w2"])
        assert p.flush(DEADLINE_S) == 0
    assert len(reports.items) == 52 and not reports.errors
    assert sorted(offset for offset, _ in acks) == list(range(52)) and all(e is None for _, e in acks)
    with Store(data) as store:
        log = store.log("local", 0)
        records = []
        offset = 0
        while offset < log.log_end_offset:
            chunk = log.read(offset).records
            records += chunk
            offset = chunk[-1].offset + 1
    assert [r.value for r in records] == [f"V{i}".encode() for i in range(50)] + [b"W1", b"W2"]
    assert [r.key for r in records[:50]] == [b"k"] * 50


def test_produce_after_close_and_buffer_full(broker: BrokerProcess) -> None:
    p = Producer({
        "bootstrap.servers": broker.bootstrap, "queue.buffering.max.messages": 10, "max.block.ms": 300,
        "linger.ms": 60_000, "batch.num.messages": 100,
    })  # fmt: skip
    p.produce("full", b"first")
    assert p.flush(DEADLINE_S) == 0
    for i in range(10):
        p.produce("full", b"%d" % i)
    started = time.monotonic()
    with pytest.raises(BufferError):
        p.produce("full", b"one too many")
    assert 0.25 < time.monotonic() - started < 3
    assert p.flush(DEADLINE_S) == 0
    p.produce("full", b"room again")
    assert p.close(DEADLINE_S) == 0
    with pytest.raises(KafkaException) as raised:
        p.produce("full", b"closed")
    assert raised.value.error.code() == KafkaError._DESTROY


def _lossy(p: Producer, rewrite: Any) -> list[int]:
    """Route the producer's Produce futures through ``rewrite(n, future) -> future``."""
    cluster = p._cluster
    send = cluster.send
    calls: list[int] = []

    def lossy_send(node: int | None, api_key: int, fields: dict[str, Any], **kw: Any) -> Any:
        if api_key != 0:
            return send(node, api_key, fields, **kw)
        calls.append(len(calls))
        return rewrite(len(calls) - 1, send, node, fields, kw)

    cluster.send = lossy_send  # type: ignore[method-assign]
    return calls


def _refused(fields: dict[str, Any], code: int) -> Any:
    """A settled future: a Produce answer refusing every partition of ``fields`` with ``code``."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    answer = SimpleNamespace(responses=[
        SimpleNamespace(name=t["name"], partition_responses=[
            SimpleNamespace(index=pd["index"], error_code=code, base_offset=-1, log_append_time=None,
                            error_message="refused by the test")
            for pd in t["partition_data"]
        ]) for t in fields["topic_data"]
    ])  # fmt: skip
    refused: Future[Any] = Future()
    refused.set_result(answer)
    return refused


def test_a_lost_answer_is_retried_and_deduplicated(tmp_path: Any) -> None:
    from concurrent.futures import Future

    def drop_first_answer(n: int, send: Any, node: Any, fields: Any, kw: Any) -> Any:
        real = send(node, 0, fields, **kw)
        if n:
            return real
        lost: Future[Any] = Future()
        real.add_done_callback(  # the broker appended it; the client never hears so
            lambda _: lost.set_exception(KafkaException(KafkaError(KafkaError._TRANSPORT, "answer lost")))
        )
        return lost

    reports = Reports()
    data = os.path.join(str(tmp_path), "data")
    with Producer({"bootstrap.servers": f"embedded://{data}", "retry.backoff.ms": 10}) as p:
        calls = _lossy(p, drop_first_answer)
        p.produce_batch("dedupe", [b"a", b"b", b"c"], on_delivery=reports)
        assert p.flush(DEADLINE_S) == 0
        p.produce("dedupe", b"d", on_delivery=reports)
        assert p.flush(DEADLINE_S) == 0
        assert len(calls) >= 3 and p._sender.retried >= 1 and p._sender.resets == 0
    assert not reports.errors and len(reports.items) == 4
    with Store(data) as store:
        values = [r.value for r in store.log("dedupe", 0).read(0).records]
    assert values == [b"a", b"b", b"c", b"d"], "the retry of an appended batch is not appended again"


def test_an_out_of_order_sequence_resets_the_producer_id(tmp_path: Any) -> None:

    refused_ids: list[int] = []

    def refuse_first(n: int, send: Any, node: Any, fields: Any, kw: Any) -> Any:
        if n:
            return send(node, 0, fields, **kw)
        records = fields["topic_data"][0]["partition_data"][0]["records"]
        refused_ids.extend(b.producer_id for b in parse_batches(records))
        return _refused(fields, 45)

    reports = Reports()
    data = os.path.join(str(tmp_path), "data")
    with Producer({"bootstrap.servers": f"embedded://{data}"}) as p:
        _lossy(p, refuse_first)
        p.produce("reset", b"lost", on_delivery=reports)
        assert p.flush(DEADLINE_S) == 0
        p.produce("reset", b"after", on_delivery=reports)
        assert p.flush(DEADLINE_S) == 0
        assert p._sender.resets == 1
        assert refused_ids and refused_ids[0] >= 0
        assert p._sender.idempotence.producer_id not in (-1, refused_ids[0])  # type: ignore[union-attr]
    [(err, msg), (ok, after)] = reports.items
    assert err is not None and err.code() == 45 and msg.value() == b"lost"
    assert ok is None and after.offset() == 0


def test_a_fatal_answer_fails_the_producer_with_a_clear_exception(tmp_path: Any) -> None:
    """INVALID_PRODUCER_EPOCH (a newer producer took over) is fatal, as in Kafka: the batch fails,
    and every later produce() raises a fatal KafkaException saying to create a new producer."""

    def fence(n: int, send: Any, node: Any, fields: Any, kw: Any) -> Any:
        return _refused(fields, 47)

    reports = Reports()
    with Producer({"bootstrap.servers": f"embedded://{tmp_path}"}) as p:
        _lossy(p, fence)
        p.produce("fenced", b"first", on_delivery=reports)
        assert p.flush(DEADLINE_S) == 0
        [(err, msg)] = reports.items
        assert err is not None and err.code() == 47 and msg.value() == b"first"
        for call in (lambda: p.produce("fenced", b"second"), lambda: p.produce_batch("fenced", [b"third"])):
            with pytest.raises(KafkaException) as raised:
                call()
            error = raised.value.args[0]
            assert error.fatal() and error.code() == KafkaError._FATAL
            assert "INVALID_PRODUCER_EPOCH" in error.str() and "create a new producer" in error.str()

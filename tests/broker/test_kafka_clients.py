"""Real Kafka clients (confluent-kafka, kafka-python) against a broker process."""

from __future__ import annotations

import os
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KTopicPartition

from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
DEADLINE_S = 30


def produce_confluent(bootstrap: str, topic: str, messages: list[dict[str, Any]], **config: Any) -> list[Any]:
    """Produce and wait for every delivery report; returns the reports (msg or error)."""
    reports: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, **config})

    def on_delivery(err: Any, msg: Any) -> None:
        reports.append(err or msg)

    for message in messages:
        producer.produce(topic, on_delivery=on_delivery, **message)
        producer.poll(0)
    assert producer.flush(DEADLINE_S) == 0
    return reports


def consume_confluent(
    bootstrap: str, topic: str, count: int, partition: int = 0, offset: int = 0
) -> list[Any]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, partition, offset)])
    got: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count - len(got), timeout=1):
                assert msg.error() is None, msg.error()
                got.append(msg)
    finally:
        consumer.close()
    return got


def consume_kafka_python(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=5000
    )
    consumer.assign([KTopicPartition(topic, 0)])
    got: list[Any] = []
    deadline = time.monotonic() + DEADLINE_S
    try:
        for record in consumer:
            got.append(record)
            if len(got) >= count or time.monotonic() > deadline:
                break
    finally:
        consumer.close()
    return got


def sample_messages(n: int, prefix: str = "") -> list[dict[str, Any]]:
    base = 1_700_000_000_000
    return [
        {
            "key": f"{prefix}key-{i}".encode(),
            "value": f"{prefix}value-{i}-".encode() * (1 + i % 7),
            "headers": [("h1", f"{i}".encode()), ("h2", None if i % 3 == 0 else b"x")],
            "timestamp": base + i,
        }
        for i in range(n)
    ]


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_round_trip_every_codec(broker: BrokerProcess, codec: str) -> None:
    topic = f"rt-{codec}"
    messages = sample_messages(300)
    reports = produce_confluent(
        broker.bootstrap, topic, messages, **{"compression.type": codec, "linger.ms": 5}
    )
    assert all(not isinstance(r, KafkaError) for r in reports)
    assert sorted(r.offset() for r in reports) == list(range(300))
    got = consume_confluent(broker.bootstrap, topic, 300)
    assert [m.offset() for m in got] == list(range(300))
    for sent, msg in zip(messages, got, strict=True):
        assert msg.key() == sent["key"]
        assert msg.value() == sent["value"]
        assert msg.timestamp() == (1, sent["timestamp"])  # CreateTime
        assert msg.headers() == sent["headers"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd", None])
def test_kafka_python_round_trip_every_codec(broker: BrokerProcess, codec: str | None) -> None:
    topic = f"kp-{codec}"
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type=codec, linger_ms=5)
    futures = [
        producer.send(
            topic, key=b"k%d" % i, value=b"v%d" % i, headers=[("n", b"%d" % i)], timestamp_ms=1_000_000 + i
        )
        for i in range(200)
    ]
    producer.flush(DEADLINE_S)
    offsets = [f.get(DEADLINE_S).offset for f in futures]
    producer.close()
    assert offsets == list(range(200))
    got = consume_kafka_python(broker.bootstrap, topic, 200)
    assert [(r.offset, r.key, r.value, r.timestamp, r.headers) for r in got] == [
        (i, b"k%d" % i, b"v%d" % i, 1_000_000 + i, [("n", b"%d" % i)]) for i in range(200)
    ]


def test_cross_client(broker: BrokerProcess) -> None:
    """kafka-python reads what librdkafka wrote, and the other way round."""
    produce_confluent(broker.bootstrap, "cross", sample_messages(50), **{"compression.type": "lz4"})
    got = consume_kafka_python(broker.bootstrap, "cross", 50)
    assert [r.key for r in got] == [m["key"] for m in sample_messages(50)]
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, compression_type="zstd")
    for i in range(50):
        producer.send("cross2", value=b"p%d" % i)
    producer.flush(DEADLINE_S)
    producer.close()
    assert [m.value() for m in consume_confluent(broker.bootstrap, "cross2", 50)] == [
        b"p%d" % i for i in range(50)
    ]


@pytest.mark.parametrize("acks", [0, 1, -1])
def test_acks(broker: BrokerProcess, acks: int) -> None:
    topic = f"acks{acks + 1}"
    reports = produce_confluent(
        broker.bootstrap, topic, [{"value": b"m%d" % i} for i in range(500)], acks=acks
    )
    assert all(not isinstance(r, KafkaError) for r in reports)
    if acks != 0:  # with acks=0 the client never learns offsets
        assert sorted(r.offset() for r in reports) == list(range(500))
    got = consume_confluent(broker.bootstrap, topic, 500)
    assert [m.value() for m in got] == [b"m%d" % i for i in range(500)]


def test_acks_all_needs_min_insync_replicas(broker_factory: Any) -> None:
    broker = broker_factory({"min.insync.replicas": "2"})
    reports = produce_confluent(
        broker.bootstrap, "misr", [{"value": b"x"}], acks=-1, retries=0, **{"message.timeout.ms": 5000}
    )
    assert isinstance(reports[0], KafkaError)
    assert reports[0].code() == KafkaError.NOT_ENOUGH_REPLICAS
    reports = produce_confluent(broker.bootstrap, "misr", [{"value": b"x"}], acks=1)
    assert reports[0].offset() == 0


def test_idempotent_producers(broker: BrokerProcess) -> None:
    messages = [{"value": b"i%d" % i} for i in range(2000)]
    reports = produce_confluent(
        broker.bootstrap,
        "idem",
        messages,
        **{"enable.idempotence": True, "linger.ms": 1, "batch.num.messages": 100},
    )
    assert sorted(r.offset() for r in reports) == list(range(2000))
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, enable_idempotence=True)
    for i in range(100):
        producer.send("idem", value=b"j%d" % i)
    producer.flush(DEADLINE_S)
    producer.close()
    got = consume_confluent(broker.bootstrap, "idem", 2100)
    assert [m.value() for m in got] == [m["value"] for m in messages] + [b"j%d" % i for i in range(100)]


def test_message_near_max_bytes(broker_factory: Any) -> None:
    broker = broker_factory({"message.max.bytes": "200000"})
    ok = produce_confluent(
        broker.bootstrap, "big", [{"value": b"a" * 199_000}], **{"message.max.bytes": 1_000_000}
    )
    assert ok[0].offset() == 0
    too_big = produce_confluent(
        broker.bootstrap, "big", [{"value": b"b" * 201_000}], **{"message.max.bytes": 1_000_000, "retries": 0}
    )
    assert isinstance(too_big[0], KafkaError)
    assert too_big[0].code() == KafkaError.MSG_SIZE_TOO_LARGE
    assert [len(m.value()) for m in consume_confluent(broker.bootstrap, "big", 1)] == [199_000]


def test_list_offsets_by_timestamp(broker: BrokerProcess) -> None:
    base = 1_600_000_000_000
    messages = [{"value": b"t%d" % i, "timestamp": base + 1000 * i} for i in range(100)]
    produce_confluent(broker.bootstrap, "times", messages, **{"linger.ms": 0, "batch.num.messages": 7})
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused"})
    try:
        # One partition per call: a second entry for the same partition replaces the first.
        asked = [base + 1000 * i for i in (0, 10, 55, 99)]
        asked.append(base + 1000 * 99 + 1)  # after every record
        asked.append(base + 10_500)  # between records 10 and 11
        found = [
            consumer.offsets_for_times([TopicPartition("times", 0, t)], timeout=10)[0].offset for t in asked
        ]
        assert found == [0, 10, 55, 99, -1, 11]
        low, high = consumer.get_watermark_offsets(TopicPartition("times", 0), timeout=10)
        assert (low, high) == (0, 100)
    finally:
        consumer.close()
    kp = KafkaConsumer(bootstrap_servers=broker.bootstrap)
    try:
        tp = KTopicPartition("times", 0)
        answer = kp.offsets_for_times({tp: base + 20_000})[tp]
        assert (answer.offset, answer.timestamp) == (20, base + 20_000)
        assert kp.beginning_offsets([tp]) == {tp: 0}
        assert kp.end_offsets([tp]) == {tp: 100}
    finally:
        kp.close()


def test_unknown_topic_without_auto_create(broker_factory: Any) -> None:
    broker = broker_factory({"auto.create.topics.enable": "false"})
    producer = Producer({"bootstrap.servers": broker.bootstrap, "message.timeout.ms": 3000})
    errors: list[Any] = []
    producer.produce("missing", value=b"x", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert errors and errors[0] is not None
    assert errors[0].code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._MSG_TIMED_OUT)
    metadata = producer.list_topics(timeout=5)
    assert "missing" not in metadata.topics


def test_restart_after_sigkill_loses_nothing_acknowledged(broker: BrokerProcess) -> None:
    """kill -9 the broker mid-stream, restart it: every acknowledged record is there, once."""
    acked: list[bytes] = []
    failed: list[bytes] = []
    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": 2,
            "message.timeout.ms": 60_000,
            "reconnect.backoff.ms": 50,
            "reconnect.backoff.max.ms": 200,
        }
    )

    def on_delivery(err: Any, msg: Any) -> None:
        (failed if err else acked).append(msg.value())

    sent = 0

    def send(count: int) -> None:
        nonlocal sent
        for _ in range(count):
            while True:
                try:
                    producer.produce("crashy", value=b"r%06d" % sent, on_delivery=on_delivery)
                    break
                except BufferError:
                    producer.poll(0.05)
            sent += 1
            producer.poll(0)

    deadline = time.monotonic() + 30
    while len(acked) < 5_000 and time.monotonic() < deadline:  # a stream in flight...
        send(500)
        producer.poll(0.01)
    send(2_000)
    broker.kill()  # ...killed with batches unacknowledged
    acked_at_kill = len(acked)
    send(3_000)  # queued while the broker is down
    producer.poll(0.5)
    broker.restart()
    send(5_000)
    assert producer.flush(60) == 0
    assert acked_at_kill < sent
    assert not failed, failed[:5]
    assert len(acked) == sent
    got = consume_confluent(broker.bootstrap, "crashy", sent)
    values = [m.value() for m in got]
    assert len(values) == len(set(values)), "an idempotent producer's retry was stored twice"
    assert set(values) == set(acked)
    assert values == sorted(values), "records out of order"


def test_sigterm_is_clean_and_data_survives(broker: BrokerProcess) -> None:
    produce_confluent(broker.bootstrap, "durable", [{"value": b"d%d" % i} for i in range(100)])
    assert broker.stop() == 0
    # A clean close leaves Kafka's clean-shutdown marker, so the restart skips recovery.
    assert os.path.exists(os.path.join(broker.data_dir, ".kafka_cleanshutdown"))
    broker.restart()
    assert [m.value() for m in consume_confluent(broker.bootstrap, "durable", 100)] == [
        b"d%d" % i for i in range(100)
    ]


def test_aiokafka(broker: BrokerProcess) -> None:
    """aiokafka 0.14: idempotent produce with headers, consume, offsets by time."""
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
    from aiokafka import TopicPartition as ATopicPartition

    async def scenario() -> tuple[list[Any], list[Any], int | None]:
        producer = AIOKafkaProducer(
            bootstrap_servers=broker.bootstrap, enable_idempotence=True, compression_type="lz4"
        )
        await producer.start()
        try:
            sent = [
                await producer.send_and_wait("aio", b"v%d" % i, key=b"k", headers=[("a", b"%d" % i)])
                for i in range(20)
            ]
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest")
        await consumer.start()
        try:
            tp = ATopicPartition("aio", 0)
            consumer.assign([tp])
            got: list[Any] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < 20 and time.monotonic() < deadline:
                for messages in (await consumer.getmany(timeout_ms=500)).values():
                    got += messages
            found = (await consumer.offsets_for_times({tp: sent[5].timestamp}))[tp]
        finally:
            await consumer.stop()
        return sent, got, found.offset if found else None

    sent, got, by_time = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert [m.offset for m in sent] == list(range(20))
    assert [(m.offset, m.value, m.headers) for m in got] == [
        (i, b"v%d" % i, (("a", b"%d" % i),)) for i in range(20)
    ]
    # The first record at or after the timestamp (records can share a millisecond).
    assert by_time is not None
    assert sent[by_time].timestamp == sent[5].timestamp
    assert by_time == 0 or sent[by_time - 1].timestamp < sent[5].timestamp


def test_compacted_topic_refuses_records_without_keys(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])
    futures["compacted"].result(10)
    keyless = produce_confluent(broker.bootstrap, "compacted", [{"value": b"no key"}], retries=0)
    assert isinstance(keyless[0], KafkaError)
    assert keyless[0].code() == KafkaError.INVALID_RECORD
    keyed = produce_confluent(broker.bootstrap, "compacted", [{"key": b"k", "value": b"v"}])
    assert keyed[0].offset() == 0

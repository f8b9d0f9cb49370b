"""Transactions with the pure-Python clients against a broker process: kafka-python's
``KafkaProducer(transactional_id=...)`` and aiokafka's ``AIOKafkaProducer`` (commit and abort),
read back by a read_committed consumer of another client and of the same one."""

from __future__ import annotations

import asyncio
import time

import pytest

from tests.kit.brokerkit import BrokerProcess, create_topic, read_values

pytestmark = pytest.mark.integration


def test_kafka_python_commit_and_abort(broker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    create_topic(broker.bootstrap, "kp-txn", 2)
    producer = kafka.KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="kp-1", acks="all")
    try:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(40):
            producer.send("kp-txn", value=b"kept-%02d" % i, partition=i % 2)
        producer.commit_transaction()
        producer.begin_transaction()
        for i in range(25):
            producer.send("kp-txn", value=b"dropped-%02d" % i, partition=i % 2)
        producer.flush()
        producer.abort_transaction()
    finally:
        producer.close()
    kept = sorted(b"kept-%02d" % i for i in range(40))
    assert sorted(read_values(broker.bootstrap, "kp-txn", "read_committed", 40)) == kept
    assert len(read_values(broker.bootstrap, "kp-txn", "read_uncommitted", 65)) == 65

    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
        enable_auto_commit=False, consumer_timeout_ms=3000,
    )  # fmt: skip
    try:
        consumer.assign([kafka.TopicPartition("kp-txn", p) for p in (0, 1)])
        consumer.seek_to_beginning()
        values = [record.value for record in consumer]
    finally:
        consumer.close()
    assert sorted(values) == kept


def test_aiokafka_commit_and_abort(broker: BrokerProcess) -> None:
    aiokafka = pytest.importorskip("aiokafka")
    create_topic(broker.bootstrap, "aio-txn", 2)

    async def main() -> list[bytes]:
        producer = aiokafka.AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id="aio-1")
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(30):
                    await producer.send("aio-txn", value=b"kept-%02d" % i, partition=i % 2)
            with pytest.raises(RuntimeError):
                async with producer.transaction():
                    for i in range(20):
                        await producer.send("aio-txn", value=b"dropped-%02d" % i, partition=i % 2)
                    raise RuntimeError("abort this one")  # the context manager aborts
        finally:
            await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(
            bootstrap_servers=broker.bootstrap, isolation_level="read_committed", auto_offset_reset="earliest",
            enable_auto_commit=False,
        )  # fmt: skip
        await consumer.start()
        try:
            consumer.assign([aiokafka.TopicPartition("aio-txn", p) for p in (0, 1)])
            await consumer.seek_to_beginning()
            values: list[bytes] = []
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline and len(values) < 31:  # one more than expected: none comes
                batches = await consumer.getmany(timeout_ms=500)
                values.extend(record.value for records in batches.values() for record in records)
                if len(values) >= 30 and not batches:
                    break
        finally:
            await consumer.stop()
        return values

    kept = sorted(b"kept-%02d" % i for i in range(30))
    assert sorted(asyncio.run(main())) == kept
    assert sorted(read_values(broker.bootstrap, "aio-txn", "read_committed", 30)) == kept
    assert len(read_values(broker.bootstrap, "aio-txn", "read_uncommitted", 50)) == 50

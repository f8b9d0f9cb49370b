"""Helpers for tests of broker processes in one ZooKeeper cluster (the ``cluster`` fixture is in
zookeeper_fixtures.py): metadata as confluent-kafka's AdminClient sees it, and replicas' bytes."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from tests.kit.brokerkit import BrokerProcess, wait_until


def metadata(bootstrap: str, topic: str | None = None) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    found = metadata(bootstrap, topic).topics[topic].partitions
    return {p: found[p].leader for p in found}


def isrs(bootstrap: str, topic: str) -> dict[int, list[int]]:
    found = metadata(bootstrap, topic).topics[topic].partitions
    return {p: sorted(found[p].isrs) for p in found}


def broker_id(broker: BrokerProcess) -> int:
    return int(broker.overrides["broker.id"])


def segment_bytes(broker: BrokerProcess, topic: str, partition: int) -> bytes:
    """Every ``.log`` file of a replica, concatenated in offset order."""
    directory = os.path.join(broker.data_dir, f"{topic}-{partition}")
    names = sorted(n for n in os.listdir(directory) if n.endswith(".log"))
    chunks = []
    for name in names:
        with open(os.path.join(directory, name), "rb") as f:
            chunks.append(f.read())
    return b"".join(chunks)


def three_brokers(cluster: Callable[..., BrokerProcess], **overrides: str) -> dict[int, BrokerProcess]:
    brokers = {i: cluster(i, **overrides) for i in (1, 2, 3)}
    wait_until(
        lambda: all(len(metadata(b.bootstrap).brokers) == 3 for b in brokers.values()), "three brokers"
    )
    return brokers


def create_topic(bootstrap: str, topic: str, partitions: int, factor: int, **config: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, factor, config=config)])[topic].result(30)
    # As Kafka's TestUtils.createTopic: back once every partition has a leader in the metadata
    # (CreateTopics answers when the controller has written the topic, before brokers know it).
    wait_until(
        lambda: (found := leaders(bootstrap, topic)) and len(found) == partitions and min(found.values()) >= 0,
        f"a leader for every partition of {topic}",
        timeout=30,
    )


def produce_acked(
    bootstrap: str, topic: str, values: list[bytes], timeout: float = 60
) -> tuple[list[bytes], list[str]]:
    """(acknowledged values, errors) of an idempotent acks=all producer."""
    from confluent_kafka import Producer

    acked: list[bytes] = []
    errors: list[str] = []

    def report(err: object, msg: object) -> None:
        if err is None:
            acked.append(msg.value())  # type: ignore[attr-defined]
        else:
            errors.append(str(err))

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "message.timeout.ms": int(timeout * 1000), "linger.ms": 5})  # fmt: skip
    for value in values:
        producer.produce(topic, value=value, on_delivery=report)
        producer.poll(0)
    producer.flush(timeout + 5)
    return acked, errors


def consume_all(
    bootstrap: str, topic: str, expected: int, timeout: float = 60
) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every record, read from the start by an assigned consumer."""
    from confluent_kafka import Consumer, TopicPartition

    partitions = metadata(bootstrap, topic).topics[topic].partitions
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    while len(seen) < expected and time.monotonic() < deadline:
        for message in consumer.consume(1000, 0.5):
            if message.error() is None:
                seen.append((message.partition(), message.offset(), message.value()))
    consumer.close()
    return seen

"""Consumer groups in a cluster: each group's coordinator is the leader of its __consumer_offsets
partition (replicated like any topic), and moves with that leadership."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from logstore.coordinator.internal_topics import partition_for
from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, isrs, leaders, metadata

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

SETTINGS = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}


def _consume(bootstrap: str, group: str, count: int, timeout: float = 60) -> list[bytes]:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe(["g"])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        for message in consumer.consume(min(500, count - len(got)), 0.5):  # exactly ``count``
            if message.error() is None:
                got.append(message.value())
    consumer.commit(asynchronous=False)
    consumer.close()
    return got


def test_a_group_survives_its_coordinators_death(cluster: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = {i: cluster(i, **SETTINGS) for i in (1, 2, 3)}
    wait_until(lambda: len(metadata(brokers[1].bootstrap).brokers) == 3, "three brokers")
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("g", 2, 3, config={"min.insync.replicas": "2"})])["g"].result(30)
    producer = Producer({"bootstrap.servers": brokers[1].bootstrap, "acks": "all"})
    for i in range(400):
        producer.produce("g", b"v%03d" % i)
    assert producer.flush(30) == 0
    first = _consume(brokers[2].bootstrap, "readers", 200)
    assert len(first) == 200
    # The group's coordinator: the leader of its offsets partition (RF 3, like Kafka's default).
    offsets = metadata(brokers[1].bootstrap, "__consumer_offsets").topics["__consumer_offsets"].partitions
    assert all(len(p.replicas) == 3 for p in offsets.values())
    found: list[int | None] = []
    wait_until(
        lambda: found.append(_coordinator(brokers[1].bootstrap, "readers")) or found[-1] is not None,
        "described",
    )
    coordinator = found[-1]
    assert coordinator == leaders(brokers[1].bootstrap, "__consumer_offsets")[partition_for("readers", 3)]
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[1].bootstrap, "__consumer_offsets").values()),
               "offsets replicated")  # fmt: skip
    brokers[coordinator].kill()  # at once: an acknowledged commit is in the ISR already
    alive = [b for i, b in brokers.items() if i != coordinator]
    rest = _consume(alive[0].bootstrap, "readers", 400 - len(first))
    # The committed position moved with the coordinator: nothing read twice, nothing skipped.
    assert sorted(first + rest) == sorted(b"v%03d" % i for i in range(400))
    wait_until(
        lambda: _coordinator(alive[1].bootstrap, "readers") not in (None, coordinator), "a new coordinator"
    )


def _coordinator(bootstrap: str, group: str) -> int | None:
    from logstore.client.admin import AdminClient

    try:
        found = (
            AdminClient({"bootstrap.servers": bootstrap}).describe_consumer_groups([group])[group].result(5)
        )
    except Exception:  # a dead coordinator, or librdkafka's _DESTROY of its bootstrap handle: ask again
        return None
    return int(found.coordinator.id)


def test_a_commit_is_acknowledged_once_the_isr_has_it(cluster: Callable[..., BrokerProcess]) -> None:
    """Kafka's coordinator appends commits with acks=-1: with both followers of the group's
    offsets partition paused (still in the ISR), a commit is not acknowledged; after
    ``offsets.commit.timeout.ms`` it fails with COORDINATOR_NOT_AVAILABLE; once they are back it
    is acknowledged."""
    import os
    import signal

    from logstore.client import KafkaException, TopicPartition
    from logstore.client.admin import AdminClient, ConsumerGroupTopicPartitions

    settings = {**SETTINGS, "offsets.commit.timeout.ms": "1500", "replica.lag.time.max.ms": "60000"}
    brokers = {i: cluster(i, **settings) for i in (1, 2, 3)}
    wait_until(lambda: len(metadata(brokers[1].bootstrap).brokers) == 3, "three brokers")
    from confluent_kafka.admin import AdminClient as Confluent
    from confluent_kafka.admin import NewTopic

    creator = Confluent({"bootstrap.servers": brokers[1].bootstrap})
    creator.create_topics([NewTopic("g", 1, 3)])["g"].result(30)

    def commit(admin: AdminClient, offset: int) -> None:
        request = ConsumerGroupTopicPartitions("held", [TopicPartition("g", 0, offset)])
        result = admin.alter_consumer_group_offsets([request], request_timeout=20)["held"].result(20)
        error = result.topic_partitions[0].error
        if error is not None:
            raise KafkaException(error)

    found: list[int | None] = []
    wait_until(lambda: found.append(_coordinator(brokers[1].bootstrap, "held")) or found[-1] is not None,
               "a coordinator", timeout=60)  # fmt: skip
    leader = found[-1]
    assert leader is not None
    admin = AdminClient({"bootstrap.servers": brokers[leader].bootstrap})
    commit(admin, 1)  # the coordinator found and kept by the client
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[1].bootstrap, "__consumer_offsets").values()),
               "offsets replicated")  # fmt: skip
    followers = [b for i, b in brokers.items() if i != leader]
    for broker in followers:
        assert broker.proc is not None
        os.kill(broker.proc.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(KafkaException, match="COORDINATOR_NOT_AVAILABLE"):
            commit(admin, 2)
        assert time.monotonic() - started >= 1.5
    finally:
        for broker in followers:
            assert broker.proc is not None
            os.kill(broker.proc.pid, signal.SIGCONT)
    commit(admin, 3)
    admin.close()

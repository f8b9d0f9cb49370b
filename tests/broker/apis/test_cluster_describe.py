"""DescribeCluster and DescribeTopicPartitions in a three-broker cluster (a real ZooKeeper):
every broker answers them from its MetadataCache, so any broker gives the whole cluster,
the same controller, and the same partition state as Metadata."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.errors import ErrorCode
from kio.schema.metadata.v12.request import MetadataRequestTopic
from kio.schema.types import TopicName

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import BrokerProcess, broker_id, isrs, metadata
from tests.kit.wire import WireClient, request_class

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

TIMEOUT = 15


def call(broker: BrokerProcess, request: Any) -> Any:
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        return client.call(request)


def describe_cluster(broker: BrokerProcess) -> Any:
    return call(
        broker,
        request_class(60, 2)(
            include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=True
        ),
    )


def describe_partitions(
    broker: BrokerProcess, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Any:
    return call(
        broker,
        DescribeTopicPartitionsRequest(
            topics=tuple(TopicRequest(name=TopicName(name)) for name in topics),
            response_partition_limit=limit,  # type: ignore[arg-type]
            cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]),  # type: ignore[arg-type]
        ),
    )


def states_by_metadata(broker: BrokerProcess, topic: str) -> tuple[Any, list[tuple[Any, ...]]]:
    """(topic ID, per partition: index, leader, leader epoch, replicas, ISR, offline) from Metadata v12."""
    response = call(
        broker,
        request_class(3, 12)(
            topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        ),
    )
    (found,) = response.topics
    return found.topic_id, sorted(
        (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
        for p in found.partitions
    )


def states_by_describe(broker: BrokerProcess, topic: str) -> tuple[Any, list[tuple[Any, ...]]]:
    (found,) = describe_partitions(broker, [topic]).topics
    assert found.error_code == ErrorCode.none
    return found.topic_id, [
        (p.partition_index, p.leader_id, p.leader_epoch, p.replica_nodes, p.isr_nodes, p.offline_replicas)
        for p in found.partitions
    ]


def test_any_broker_describes_the_whole_cluster_and_its_partitions(
    cluster: Callable[..., BrokerProcess],
) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = {i: cluster(i, rack=f"r{i}") for i in (1, 2, 3)}
    wait_until(lambda: all(len(describe_cluster(b).brokers) == 3 for b in brokers.values()), "three brokers")
    # DescribeCluster from each broker: all three with their racks, and one controller.
    answers = {i: describe_cluster(b) for i, b in brokers.items()}
    expected = [(i, "127.0.0.1", brokers[i].port, f"r{i}", False) for i in (1, 2, 3)]
    controllers = set()
    for answer in answers.values():
        assert answer.error_code == ErrorCode.none
        assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in answer.brokers] == expected
        controllers.add(answer.controller_id)
    assert len(controllers) == 1 and controllers <= {1, 2, 3}
    assert len({a.cluster_id for a in answers.values()}) == 1
    assert {metadata(b.bootstrap).controller_id for b in brokers.values()} == controllers

    # Two partitions with three replicas each: two brokers lead one, the third leads nothing.
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    admin.create_topics([NewTopic("rf3", num_partitions=2, replication_factor=3)])["rf3"].result(30)
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[2].bootstrap, "rf3").values()), "ISR of three")

    def settled(broker: BrokerProcess) -> bool:
        states = states_by_metadata(broker, "rf3")[1]
        return len(states) == 2 and all(len(isr) == 3 for _, _, _, _, isr, _ in states)

    wait_until(lambda: all(settled(b) for b in brokers.values()), "every broker's cache at an ISR of three")
    leading = {leader for _, leader, *_ in states_by_metadata(brokers[1], "rf3")[1]}
    idle = next(b for b in brokers.values() if broker_id(b) not in leading)
    # The partition state as Metadata answers it, from the idle broker and from the others.
    for _ in range(20):  # (retried: an ISR change between the two requests would differ)
        described, by_metadata = states_by_describe(idle, "rf3"), states_by_metadata(idle, "rf3")
        if described == by_metadata:
            break
        time.sleep(0.25)
    assert described == by_metadata
    topic_id, states = described
    assert [s[0] for s in states] == [0, 1] and {s[1] for s in states} == leading
    for _, leader, epoch, replicas, isr, offline in states:
        assert sorted(replicas) == [1, 2, 3] and sorted(isr) == [1, 2, 3] and offline == ()
        assert leader in replicas and epoch >= 0
    for broker in brokers.values():
        assert states_by_describe(broker, "rf3") == described

    # The pages one broker starts, another goes on with; and an unknown topic (after the cursor's).
    first = describe_partitions(idle, ["rf3"], limit=1)
    assert [p.partition_index for p in first.topics[0].partitions] == [0]
    nxt = first.next_cursor
    assert (nxt.topic_name, nxt.partition_index) == ("rf3", 1)
    other = next(b for b in brokers.values() if b is not idle)
    rest = describe_partitions(other, ["zz-nope", "rf3", "before-rf3"], cursor=("rf3", 1))
    assert [(t.name, t.error_code, [p.partition_index for p in t.partitions]) for t in rest.topics] == [
        ("rf3", ErrorCode.none, [1]),
        ("zz-nope", ErrorCode.unknown_topic_or_partition, []),
    ]
    assert rest.topics[0].topic_id == topic_id and rest.next_cursor is None

"""DescribeTopicPartitions (key 75, KIP-966) against one broker process: raw kio requests,
kafka-python's ``describe_topic_partitions`` (which sends it), and confluent-kafka's
``describe_topics`` (which, in librdkafka 2.16, still sends Metadata v12: checked from its
protocol log). Also DescribeCluster's rack. The cluster case is tests/broker/apis/test_cluster_describe.py.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient
from kafka import KafkaAdminClient
from kio.schema.describe_topic_partitions.v0.request import (
    Cursor,
    DescribeTopicPartitionsRequest,
    TopicRequest,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName

from tests.kit.brokerkit import BrokerProcess, create_topic
from tests.kit.wire import WireClient, request_class

pytestmark = pytest.mark.integration

TIMEOUT = 15
# AclOperation codes Kafka allows on a topic (what it answers without an authorizer): READ 3,
# WRITE 4, CREATE 5, DELETE 6, ALTER 7, DESCRIBE 8, DESCRIBE_CONFIGS 10, ALTER_CONFIGS 11.
TOPIC_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))
ZERO = None  # the zero topic ID: kio reads it as None
SIZES = {"beta": 3, "alpha": 2, "gamma": 1}


def describe(
    broker: BrokerProcess, topics: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None
) -> Any:
    request = DescribeTopicPartitionsRequest(
        topics=tuple(TopicRequest(name=TopicName(name)) for name in topics),
        response_partition_limit=limit,  # type: ignore[arg-type]
        cursor=None if cursor is None else Cursor(topic_name=cursor[0], partition_index=cursor[1]),  # type: ignore[arg-type]
    )
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        return client.call(request)


def pages(response: Any) -> list[tuple[str, list[int]]]:
    """(topic, partition indexes) per topic of a response."""
    return [(t.name, [p.partition_index for p in t.partitions]) for t in response.topics]


def cursor_of(response: Any) -> tuple[str, int] | None:
    c = response.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def confluent_uuid(value: Any) -> uuid.UUID:
    mask = (1 << 64) - 1
    high, low = value.get_most_significant_bits() & mask, value.get_least_significant_bits() & mask
    return uuid.UUID(int=high << 64 | low)


def metadata_ids(broker: BrokerProcess) -> dict[str, uuid.UUID]:
    """Topic IDs as Metadata v12 answers them (every topic)."""
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        response = client.call(
            request_class(3, 12)(
                topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False
            )
        )
    return {t.name: t.topic_id for t in response.topics}


@pytest.fixture
def three_topics(broker: BrokerProcess) -> BrokerProcess:
    for name, partitions in SIZES.items():
        create_topic(broker.bootstrap, name, partitions)
    return broker


def test_every_topic_sorted_with_partition_details(three_topics: BrokerProcess) -> None:
    broker = three_topics
    ids = metadata_ids(broker)
    response = describe(broker, [])  # an empty list: every topic
    assert [t.name for t in response.topics] == sorted(ids) and cursor_of(response) is None
    assert {"alpha", "beta", "gamma"} <= set(ids)
    for topic in response.topics:
        assert topic.error_code == ErrorCode.none and topic.topic_id == ids[topic.name]
        assert topic.is_internal == topic.name.startswith("__")
        assert topic.topic_authorized_operations == TOPIC_OPERATIONS  # no authorizer: everything
    beta = next(t for t in response.topics if t.name == "beta")
    assert [p.partition_index for p in beta.partitions] == [0, 1, 2]
    for p in beta.partitions:  # alone: this broker (0) leads every partition, no epoch kept
        assert p.error_code == ErrorCode.none and p.leader_id == 0 and p.leader_epoch == -1
        assert (p.replica_nodes, p.isr_nodes, p.offline_replicas) == ((0,), (0,), ())
        assert (p.eligible_leader_replicas, p.last_known_elr) == ((), ())  # no ELR: empty, as Kafka


def test_the_partition_limit_pages_across_topics_with_the_cursor(three_topics: BrokerProcess) -> None:
    broker = three_topics
    named = ["gamma", "alpha", "beta", "alpha"]  # any order, a name twice: described once, sorted
    first = describe(broker, named, limit=2)
    # alpha's two partitions use the limit up: the cursor is the next topic, at partition 0.
    assert pages(first) == [("alpha", [0, 1])] and cursor_of(first) == ("beta", 0)
    second = describe(broker, named, limit=2, cursor=cursor_of(first))
    assert pages(second) == [("beta", [0, 1])] and cursor_of(second) == ("beta", 2)  # cut in a topic
    third = describe(broker, named, limit=2, cursor=cursor_of(second))
    assert pages(third) == [("beta", [2]), ("gamma", [0])] and cursor_of(third) is None

    # Every topic, one partition a page: each partition once, in order.
    walked: list[tuple[str, int]] = []
    cursor: tuple[str, int] | None = None
    for _ in range(100):
        page = describe(broker, [], limit=1, cursor=cursor)
        walked += [(name, index) for name, indexes in pages(page) for index in indexes]
        cursor = cursor_of(page)
        if cursor is None:
            break
    everything = describe(broker, [])
    assert walked == [(name, index) for name, indexes in pages(everything) for index in indexes]

    # A limit below 1 is 1 (Kafka's max(min(max.request.partition.size.limit, limit), 1)).
    for limit in (0, -5):
        page = describe(broker, ["beta"], limit=limit)
        assert pages(page) == [("beta", [0])] and cursor_of(page) == ("beta", 1)
    # A cursor past the topic's last partition: the topic, with no partitions; then the rest.
    page = describe(broker, ["beta", "gamma"], cursor=("beta", 7))
    assert pages(page) == [("beta", []), ("gamma", [0])] and cursor_of(page) is None
    # With every topic, the cursor's topic need not exist: topics after it follow.
    page = describe(broker, [], cursor=("b", 5))
    assert [name for name, _ in pages(page)][:2] == ["beta", "gamma"]
    assert pages(page)[0] == ("beta", [0, 1, 2])  # the cursor's index is for the cursor's topic only


def test_unknown_and_illegal_topics_and_a_bad_cursor(three_topics: BrokerProcess) -> None:
    broker = three_topics
    response = describe(broker, ["nope", "alpha", "bad name!"])
    assert pages(response) == [("alpha", [0, 1]), ("bad name!", []), ("nope", [])]
    _, bad, nope = response.topics
    assert (bad.error_code, nope.error_code) == (
        ErrorCode.invalid_topic_exception,
        ErrorCode.unknown_topic_or_partition,
    )
    for missing in (bad, nope):
        assert missing.topic_id == ZERO and not missing.is_internal
        assert missing.topic_authorized_operations == TOPIC_OPERATIONS
    assert describe(broker, ["__transaction_state"]).topics[0].is_internal  # unknown, yet internal
    # An unknown topic uses none of the limit.
    page = describe(broker, ["alpha", "alpha-missing", "beta"], limit=3)
    assert pages(page) == [("alpha", [0, 1]), ("alpha-missing", []), ("beta", [0])]
    assert cursor_of(page) == ("beta", 1)

    # The cursor's topic must be among the named ones, and its partition index not negative:
    # otherwise Kafka's error response, every named topic (request order) with INVALID_REQUEST.
    for topics, cursor in ((["beta", "alpha"], ("gamma", 0)), (["gamma", "beta"], ("beta", -1))):
        response = describe(broker, topics, cursor=cursor)
        assert pages(response) == [(name, []) for name in topics] and cursor_of(response) is None
        assert {t.error_code for t in response.topics} == {ErrorCode.invalid_request}
        assert {t.topic_id for t in response.topics} == {ZERO}
    response = describe(broker, [], cursor=("alpha", -1))
    assert response.topics == () and cursor_of(response) is None


def test_clients_describe_topics(three_topics: BrokerProcess) -> None:
    broker = three_topics
    ids = metadata_ids(broker)
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        advertised = client.call(request_class(18, 3)(client_software_name="t", client_software_version="1"))
    assert [(k.min_version, k.max_version) for k in advertised.api_keys if k.api_key == 75] == [(0, 0)]

    # kafka-python 3 sends DescribeTopicPartitions v0 for describe_topic_partitions().
    kadmin = KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)
    try:
        named = ["gamma", "beta", "missing"]
        answer = kadmin.describe_topic_partitions(named, response_partition_limit=3)
        rest = kadmin.describe_topic_partitions(named, cursor=answer["next_cursor"])
    finally:
        kadmin.close()
    assert [(t["name"], t["error_code"]) for t in answer["topics"]] == [("beta", 0)]
    assert answer["next_cursor"] == {"topic_name": "gamma", "partition_index": 0}
    assert [(t["name"], t["error_code"]) for t in rest["topics"]] == [("gamma", 0), ("missing", 3)]
    assert rest["next_cursor"] is None
    beta = answer["topics"][0]
    assert beta["topic_id"] == ids["beta"] and beta["topic_authorized_operations"] == TOPIC_OPERATIONS
    assert [(p["partition_index"], p["leader_id"], p["isr_nodes"]) for p in beta["partitions"]] == [
        (i, 0, [0]) for i in range(3)
    ]

    # confluent-kafka's describe_topics() works; librdkafka sends Metadata v12 for it, never
    # DescribeTopicPartitions, even though the broker advertises it.
    sent: list[str] = []

    class Sent(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            sent.append(record.getMessage())

    logger = logging.getLogger("test_describe_topic_partitions.librdkafka")
    logger.addHandler(Sent())
    logger.setLevel(logging.DEBUG)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, "debug": "protocol"}, logger=logger)
    futures = admin.describe_topics(TopicCollection(["beta", "missing"]), include_authorized_operations=True)
    described = futures["beta"].result(TIMEOUT)
    with pytest.raises(KafkaException) as info:
        futures["missing"].result(TIMEOUT)
    assert info.value.args[0].code() == ErrorCode.unknown_topic_or_partition.value
    assert confluent_uuid(described.topic_id) == ids["beta"] and not described.is_internal
    assert [
        (p.id, p.leader.id, [r.id for r in p.replicas], [r.id for r in p.isr]) for p in described.partitions
    ] == [(i, 0, [0], [0]) for i in range(3)]
    assert {op.value for op in described.authorized_operations} == {3, 4, 5, 6, 7, 8, 10, 11}
    admin.poll(0.2)
    requests = {line.split("Sent ", 1)[1].split(" ", 1)[0] for line in sent if "Sent " in line}
    assert "MetadataRequest" in requests and "DescribeTopicPartitionsRequest" not in requests
    assert any("Sent MetadataRequest (v12" in line for line in sent)


def test_describe_cluster_names_the_rack(broker_factory: Any) -> None:
    broker = broker_factory({"broker.rack": "rack-a"})
    with WireClient(broker.bootstrap, timeout=TIMEOUT) as client:
        response = client.call(
            request_class(60, 2)(
                include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False
            )
        )
    assert response.error_code == ErrorCode.none and response.controller_id == 0
    assert [(b.broker_id, b.host, b.port, b.rack, b.is_fenced) for b in response.brokers] == [
        (0, "127.0.0.1", broker.port, "rack-a", False)
    ]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    (node,) = admin.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT).nodes
    assert node.rack == "rack-a"  # librdkafka reads it from Metadata

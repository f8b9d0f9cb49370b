"""Admin APIs against a broker process: confluent-kafka's and kafka-python's admin clients.

librdkafka speaks the low versions (CreateTopics v4, DeleteTopics v1,
DescribeConfigs v1, CreatePartitions v0, DeleteRecords v1, DescribeCluster
v0); kafka-python 3 the high ones (CreateTopics v7, DeleteTopics v6,
DescribeLogDirs v4); a few raw kio requests cover what neither client sends.
"""

from __future__ import annotations

import datetime
import glob
import io
import os
import socket
import struct
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from kafka import KafkaAdminClient
from kafka.admin import ConfigResource as KConfigResource
from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

pytestmark = pytest.mark.integration

TIMEOUT = 15


# -- helpers -------------------------------------------------------------------


def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def kadmin(broker: Any) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=broker.bootstrap, request_timeout_ms=TIMEOUT * 1000)


def outcome(future: Any) -> int:
    """The Kafka error code a confluent admin future ends with (0 on success)."""
    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        return int(e.args[0].code())
    return 0


def error_of(future: Any) -> KafkaError:
    with pytest.raises(KafkaException) as info:
        future.result(TIMEOUT)
    error: KafkaError = info.value.args[0]
    return error


def create(client: AdminClient, *topics: NewTopic, **options: Any) -> dict[str, int]:
    return {name: outcome(f) for name, f in client.create_topics(list(topics), **options).items()}


def partition_counts(client: AdminClient) -> dict[str, int]:
    """Partitions of every topic a user made (the broker's internal ones left out)."""
    topics = client.list_topics(timeout=TIMEOUT).topics.items()
    return {name: len(t.partitions) for name, t in topics if not name.startswith("__")}


def describe(client: AdminClient, restype: ResourceType, name: str) -> dict[str, ConfigEntry]:
    (future,) = client.describe_configs([ConfigResource(restype, name)], request_timeout=TIMEOUT).values()
    result: dict[str, ConfigEntry] = future.result(TIMEOUT)
    return result


def produce(broker: Any, topic: str, count: int, partition: int = 0) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    for i in range(count):
        producer.produce(topic, value=f"value-{i}".encode() * 10, partition=partition)
    assert producer.flush(TIMEOUT) == 0


def consume_first(broker: Any, topic: str, reset: str) -> Any:
    """The first message (or error event) a consumer assigned at offset 0 gets."""
    consumer = Consumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": "admin-test",
            "enable.auto.commit": False,  # no group coordinator to commit to
            "auto.offset.reset": reset,
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    try:
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None:
                return msg
        raise AssertionError("nothing consumed")
    finally:
        consumer.close()


def watermarks(broker: Any, topic: str, partition: int = 0) -> tuple[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "admin-test"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=TIMEOUT)
        return low, high
    finally:
        consumer.close()


def call(broker: Any, request: Any) -> Any:
    """One raw kio request on a fresh connection; returns the decoded response."""
    cls = type(request)
    api_key, version, flexible = cls.__api_key__, cls.__version__, cls.__flexible__
    body = io.BytesIO()
    body.write(struct.pack(">hhih", api_key, version, 1, 4) + b"test" + (b"\x00" if flexible else b""))
    entity_writer(cls)(body, request)
    frame = body.getvalue()
    module = load_payload_module(api_key, version, EntityType.response)
    response_cls = next(
        v for v in vars(module).values() if getattr(v, "__type__", None) == EntityType.response
    )
    with socket.create_connection(("127.0.0.1", broker.port), timeout=TIMEOUT) as sock:
        sock.sendall(struct.pack(">i", len(frame)) + frame)
        stream = sock.makefile("rb")
        (size,) = struct.unpack(">i", stream.read(4))
        frame = stream.read(size)
    response, _ = entity_reader(response_cls)(frame, 4 + (1 if flexible else 0))
    return response


def request(api_key: int, version: int, **fields: Any) -> Any:
    """A kio request entity; nested entities come from ``schema(api_key, version)``."""
    module = schema(api_key, version)
    cls = next(v for k, v in vars(module).items() if k.endswith("Request") and hasattr(v, "__flexible__"))
    return cls(**fields)


def schema(api_key: int, version: int) -> Any:
    return load_payload_module(api_key, version, EntityType.request)


# -- CreateTopics / DeleteTopics -------------------------------------------------


def test_create_topics_with_configs_validate_only_and_errors(broker: Any) -> None:
    client = admin(broker)
    got = create(
        client,
        NewTopic("orders", 3, 1, config={"cleanup.policy": "compact", "retention.ms": "60000"}),
        NewTopic("assigned", 2, replica_assignment=[[0], [0]]),
        NewTopic("defaults"),
    )
    assert got == {"orders": 0, "assigned": 0, "defaults": 0}
    assert create(client, NewTopic("dry", 2), validate_only=True) == {"dry": 0}
    assert partition_counts(client) == {"orders": 3, "assigned": 2, "defaults": 1}

    config = describe(client, ResourceType.TOPIC, "orders")
    assert config["cleanup.policy"].value == "compact" and config["retention.ms"].value == "60000"
    assert config["retention.ms"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert config["segment.bytes"].source == ConfigSource.DEFAULT_CONFIG.value

    futures = client.create_topics(
        [
            NewTopic("orders", 1),
            NewTopic("bad name", 1),
            NewTopic("replicated", 1, 3),
            NewTopic("badconfig", 1, config={"retention.ms": "soon"}),
            NewTopic("unknownkey", 1, config={"no.such.config": "1"}),
            NewTopic("elsewhere", 1, replica_assignment=[[1]]),
            NewTopic("zero", 0),
        ]
    )
    errors = {name: error_of(f) for name, f in futures.items()}
    assert {name: e.code() for name, e in errors.items()} == {
        "orders": KafkaError.TOPIC_ALREADY_EXISTS,
        "bad name": KafkaError.TOPIC_EXCEPTION,
        "replicated": KafkaError.INVALID_REPLICATION_FACTOR,
        "badconfig": KafkaError.INVALID_CONFIG,
        "unknownkey": KafkaError.INVALID_CONFIG,
        "elsewhere": KafkaError.INVALID_REPLICA_ASSIGNMENT,
        "zero": KafkaError.INVALID_PARTITIONS,
    }
    assert "only 1 broker" in errors["replicated"].str()
    assert "retention.ms" in errors["badconfig"].str()
    assert "no.such.config" in errors["unknownkey"].str()
    assert "broker 1" in errors["elsewhere"].str()
    # validate_only runs the same checks.
    assert create(client, NewTopic("orders", 1), validate_only=True) == {
        "orders": KafkaError.TOPIC_ALREADY_EXISTS
    }
    assert create(client, NewTopic("x", 1, config={"segment.bytes": "1"}), validate_only=True) == {
        "x": KafkaError.INVALID_CONFIG
    }
    # '.' and '_' collide, as in Kafka.
    assert create(client, NewTopic("a.b", 1)) == {"a.b": 0}
    assert create(client, NewTopic("a_b", 1)) == {"a_b": KafkaError.TOPIC_EXCEPTION}
    assert set(partition_counts(client)) == {"orders", "assigned", "defaults", "a.b"}


def test_create_topics_v7_results_and_delete_by_id_with_kafka_python(broker: Any) -> None:
    client = kadmin(broker)
    try:
        result = client.create_topics({"events": {"num_partitions": 2, "configs": {"retention.ms": "90000"}}})
        (topic,) = result["topics"]
        assert topic["error_code"] == 0 and topic["num_partitions"] == 2 and topic["replication_factor"] == 1
        assert topic["configs"]["retention.ms"]["value"] == "90000"
        assert topic["configs"]["retention.ms"]["config_source"] == "DYNAMIC_TOPIC_CONFIG"
        assert topic["configs"]["segment.bytes"]["config_source"] == "DEFAULT_CONFIG"
        topic_id = uuid.UUID(str(topic["topic_id"]))
        assert topic_id.int != 0
        (described,) = client.describe_topics(["events"])
        assert uuid.UUID(str(described["topic_id"])) == topic_id

        dry = client.create_topics({"dry": {"num_partitions": 1}}, validate_only=True)["topics"][0]
        assert dry["error_code"] == 0 and dry["num_partitions"] == 1
        again = client.create_topics({"events": {}}, raise_errors=False)["topics"][0]
        assert again["error_code"] == 36 and "already exists" in again["error_message"]

        missing = client.delete_topics([uuid.uuid4(), "nope"], raise_errors=False)["topics"]
        unknown_topic_or_partition, unknown_topic_id = 3, 100
        assert sorted(t["error_code"] for t in missing) == [unknown_topic_or_partition, unknown_topic_id]
        deleted = client.delete_topics([topic_id])["topics"]
        assert [(t["name"], str(t["topic_id"]), t["error_code"]) for t in deleted] == [
            ("events", str(topic_id), 0)
        ]
        assert [t for t in client.list_topics() if not t.startswith("__")] == []
    finally:
        client.close()
    assert not glob.glob(os.path.join(broker.data_dir, "events-*"))


def test_delete_topics_removes_data_and_a_recreated_topic_starts_empty(broker: Any) -> None:
    client = admin(broker)
    assert create(client, NewTopic("gone", 2, 1)) == {"gone": 0}
    produce(broker, "gone", 5, partition=1)
    assert watermarks(broker, "gone", 1) == (0, 5)
    assert {t: outcome(f) for t, f in client.delete_topics(["gone"], operation_timeout=TIMEOUT).items()} == {
        "gone": 0
    }
    assert "gone" not in partition_counts(client)
    assert not os.path.exists(os.path.join(broker.data_dir, "gone-1"))
    assert outcome(client.delete_topics(["gone"])["gone"]) == KafkaError.UNKNOWN_TOPIC_OR_PART
    assert create(client, NewTopic("gone", 2, 1)) == {"gone": 0}
    assert watermarks(broker, "gone", 1) == (0, 0)
    produce(broker, "gone", 1, partition=1)  # a fresh producer on a fresh log
    assert watermarks(broker, "gone", 1) == (0, 1)


def test_delete_disabled_num_partitions_and_static_broker_configs(broker_factory: Any) -> None:
    broker = broker_factory(
        {"delete.topic.enable": "false", "num.partitions": "2", "log.retention.ms": "3600000"}
    )
    client = admin(broker)
    assert create(client, NewTopic("kept")) == {"kept": 0}
    assert partition_counts(client) == {"kept": 2}
    assert outcome(client.delete_topics(["kept"])["kept"]) == KafkaError.TOPIC_DELETION_DISABLED
    # v1 and v2 predate TOPIC_DELETION_DISABLED: INVALID_REQUEST, as in Kafka.
    req = request(20, 2, topic_names=("kept",), timeout=datetime.timedelta(seconds=5))
    assert [(r.name, r.error_code.value) for r in call(broker, req).responses] == [("kept", 42)]
    kclient = kadmin(broker)
    try:
        (result,) = kclient.delete_topics(["kept"], raise_errors=False)["topics"]
        assert result["error_code"] == 73  # TOPIC_DELETION_DISABLED (v6)
    finally:
        kclient.close()
    assert partition_counts(client) == {"kept": 2}

    retention = describe(client, ResourceType.TOPIC, "kept")["retention.ms"]
    assert retention.value == "3600000" and retention.source == ConfigSource.STATIC_BROKER_CONFIG.value
    broker_config = describe(client, ResourceType.BROKER, "0")
    assert broker_config["delete.topic.enable"].value == "false"
    assert broker_config["delete.topic.enable"].source == ConfigSource.STATIC_BROKER_CONFIG.value
    assert broker_config["log.retention.ms"].value == "3600000"
    assert broker_config["auto.create.topics.enable"].source == ConfigSource.DEFAULT_CONFIG.value


# -- CreatePartitions --------------------------------------------------------------


def test_create_partitions(broker: Any) -> None:
    client = admin(broker)
    assert create(client, NewTopic("grow", 2, 1)) == {"grow": 0}

    def grow(*changes: NewPartitions, **options: Any) -> dict[str, int]:
        return {name: outcome(f) for name, f in client.create_partitions(list(changes), **options).items()}

    assert grow(NewPartitions("grow", 4)) == {"grow": 0}
    assert grow(NewPartitions("grow", 9), validate_only=True) == {"grow": 0}
    assert partition_counts(client) == {"grow": 4}
    assert grow(NewPartitions("grow", 3)) == {"grow": KafkaError.INVALID_PARTITIONS}
    assert grow(NewPartitions("grow", 4)) == {"grow": KafkaError.INVALID_PARTITIONS}
    assert grow(NewPartitions("absent", 4)) == {"absent": KafkaError.UNKNOWN_TOPIC_OR_PART}
    assert grow(NewPartitions("grow", 5, [[1]])) == {"grow": KafkaError.INVALID_REPLICA_ASSIGNMENT}
    assert grow(NewPartitions("grow", 5, [[0]])) == {"grow": 0}
    produce(broker, "grow", 3, partition=4)
    assert watermarks(broker, "grow", 4) == (0, 3)

    kclient = kadmin(broker)
    try:
        kclient.create_partitions({"grow": 7})
        response = kclient.create_partitions({"grow": {"count": 9, "assignments": [[0]]}}, raise_errors=False)
        (result,) = response.results
        assert result.error_code == 39 and "2 additional partition(s)" in result.error_message
    finally:
        kclient.close()
    assert partition_counts(client) == {"grow": 7}


# -- configs ---------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:alter_configs has been deprecated:DeprecationWarning")
def test_incremental_and_legacy_alter_configs_survive_a_restart(broker: Any) -> None:
    client = admin(broker)
    assert create(client, NewTopic("conf", 1, 1, config={"retention.ms": "60000"})) == {"conf": 0}

    def incremental(*entries: ConfigEntry, **options: Any) -> int:
        resource = ConfigResource(ResourceType.TOPIC, "conf", incremental_configs=list(entries))
        (future,) = client.incremental_alter_configs([resource], **options).values()
        return outcome(future)

    assert (
        incremental(
            ConfigEntry("segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET),
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND),
            ConfigEntry("retention.ms", None, incremental_operation=AlterConfigOpType.DELETE),
        )
        == 0
    )
    config = describe(client, ResourceType.TOPIC, "conf")
    assert config["segment.bytes"].value == "1048576"
    assert config["segment.bytes"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert config["cleanup.policy"].value == "delete,compact"
    assert config["retention.ms"].value == "604800000"
    assert config["retention.ms"].source == ConfigSource.DEFAULT_CONFIG.value

    assert (
        incremental(ConfigEntry("cleanup.policy", "delete", incremental_operation=AlterConfigOpType.SUBTRACT))
        == 0
    )
    assert describe(client, ResourceType.TOPIC, "conf")["cleanup.policy"].value == "compact"
    refused = {
        "append to a non-list": ConfigEntry(
            "retention.ms", "1", incremental_operation=AlterConfigOpType.APPEND
        ),
        "unknown key": ConfigEntry("no.such.config", "1", incremental_operation=AlterConfigOpType.SET),
        "bad value": ConfigEntry("segment.bytes", "tiny", incremental_operation=AlterConfigOpType.SET),
        "empty list": ConfigEntry(
            "cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SUBTRACT
        ),
    }
    assert {why: incremental(entry) for why, entry in refused.items()} == dict.fromkeys(
        refused, KafkaError.INVALID_CONFIG
    )
    set_flush = ConfigEntry("flush.messages", "3", incremental_operation=AlterConfigOpType.SET)
    assert incremental(set_flush, validate_only=True) == 0
    assert (
        describe(client, ResourceType.TOPIC, "conf")["flush.messages"].source
        == ConfigSource.DEFAULT_CONFIG.value
    )

    # Legacy AlterConfigs replaces the whole set of overrides.
    (future,) = client.alter_configs(
        [ConfigResource(ResourceType.TOPIC, "conf", set_config={"flush.messages": "5"})]
    ).values()
    assert outcome(future) == 0
    config = describe(client, ResourceType.TOPIC, "conf")
    assert config["flush.messages"].value == "5" and config["segment.bytes"].value == "1073741824"
    assert config["cleanup.policy"].value == "delete"
    (future,) = client.alter_configs(
        [ConfigResource(ResourceType.TOPIC, "conf", set_config={"flush.ms": "-5"})]
    ).values()
    assert outcome(future) == KafkaError.INVALID_CONFIG
    (future,) = client.alter_configs(
        [ConfigResource(ResourceType.TOPIC, "absent", set_config={"flush.ms": "5"})]
    ).values()
    assert outcome(future) == KafkaError.UNKNOWN_TOPIC_OR_PART

    # No dynamic broker configs here.
    broker_resource = ConfigResource(
        ResourceType.BROKER,
        "0",
        incremental_configs=[ConfigEntry("num.partitions", "4", incremental_operation=AlterConfigOpType.SET)],
    )
    (future,) = client.incremental_alter_configs([broker_resource]).values()
    assert error_of(future).code() == KafkaError.INVALID_REQUEST

    broker.stop()
    broker.restart()
    config = describe(admin(broker), ResourceType.TOPIC, "conf")
    assert config["flush.messages"].value == "5"
    assert config["flush.messages"].source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    assert config["segment.bytes"].value == "1073741824"


def test_describe_configs_topic_broker_and_errors(broker: Any) -> None:
    client = admin(broker)
    assert create(client, NewTopic("described", 1, 1, config={"max.message.bytes": "2048"})) == {
        "described": 0
    }
    entry = describe(client, ResourceType.TOPIC, "described")["max.message.bytes"]
    assert (entry.value, entry.is_read_only, entry.is_sensitive) == ("2048", False, False)

    broker_config = describe(client, ResourceType.BROKER, "0")
    assert broker_config["broker.id"].value == "0" and broker_config["broker.id"].is_read_only
    assert broker_config["num.partitions"].value == "1"
    assert broker_config["advertised.listeners"].value is None

    (future,) = client.describe_configs([ConfigResource(ResourceType.TOPIC, "absent")]).values()
    assert error_of(future).code() == KafkaError.UNKNOWN_TOPIC_OR_PART
    # Clients send a broker resource to that broker, so other names need raw requests.
    resources = tuple(
        schema(32, 1).DescribeConfigsResource(resource_type=4, resource_name=name, configuration_keys=None)
        for name in ("7", "x", "")
    )
    results = call(broker, request(32, 1, resources=resources, include_synonyms=False)).results
    assert [(r.resource_name, r.error_code.value, len(r.configs)) for r in results] == [
        ("7", 42, 0),  # INVALID_REQUEST
        ("x", 42, 0),
        ("", 0, 0),  # the cluster-wide dynamic defaults: none
    ]
    assert "expected 0" in (results[0].error_message or "")

    kclient = kadmin(broker)
    try:
        modified = kclient.describe_configs([KConfigResource("TOPIC", "described")])
        assert {k: v["value"] for k, v in modified["topic"]["described"].items()} == {
            "max.message.bytes": "2048"
        }
        everything = kclient.describe_configs(
            [KConfigResource("TOPIC", "described", ["cleanup.policy", "retention.ms"])],
            config_filter="all",
        )["topic"]["described"]
        assert set(everything) == {"cleanup.policy", "retention.ms"}
        assert everything["cleanup.policy"]["config_type"] == "LIST"
        synonyms = kclient.describe_configs(
            [KConfigResource("TOPIC", "described", ["max.message.bytes"])], include_synonyms=True
        )["topic"]["described"]["max.message.bytes"]["synonyms"]
        assert [(s["name"], s["value"], s["source"]) for s in synonyms] == [
            ("max.message.bytes", "2048", "DYNAMIC_TOPIC_CONFIG"),
            ("message.max.bytes", "1048588", "DEFAULT_CONFIG"),
        ]
    finally:
        kclient.close()

    # DescribeConfigs v4 with documentation (neither client asks for it).
    req = request(
        32,
        4,
        resources=(
            schema(32, 4).DescribeConfigsResource(
                resource_type=2, resource_name="described", configuration_keys=("segment.bytes",)
            ),
        ),
        include_synonyms=False,
        include_documentation=True,
    )
    (result,) = call(broker, req).results
    (config,) = result.configs
    int_type = 3
    assert (config.name, config.config_type) == ("segment.bytes", int_type)
    assert "segment" in (config.documentation or "")


def test_describe_cluster(broker: Any) -> None:
    # librdkafka's describe_cluster() is served by Metadata; the DescribeCluster API by raw requests.
    client = admin(broker)
    cluster = client.describe_cluster(request_timeout=TIMEOUT).result(TIMEOUT)
    assert [(node.id, node.port) for node in cluster.nodes] == [(0, broker.port)]

    for version in (0, 1, 2):
        fields: dict[str, Any] = {"include_cluster_authorized_operations": version != 1}
        if version >= 1:
            fields["endpoint_type"] = 1
        if version >= 2:
            fields["include_fenced_brokers"] = True
        response = call(broker, request(60, version, **fields))
        assert response.error_code.value == 0 and response.cluster_id == cluster.cluster_id
        assert response.controller_id == 0
        assert [(b.broker_id, b.host, b.port) for b in response.brokers] == [(0, "127.0.0.1", broker.port)]
        if version == 1:
            assert response.cluster_authorized_operations == -(2**31)  # not asked for
        else:  # no authorizer: every cluster operation, ALTER (7), DESCRIBE (8), IDEMPOTENT_WRITE (12)...
            some = 1 << 7 | 1 << 8 | 1 << 12
            assert response.cluster_authorized_operations & some == some
    assert [b.is_fenced for b in response.brokers] == [False]

    req = request(
        60, 2, include_cluster_authorized_operations=False, endpoint_type=2, include_fenced_brokers=False
    )
    response = call(broker, req)
    mismatched_endpoint_type, unsupported_endpoint_type = 114, 115
    assert response.error_code.value == mismatched_endpoint_type and "CONTROLLER" in response.error_message
    req = request(60, 1, include_cluster_authorized_operations=False, endpoint_type=9)
    assert call(broker, req).error_code.value == unsupported_endpoint_type


# -- DeleteRecords / DescribeLogDirs -----------------------------------------------------


def test_delete_records_moves_the_log_start(broker: Any) -> None:
    client = admin(broker)
    compacted = NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})
    assert create(client, NewTopic("trim", 1, 1), compacted) == {"trim": 0, "compacted": 0}
    produce(broker, "trim", 30)
    (future,) = client.delete_records([TopicPartition("trim", 0, 10)]).values()
    assert future.result(TIMEOUT).low_watermark == 10
    assert watermarks(broker, "trim") == (10, 30)

    error = consume_first(broker, "trim", "error").error()
    assert error is not None and "out of range" in error.str().lower()
    first = consume_first(broker, "trim", "earliest")
    assert first.error() is None and first.offset() == 10

    (future,) = client.delete_records([TopicPartition("trim", 0, 100)]).values()
    assert error_of(future).code() == KafkaError.OFFSET_OUT_OF_RANGE
    (future,) = client.delete_records([TopicPartition("trim", 0, 5)]).values()
    assert future.result(TIMEOUT).low_watermark == 10  # never moves back
    (future,) = client.delete_records([TopicPartition("trim", 0, -1)]).values()  # -1: the high watermark
    assert future.result(TIMEOUT).low_watermark == 30
    (future,) = client.delete_records([TopicPartition("compacted", 0, 0)]).values()
    assert error_of(future).code() == KafkaError.POLICY_VIOLATION

    broker.stop()
    broker.restart()
    assert watermarks(broker, "trim") == (30, 30)


def test_describe_log_dirs_with_kafka_python(broker: Any) -> None:
    client = admin(broker)
    assert create(client, NewTopic("sized", 2, 1)) == {"sized": 0}
    produce(broker, "sized", 20, partition=1)
    kclient = kadmin(broker)
    try:
        (answer,) = kclient.describe_log_dirs()
        (log_dir,) = answer["log_dirs"]
        assert log_dir["error_code"] == 0 and log_dir["log_dir"] == os.path.abspath(broker.data_dir)
        assert log_dir["total_bytes"] >= log_dir["usable_bytes"] > 0
        (topic,) = [t for t in log_dir["topics"] if not t["name"].startswith("__")]
        sizes = {p["partition_index"]: p["partition_size"] for p in topic["partitions"]}
        on_disk = {
            p: sum(
                os.path.getsize(f) for f in glob.glob(os.path.join(broker.data_dir, f"sized-{p}", "*.log"))
            )
            for p in (0, 1)
        }
        assert sizes == on_disk and sizes[0] == 0 and sizes[1] > 0
        (only,) = kclient.describe_log_dirs({"sized": [1], "absent": [0]})[0]["log_dirs"]
        assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for t in only["topics"]] == [
            ("sized", [1])
        ]
    finally:
        kclient.close()


def test_controller_apis_on_a_broker_alone_answer_not_controller(broker: Any) -> None:
    """ElectLeaders and the reassignment APIs belong to a cluster's controller; a broker alone
    has none, and answers NOT_CONTROLLER (41) as a ZooKeeper-mode Kafka broker that is not the
    controller does, rather than pretending to elect or move anything."""
    elect = call(broker, request(43, 2, election_type=0,
                                 topic_partitions=(schema(43, 2).TopicPartitions(topic="t", partitions=(0,)),)))  # fmt: skip
    assert elect.error_code.value == 41
    assert [(r.topic, p.partition_id, p.error_code.value) for r in elect.replica_election_results
            for p in r.partition_result] == [("t", 0, 41)]  # fmt: skip
    moved = schema(45, 0).ReassignablePartition(partition_index=0, replicas=(0,))
    alter = call(
        broker, request(45, 0, topics=(schema(45, 0).ReassignableTopic(name="t", partitions=(moved,)),))
    )
    assert alter.error_code.value == 41 and "controller" in (alter.error_message or "")
    assert [p.error_code.value for t in alter.responses for p in t.partitions] == [41]
    listed = call(broker, request(46, 0, topics=None))
    assert listed.error_code.value == 41 and listed.topics == ()

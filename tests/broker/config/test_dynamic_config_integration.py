"""Dynamic broker configs and Kafka 3.x's legacy topic keys against a broker process.

confluent-kafka's AdminClient (librdkafka) alters and describes BROKER resources by id (it sends
them to that broker); the cluster-wide default (an empty resource name) goes as raw kio requests,
since librdkafka only targets brokers by id.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)
from kio.index import load_payload_module
from kio.static.constants import EntityType

from tests.kit.wire import WireClient

pytestmark = pytest.mark.integration

TIMEOUT = 15
TOPIC_CONFIG, DYNAMIC_BROKER, DYNAMIC_DEFAULT, STATIC, DEFAULT = 1, 2, 3, 4, 5


def admin(broker: Any) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap})


def outcome(future: Any) -> tuple[int, str]:
    """(Kafka error code, message) a confluent admin future ends with ((0, "") on success)."""
    try:
        future.result(TIMEOUT)
    except KafkaException as e:
        error: KafkaError = e.args[0]
        return int(error.code()), error.str()
    return 0, ""


def describe(client: AdminClient, restype: ResourceType, name: str) -> dict[str, Any]:
    (future,) = client.describe_configs([ConfigResource(restype, name)], request_timeout=TIMEOUT).values()
    result: dict[str, Any] = future.result(TIMEOUT)
    return result


def incremental(
    client: AdminClient, restype: ResourceType, name: str, *ops: tuple[str, str | None, Any]
) -> tuple[int, str]:
    entries = [ConfigEntry(key, value, incremental_operation=op) for key, value, op in ops]
    (future,) = client.incremental_alter_configs(
        [ConfigResource(restype, name, incremental_configs=entries)]
    ).values()
    return outcome(future)


def create(client: AdminClient, topic: NewTopic) -> tuple[int, str]:
    return outcome(client.create_topics([topic])[topic.topic])


SET, DELETE, APPEND = AlterConfigOpType.SET, AlterConfigOpType.DELETE, AlterConfigOpType.APPEND


def schema(api_key: int, version: int) -> Any:
    """kio's request module of one API version (its nested entity classes)."""
    return load_payload_module(api_key, version, EntityType.request)


def raw_request(api_key: int, version: int, **fields: Any) -> Any:
    module = schema(api_key, version)
    cls = next(v for v in vars(module).values() if getattr(v, "__type__", None) == EntityType.request)
    return cls(**fields)


def alter_cluster_default(broker: Any, **configs: str) -> Any:
    """IncrementalAlterConfigs v1 SET on the cluster-wide default (BROKER, name "")."""
    module = schema(44, 1)
    changes = tuple(module.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items())
    resource = module.AlterConfigsResource(resource_type=4, resource_name="", configs=changes)
    with WireClient(broker.bootstrap) as client:
        (result,) = client.call(raw_request(44, 1, resources=(resource,), validate_only=False)).responses
    return result


def describe_cluster_default(broker: Any) -> Any:
    """DescribeConfigs v4 of the cluster-wide default (BROKER, name "")."""
    resource = schema(32, 4).DescribeConfigsResource(
        resource_type=4, resource_name="", configuration_keys=None
    )
    req = raw_request(32, 4, resources=(resource,), include_synonyms=True, include_documentation=False)
    with WireClient(broker.bootstrap) as client:
        (result,) = client.call(req).results
    return result


def produce_error(broker: Any, topic: str, size: int) -> int:
    """The delivery error code of one record of ``size`` bytes (0 when delivered)."""
    errors: list[int] = []
    producer = Producer(
        {"bootstrap.servers": broker.bootstrap, "linger.ms": 0, "message.max.bytes": 10_000_000}
    )
    producer.produce(
        topic,
        key=b"k",
        value=b"x" * size,
        on_delivery=lambda err, msg: errors.append(err.code() if err else 0),
    )
    producer.flush(TIMEOUT)
    return errors[0]


def test_dynamic_broker_configs_apply_persist_and_refuse_static_keys(broker_factory: Any) -> None:
    broker = broker_factory({"log.retention.hours": "2"})
    client = admin(broker)
    assert create(client, NewTopic("plain", 1, 1)) == (0, "")
    assert create(client, NewTopic("own", 1, 1, config={"retention.ms": "1000"})) == (0, "")

    entries = describe(client, ResourceType.BROKER, "0")
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source, retention.is_read_only) == ("7200000", STATIC, False)
    assert "log.retention.hours" in retention.synonyms  # a dict by name: (hours, 2, STATIC) then the default
    assert entries["broker.id"].is_read_only and entries["num.partitions"].is_read_only

    # This broker's dynamic set: applied to topics without overrides, at once.
    assert incremental(
        client,
        ResourceType.BROKER,
        "0",
        ("log.retention.ms", "60000", SET),
        ("background.threads", "9", SET),
        ("log.cleanup.policy", "compact", APPEND),
        ("message.max.bytes", "2000", SET),
    ) == (0, "")
    entries = describe(client, ResourceType.BROKER, "0")
    assert (entries["log.retention.ms"].value, entries["log.retention.ms"].source) == (
        "60000",
        DYNAMIC_BROKER,
    )
    assert (entries["background.threads"].value, entries["background.threads"].source) == (
        "9",
        DYNAMIC_BROKER,
    )
    assert entries["log.cleanup.policy"].value == "delete,compact"
    plain = describe(client, ResourceType.TOPIC, "plain")
    assert (plain["retention.ms"].value, plain["retention.ms"].source) == ("60000", DYNAMIC_BROKER)
    assert plain["cleanup.policy"].value == "delete,compact"
    own = describe(client, ResourceType.TOPIC, "own")
    assert (own["retention.ms"].value, own["retention.ms"].source) == ("1000", TOPIC_CONFIG)
    assert produce_error(broker, "plain", 5000) == KafkaError.MSG_SIZE_TOO_LARGE
    assert produce_error(broker, "plain", 500) == 0

    # Static keys and bad values: Kafka's KRaft answer, INVALID_REQUEST with its message.
    code, message = incremental(client, ResourceType.BROKER, "0", ("num.partitions", "4", SET))
    assert (
        code == KafkaError.INVALID_REQUEST
        and "Cannot update these configs dynamically: Set(num.partitions)" in message
    )
    code, _ = incremental(client, ResourceType.BROKER, "0", ("log.retention.ms", "soon", SET))
    assert code == KafkaError.INVALID_REQUEST
    code, message = incremental(client, ResourceType.BROKER, "0", ("num.io.threads", "100", SET))
    assert code == KafkaError.INVALID_REQUEST and "double the current value 8" in message
    code, _ = incremental(client, ResourceType.BROKER, "0", ("background.threads", "1", APPEND))
    assert code == KafkaError.INVALID_CONFIG  # not a list
    assert describe(client, ResourceType.BROKER, "0")["log.retention.ms"].value == "60000"

    # Legacy AlterConfigs replaces the whole set (librdkafka's 0081 sets this key).
    with pytest.warns(DeprecationWarning):
        futures = client.alter_configs(
            [
                ConfigResource(
                    ResourceType.BROKER, "0", set_config={"sasl.kerberos.min.time.before.relogin": "58000"}
                )
            ]
        )
    (future,) = futures.values()
    assert outcome(future) == (0, "")
    entries = describe(client, ResourceType.BROKER, "0")
    assert entries["sasl.kerberos.min.time.before.relogin"].value == "58000"
    assert entries["log.retention.ms"].source == STATIC and entries["background.threads"].source == DEFAULT
    assert describe(client, ResourceType.TOPIC, "plain")["retention.ms"].value == "7200000"
    assert produce_error(broker, "plain", 5000) == 0

    # The cluster-wide default (resource name ""), below this broker's own set.
    result = alter_cluster_default(broker, **{"log.segment.bytes": "2097152"})
    assert result.error_code.value == 0, result.error_message
    result = alter_cluster_default(broker, **{"sasl.enabled.mechanisms": "PLAIN"})
    assert result.error_code.value == 42 and "broker id must be specified" in (result.error_message or "")
    described = describe_cluster_default(broker)
    assert [(c.name, c.value, c.config_source) for c in described.configs] == [
        ("log.segment.bytes", "2097152", DYNAMIC_DEFAULT)
    ]
    segment = describe(client, ResourceType.TOPIC, "plain")["segment.bytes"]
    assert (segment.value, segment.source) == ("2097152", DYNAMIC_DEFAULT)

    # Both sets survive a restart, and apply to topics made after it.
    broker.stop()
    broker.restart()
    client = admin(broker)
    entries = describe(client, ResourceType.BROKER, "0")
    assert (
        entries["sasl.kerberos.min.time.before.relogin"].value,
        entries["sasl.kerberos.min.time.before.relogin"].source,
    ) == ("58000", DYNAMIC_BROKER)
    assert (entries["log.segment.bytes"].value, entries["log.segment.bytes"].source) == (
        "2097152",
        DYNAMIC_DEFAULT,
    )
    assert create(client, NewTopic("later", 1, 1)) == (0, "")
    assert describe(client, ResourceType.TOPIC, "later")["segment.bytes"].value == "2097152"


def test_message_format_version_is_accepted_stored_shown_and_ignored(broker_factory: Any) -> None:
    broker = broker_factory({"log.message.format.version": "2.8"})
    client = admin(broker)
    assert create(client, NewTopic("old", 1, 1, config={"message.format.version": "0.10.0"})) == (0, "")
    assert create(client, NewTopic("new", 1, 1)) == (0, "")
    code, message = create(client, NewTopic("bad", 1, 1, config={"message.format.version": "0.7"}))
    assert code == KafkaError.INVALID_CONFIG and "Version 0.7 is not a valid version" in message

    old = describe(client, ResourceType.TOPIC, "old")["message.format.version"]
    assert (old.value, old.source) == ("0.10.0", TOPIC_CONFIG)
    new = describe(client, ResourceType.TOPIC, "new")["message.format.version"]
    assert (new.value, new.source) == ("2.8", STATIC)  # the broker's log.message.format.version
    assert describe(client, ResourceType.TOPIC, "new")["message.downconversion.enable"].value == "true"

    # Ignored in behaviour: records are v2 batches whatever it says.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    producer.produce("old", key=b"k", value=b"v", headers=[("h", b"1")])
    assert producer.flush(TIMEOUT) == 0
    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["old"])
    msg = None
    for _ in range(30):
        msg = consumer.poll(1)
        if msg is not None and not msg.error():
            break
    consumer.close()
    assert msg is not None and (msg.key(), msg.value(), msg.headers()) == (b"k", b"v", [("h", b"1")])

    assert incremental(client, ResourceType.TOPIC, "new", ("message.format.version", "0.11.0.2", SET)) == (
        0,
        "",
    )
    assert describe(client, ResourceType.TOPIC, "new")["message.format.version"].value == "0.11.0.2"
    code, _ = incremental(client, ResourceType.TOPIC, "new", ("message.format.version", "x", SET))
    assert code == KafkaError.INVALID_CONFIG
    code, message = incremental(client, ResourceType.TOPIC, "new", ("message.format.version", "1.0", APPEND))
    assert code == KafkaError.INVALID_CONFIG and "not LIST" in message
    # Kafka 3.x: the broker key is static.
    code, message = incremental(client, ResourceType.BROKER, "0", ("log.message.format.version", "3.0", SET))
    assert code == KafkaError.INVALID_REQUEST and "log.message.format.version" in message

    # Legacy AlterConfigs replaces the set: left out, it is back to the broker's value.
    with pytest.warns(DeprecationWarning):
        futures = client.alter_configs(
            [
                ConfigResource(
                    ResourceType.TOPIC,
                    "old",
                    set_config={"retention.ms": "60000", "message.downconversion.enable": "false"},
                )
            ]
        )
    assert outcome(next(iter(futures.values()))) == (0, "")
    old_configs = describe(client, ResourceType.TOPIC, "old")
    assert old_configs["message.format.version"].value == "2.8"
    assert (
        old_configs["message.downconversion.enable"].value,
        old_configs["message.downconversion.enable"].source,
    ) == ("false", TOPIC_CONFIG)

    broker.stop()
    broker.restart()
    client = admin(broker)
    assert describe(client, ResourceType.TOPIC, "new")["message.format.version"].value == "0.11.0.2"
    assert describe(client, ResourceType.TOPIC, "old")["message.downconversion.enable"].value == "false"
    # Deleted and made again under its name, a topic starts without them.
    (future,) = client.delete_topics(["new"]).values()
    assert outcome(future) == (0, "")
    assert create(client, NewTopic("new", 1, 1)) == (0, "")
    assert describe(client, ResourceType.TOPIC, "new")["message.format.version"].source == STATIC

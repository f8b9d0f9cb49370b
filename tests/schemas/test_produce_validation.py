"""Validation on produce against a broker process: a topic with ``confluent.value.schema.validation``
takes confluent-kafka's AvroSerializer records and refuses, per record (KIP-467), records without a
schema id, with an unknown id, or with an id of another subject; a broker with no registry listener
validates against its ``_schemas``."""

from __future__ import annotations

import datetime
import json
import struct
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from kio.schema.errors import ErrorCode
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData

from logstore import build_batch
from tests.kit.brokerkit import BrokerProcess, read_values
from tests.kit.wire import WireClient
from tests.schemas.test_http import start_registry

pytestmark = pytest.mark.integration

USER = json.dumps({"type": "record", "name": "User", "namespace": "shop", "fields": [{"name": "name", "type": "string"}]})
PAYMENT = json.dumps({"type": "record", "name": "Payment", "namespace": "shop", "fields": [{"name": "n", "type": "int"}]})


def create(bootstrap: str, topic: str, config: dict[str, str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config=config)])[topic].result(30)


def produce_all(bootstrap: str, topic: str, values: list[bytes]) -> list[tuple[int, str]]:
    """(error code or 0, error string) of each record, sent as one batch."""
    outcomes: list[tuple[int, str]] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2000, "retries": 0})
    producer.list_topics(topic, timeout=10)

    def done(err: Any, _msg: Any) -> None:
        outcomes.append((err.code(), err.str()) if err else (0, ""))

    for value in values:
        producer.produce(topic, value=value, on_delivery=done)
    producer.flush(30)
    return outcomes


def produce_raw(bootstrap: str, topic: str, values: list[bytes]) -> Any:
    """One Produce v8 of ``values`` as one batch: its partition's answer."""
    data = PartitionProduceData(index=0, records=build_batch(values))
    request = ProduceRequest(
        acks=1,
        timeout=datetime.timedelta(seconds=10),
        topic_data=(TopicProduceData(name=topic, partition_data=(data,)),),
    )
    with WireClient(bootstrap, timeout=30) as client:
        return client.call(request).responses[0].partition_responses[0]


def test_a_validated_topic_takes_registered_ids_and_refuses_the_rest(broker_factory: Any) -> None:
    broker, rest = start_registry(broker_factory)
    create(broker.bootstrap, "orders", {"confluent.value.schema.validation": "true"})
    registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{rest.port}"})
    serialize = AvroSerializer(registry, USER)
    ctx = SerializationContext("orders", MessageField.VALUE)
    good = [serialize({"name": f"u{i}"}, ctx) for i in range(5)]
    assert produce_all(broker.bootstrap, "orders", good) == [(0, "")] * 5
    payment_id = rest.ok("POST", "/subjects/payments-value/versions", {"schema": PAYMENT})["id"]
    wrong_subject = b"\x00" + struct.pack(">i", payment_id) + b"\x02"
    unknown = b"\x00" + struct.pack(">i", 4242) + b"\x02"
    outcomes = produce_all(broker.bootstrap, "orders", [good[0], b"plain", unknown, wrong_subject, good[1]])
    codes = [code for code, _ in outcomes]
    other = KafkaError._INVALID_DIFFERENT_RECORD
    assert codes == [other, KafkaError.INVALID_RECORD, KafkaError.INVALID_RECORD, KafkaError.INVALID_RECORD, other]
    # librdkafka keeps the reasons to itself: the same batch over the wire shows them (KIP-467).
    answer = produce_raw(broker.bootstrap, "orders", [good[0], b"plain", unknown, wrong_subject, good[1]])
    assert answer.error_code == ErrorCode.invalid_record
    reasons = {error.batch_index: error.batch_index_error_message for error in answer.record_errors}
    assert sorted(reasons) == [1, 2, 3]
    assert "has no schema id" in reasons[1]
    assert "4242 is unknown" in reasons[2]
    assert "not registered under subject 'orders-value'" in reasons[3]
    assert answer.error_message and "3 record errors" in answer.error_message
    assert read_values(broker.bootstrap, "orders", "read_uncommitted", 5) == good  # the refused batch left nothing
    # Turned off: the same bytes are taken (an AlterConfigs of the key, as any topic config).
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    resource = ConfigResource("topic", "orders", set_config={"confluent.value.schema.validation": "false"})
    admin.alter_configs([resource])[resource].result(30)
    assert produce_all(broker.bootstrap, "orders", [b"plain"]) == [(0, "")]


def test_a_broker_without_a_registry_listener_validates_against_its_schemas_topic(
    broker_factory: Any,
) -> None:
    """Written by a registry, read by a broker restarted without one: the ids still count."""
    broker, rest = start_registry(broker_factory)
    user_id = rest.ok("POST", "/subjects/orders-value/versions", {"schema": USER})["id"]
    broker.stop()
    broker.overrides.pop("schema.registry.listeners")
    plain = broker.restart()
    create(plain.bootstrap, "orders", {"redpanda.value.schema.id.validation": "true"})
    framed = b"\x00" + struct.pack(">i", user_id) + b"\x04ab"
    answer = produce_raw(plain.bootstrap, "orders", [framed, b"plain"])
    assert answer.error_code == ErrorCode.invalid_record
    assert [error.batch_index for error in answer.record_errors] == [1]  # the registered id passes
    assert produce_all(plain.bootstrap, "orders", [framed]) == [(0, "")]


def test_an_invalid_strategy_is_refused_with_the_choices(broker: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = NewTopic("t", 1, 1, config={"confluent.value.subject.name.strategy": "ByColour"})
    with pytest.raises(Exception) as refused:
        admin.create_topics([topic])["t"].result(30)
    assert "TopicRecordNameStrategy" in str(refused.value)


"""confluent-kafka's SchemaRegistryClient and Avro serdes against the broker's registry: records
produced with a registered schema, the schema evolved compatibly, an incompatible change refused with
Confluent's 409, old data read with the new schema, ids and versions kept across a restart."""

from __future__ import annotations

import json
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.serialization import MessageField, SerializationContext

from tests.schemas.test_http import start_registry

pytestmark = pytest.mark.integration

V1 = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                 "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})  # fmt: skip
V2 = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                 "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                            {"name": "email", "type": "string", "default": "none"}]})  # fmt: skip
BREAKING = json.dumps({"type": "record", "name": "User", "namespace": "shop",
                       "fields": [{"name": "name", "type": "long"}]})  # fmt: skip


def produce(bootstrap: str, topic: str, serializer: AvroSerializer, values: list[dict[str, Any]]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for value in values:
        producer.produce(topic, value=serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0


def consume(bootstrap: str, topic: str, deserializer: AvroDeserializer, count: int) -> list[tuple[int, Any]]:
    """(schema id in the wire format, decoded value) of the first ``count`` records."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "serdes", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    out: list[tuple[int, Any]] = []
    try:
        for _ in range(600):  # at most 60 s
            message = consumer.poll(0.1)
            if message is None or message.error() is not None:
                continue
            raw = message.value()
            assert raw is not None and raw[0] == 0  # Confluent's wire format: magic 0, then the id
            out.append((int.from_bytes(raw[1:5], "big"),
                        deserializer(raw, SerializationContext(topic, MessageField.VALUE))))  # fmt: skip
            if len(out) == count:
                break
    finally:
        consumer.close()
    return out


def test_avro_serdes_register_evolve_refuse_and_read_old_data_with_the_new_schema(broker_factory: Any) -> None:
    broker, rest = start_registry(broker_factory, **{"group.initial.rebalance.delay.ms": "0"})
    url = f"http://127.0.0.1:{rest.port}"
    client = SchemaRegistryClient({"url": url})
    produce(broker.bootstrap, "users", AvroSerializer(client, V1), [{"name": "ada", "age": 36}])
    produce(broker.bootstrap, "users", AvroSerializer(client, V2),
            [{"name": "bob", "age": 41, "email": "bob@example.com"}])  # fmt: skip
    assert client.get_subjects() == ["users-value"]
    latest = client.get_latest_version("users-value")
    assert (latest.version, latest.schema_id) == (2, 2)
    assert json.loads(latest.schema.schema_str) == json.loads(V2)
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema("users-value", Schema(BREAKING, "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert client.test_compatibility("users-value", Schema(BREAKING, "AVRO")) is False
    assert client.test_compatibility("users-value", Schema(V2, "AVRO")) is True
    assert client.get_compatibility() == "BACKWARD"
    # auto.register.schemas off: the serializer looks its schema up (POST /subjects/{s}), and one
    # never registered is refused with Confluent's 40403
    lookup_only = AvroSerializer(SchemaRegistryClient({"url": url}), V2, conf={"auto.register.schemas": False})
    framed = lookup_only({"name": "cy", "age": 1}, SerializationContext("users", MessageField.VALUE))
    assert framed is not None and framed[:5] == b"\0\0\0\0\2"
    unknown = json.dumps({"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]})
    with pytest.raises(SchemaRegistryError) as missing:
        AvroSerializer(SchemaRegistryClient({"url": url}), unknown, conf={"auto.register.schemas": False})(
            {"x": 1}, SerializationContext("users", MessageField.VALUE))  # fmt: skip
    assert missing.value.error_code == 40403
    client.set_compatibility("users-value", "FULL")
    assert client.get_compatibility("users-value") == "FULL"
    # a fresh client (nothing cached) reads both records with the new schema: the old one gets the default
    reader = AvroDeserializer(SchemaRegistryClient({"url": url}), V2)
    values = consume(broker.bootstrap, "users", reader, 2)
    assert values == [
        (1, {"name": "ada", "age": 36, "email": "none"}),
        (2, {"name": "bob", "age": 41, "email": "bob@example.com"}),
    ]
    # ... and without a reader schema, each with the schema its id names
    plain = consume(broker.bootstrap, "users", AvroDeserializer(SchemaRegistryClient({"url": url})), 2)
    assert [v for _, v in plain] == [{"name": "ada", "age": 36}, {"name": "bob", "age": 41, "email": "bob@example.com"}]
    rest.conn.close()
    assert broker.stop() == 0
    broker.restart()
    again = SchemaRegistryClient({"url": url})
    assert [again.get_version("users-value", v).schema_id for v in (1, 2)] == [1, 2]
    assert again.get_schema(1).schema_str == V1
    third = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "n", "type": "long"}]})
    assert again.register_schema("orders-value", Schema(third, "AVRO")) == 3
    assert consume(broker.bootstrap, "users", AvroDeserializer(again, V2), 2)[0][1]["email"] == "none"

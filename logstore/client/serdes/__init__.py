"""Schema Registry serializers and deserializers for logstore's client, shaped like confluent-kafka's.

With a registry at hand (a broker with ``schema.registry.listeners``, as ``make run`` starts)::

    from logstore.client.serdes import SchemaRegistryClient, AvroSerializer, SerializationContext
    client = SchemaRegistryClient({"url": "http://127.0.0.1:8081"})
    schema_str = '{"type": "record", "name": "User", "fields": [{"name": "id", "type": "int"}]}'
    serialize = AvroSerializer(client, schema_str)
    framed = serialize({"id": 1}, SerializationContext("users", "value"))  # b"\\x00" + id + Avro

- :mod:`~logstore.client.serdes.wire`: Confluent's framing (magic byte, schema id,
  Protobuf message indexes);
- :mod:`~logstore.client.serdes.registry_client`: a small sync registry client with caching;
- :mod:`~logstore.client.serdes.base`: the shared settings (``auto.register.schemas``,
  ``use.latest.version``, subject name strategies);
- :mod:`~logstore.client.serdes.avro`, :mod:`~logstore.client.serdes.json_schema`,
  :mod:`~logstore.client.serdes.protobuf`: one serializer and deserializer per type,
  each body encoded by the library made for it (fastavro, json + jsonschema, protobuf);
- :mod:`~logstore.client.serdes.aio`: the asyncio client (aiohttp) and serdes.

Layering: part of the client; it imports no registry code (logstore.schemas is the
broker side's), only the registry's HTTP API.
"""

from logstore.client.serdes.avro import AvroDeserializer, AvroSerializer
from logstore.client.serdes.base import (
    MessageField,
    SerializationContext,
    record_subject_name_strategy,
    topic_record_subject_name_strategy,
    topic_subject_name_strategy,
)
from logstore.client.serdes.json_schema import JSONDeserializer, JSONSerializer
from logstore.client.serdes.protobuf import ProtobufDeserializer, ProtobufSerializer
from logstore.client.serdes.registry_client import (
    RegisteredSchema,
    Schema,
    SchemaReference,
    SchemaRegistryClient,
    SchemaRegistryError,
)
from logstore.client.serdes.wire import SerializationError

__all__ = [
    "AvroDeserializer",
    "AvroSerializer",
    "JSONDeserializer",
    "JSONSerializer",
    "MessageField",
    "ProtobufDeserializer",
    "ProtobufSerializer",
    "RegisteredSchema",
    "Schema",
    "SchemaReference",
    "SchemaRegistryClient",
    "SchemaRegistryError",
    "SerializationContext",
    "SerializationError",
    "record_subject_name_strategy",
    "topic_record_subject_name_strategy",
    "topic_subject_name_strategy",
]

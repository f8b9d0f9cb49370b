"""The Schema Registry (Confluent's API and ``_schemas`` format), without sockets or topics.

- :mod:`~logstore.schemas.records`: the ``_schemas`` topic's records;
- :mod:`~logstore.schemas.registry`: the registry's state (replayed from those
  records) and its operations (each write returns the records that make it);
- :mod:`~logstore.schemas.compatibility`: schema types, parsed and checked by
  the library made for each, and Confluent's compatibility levels;
- :mod:`~logstore.schemas.json_schema` / :mod:`~logstore.schemas.json_diff`: the JSON
  Schema type (jsonschema) and Confluent's JSON Schema compatibility rules;
- :mod:`~logstore.schemas.protobuf` / :mod:`~logstore.schemas.proto_diff`: the Protobuf
  type (protoc's descriptors) and Confluent's Protobuf compatibility rules;
- :mod:`~logstore.schemas.errors`: Confluent's error codes, in one table.

Layering: beside :mod:`logstore.coordinator`, below the broker that will serve
it; it imports only :mod:`logstore.errors`.
"""

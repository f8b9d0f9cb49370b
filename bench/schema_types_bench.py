"""What the registry's schema types cost, and logstore's serdes beside confluent-kafka's.

    .venv/bin/python -m bench.schema_types_bench

Parse (uncached: the registry caches parses, compatibility.CACHE_SIZE) and
compare for a JSON Schema and a .proto of the same 50-field record, and a cached
parse; then serialize + deserialize per value with logstore.client.serdes and
with confluent-kafka's serdes (the peer) on the same Avro, JSON and Protobuf
schema, against one in-process registry (the tests' stub server). Medians of
repeated runs; every serialized value is checked to be the peer's bytes.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import type_pb2

from logstore.client import serdes
from logstore.schemas import compatibility, json_schema, protobuf

FIELDS = 50


def _median_us(work: Callable[[], Any], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        work()
        times.append((time.perf_counter() - started) * 1e6)
    return statistics.median(times)


def parse_costs() -> dict[str, float]:
    js = json.dumps({"type": "object", "additionalProperties": False,
                     "properties": {f"f{i}": {"type": "string", "maxLength": 64} for i in range(FIELDS)}})  # fmt: skip
    proto = 'syntax = "proto3";\npackage bench;\nmessage R {\n' + "".join(
        f"  string f{i} = {i + 1};\n" for i in range(FIELDS)) + "}\n"  # fmt: skip
    j, p = json_schema.parse(js), protobuf.parse(proto)
    compatibility.parse("JSON", js)
    return {
        "JSON Schema parse (jsonschema meta-schema check), us": _median_us(lambda: json_schema.parse(js), 50),
        "JSON Schema compare (json_diff), us": _median_us(lambda: j.reads(j), 200),
        "Protobuf parse (one protoc process), us": _median_us(lambda: protobuf.parse(proto), 30),
        "Protobuf compare (proto_diff), us": _median_us(lambda: p.reads(p), 200),
        "cached parse (compatibility.parse), us": _median_us(lambda: compatibility.parse("JSON", js), 2000),
    }


def serde_costs(url: str) -> dict[str, float]:
    ours, theirs = serdes.SchemaRegistryClient({"url": url}), ConfluentClient({"url": url})
    avro = json.dumps({"type": "record", "name": "R", "fields": [{"name": f"f{i}", "type": "string"}
                                                                  for i in range(FIELDS)]})  # fmt: skip
    js = json.dumps({"type": "object", "properties": {f"f{i}": {"type": "string"} for i in range(FIELDS)}})
    value = {f"f{i}": f"value {i}" for i in range(FIELDS)}
    message = type_pb2.Field(name="f", number=3, json_name="g", type_url="x" * 40)
    pairs = {
        "Avro": ((serdes.AvroSerializer(ours, avro), serdes.AvroDeserializer(ours)),
                 (CAvroSerializer(theirs, avro), CAvroDeserializer(theirs)), value),
        "JSON": ((serdes.JSONSerializer(js, ours), serdes.JSONDeserializer(js)),
                 (CJSONSerializer(js, theirs), CJSONDeserializer(js)), value),
        "Protobuf": ((serdes.ProtobufSerializer(type_pb2.Field, ours), serdes.ProtobufDeserializer(type_pb2.Field)),
                     (CProtobufSerializer(type_pb2.Field, theirs, {}), CProtobufDeserializer(type_pb2.Field, {})),
                     message),
    }  # fmt: skip
    out = {}
    for kind, ((ser, de), (cser, cde), v) in pairs.items():
        ctx, cctx = serdes.SerializationContext(kind, "value"), SerializationContext(kind, MessageField.VALUE)
        assert ser(v, ctx) == cser(v, cctx), kind
        out[f"{kind} serialize+deserialize, logstore, us"] = _median_us(lambda: de(ser(v, ctx), ctx), 2000)  # noqa: B023
        out[f"{kind} serialize+deserialize, confluent-kafka, us"] = _median_us(lambda: cde(cser(v, cctx), cctx), 2000)  # noqa: B023
    return out


def main() -> None:
    from tests.client.serdes.test_serdes import registry_url

    for name, us in parse_costs().items():
        print(f"{name:60s} {us:10.1f}")
    server = registry_url.__wrapped__()  # type: ignore[attr-defined]
    url, _ = next(server)
    try:
        for name, us in serde_costs(url).items():
            print(f"{name:60s} {us:10.1f}")
    finally:
        next(server, None)


if __name__ == "__main__":
    main()

"""logstore's serdes against confluent-kafka's on the same schemas: identical wire bytes, and each
side decodes the other's; auto-registration, use.latest.version, caching, and bad input.

Both clients talk to one small in-process HTTP server (below) over logstore's own registry core
(logstore.schemas.registry), with the few routes serializers use; the broker's real listener is
another module's work and has its own tests.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient as ConfluentClient
from confluent_kafka.schema_registry.avro import AvroDeserializer as CAvroDeserializer
from confluent_kafka.schema_registry.avro import AvroSerializer as CAvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer as CJSONDeserializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer as CJSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer as CProtobufDeserializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer as CProtobufSerializer
from confluent_kafka.serialization import MessageField as CField
from confluent_kafka.serialization import SerializationContext as CContext
from google.protobuf import struct_pb2, timestamp_pb2, type_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.client import serdes
from logstore.client.serdes import aio, wire
from logstore.schemas import errors
from logstore.schemas.records import Reference
from logstore.schemas.registry import Registry, as_json

pytestmark = pytest.mark.unit


class _Handler(BaseHTTPRequestHandler):
    registry: Registry
    lock: threading.Lock
    calls: list[str]

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        self._serve("GET")

    def do_POST(self) -> None:
        self._serve("POST")

    def _serve(self, method: str) -> None:
        path = self.path.split("?")[0]
        self.calls.append(f"{method} {path}")
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        try:
            with self.lock:
                status, out = 200, self._route(method, path, body)
        except errors.RegistryError as e:
            status, out = e.status, e.body()
        raw = json.dumps(out).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _route(self, method: str, path: str, body: dict[str, Any]) -> Any:
        r = self.registry
        refs = [Reference(x["name"], x["subject"], int(x["version"])) for x in body.get("references") or []]
        kind = body.get("schemaType") or "AVRO"
        if m := re.fullmatch(r"/subjects/([^/]+)/versions", path):
            subject = _unquote(m[1])
            schema_id, records = r.register(subject, body["schema"], kind, refs)
            for key, value in records:
                r.state.apply(key, value)
            return {"id": schema_id}
        if m := re.fullmatch(r"/subjects/([^/]+)/versions/([^/]+)", path):
            return as_json(r.version(_unquote(m[1]), m[2]))
        if m := re.fullmatch(r"/subjects/([^/]+)", path):
            return as_json(r.lookup(_unquote(m[1]), body["schema"], kind, refs))
        if m := re.fullmatch(r"/schemas/ids/(\d+)", path):
            made = r.schema(int(m[1]))
            out: dict[str, Any] = {"schema": made.schema}
            if made.schema_type != "AVRO":
                out["schemaType"] = made.schema_type
            if made.references:
                out["references"] = [ref.json() for ref in made.references]
            return out
        raise errors.RegistryError(404, 404, f"no route {method} {path}")


def _unquote(text: str) -> str:
    from urllib.parse import unquote

    return unquote(text)


@pytest.fixture
def registry_url() -> Iterator[tuple[str, list[str]]]:
    calls: list[str] = []
    handler = type("Handler", (_Handler,), {"registry": Registry(), "lock": threading.Lock(), "calls": calls})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", calls
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def contexts(topic: str) -> tuple[serdes.SerializationContext, CContext]:
    return serdes.SerializationContext(topic, "value"), CContext(topic, CField.VALUE)


USER = json.dumps({"type": "record", "name": "User", "namespace": "acme",
                   "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": "string"},
                              {"name": "tags", "type": {"type": "array", "items": "string"}},
                              {"name": "email", "type": ["null", "string"], "default": None}]})  # fmt: skip
USER_V2 = json.dumps({**json.loads(USER), "fields": [*json.loads(USER)["fields"],
                                                     {"name": "age", "type": "int", "default": -1}]})  # fmt: skip


def test_avro_bytes_match_confluent_kafkas_and_each_reads_the_other(registry_url: tuple[str, list[str]]) -> None:
    url, _ = registry_url
    ours, theirs = serdes.SchemaRegistryClient({"url": url}), ConfluentClient({"url": url})
    ctx, cctx = contexts("users")
    value = {"id": 7, "name": "Ada ✓", "tags": ["a", "b"], "email": None}
    mine = serdes.AvroSerializer(ours, USER)(value, ctx)
    confluent = CAvroSerializer(theirs, USER)(value, cctx)
    assert mine == confluent
    assert mine is not None and mine[0] == 0 and int.from_bytes(mine[1:5], "big") == 1
    assert CAvroDeserializer(theirs)(mine, cctx) == value
    assert serdes.AvroDeserializer(ours)(confluent, ctx) == value
    # an evolved reader schema reads the old bytes with the new field's default
    assert serdes.AvroDeserializer(ours, USER_V2)(mine, ctx) == {**value, "age": -1}


def test_use_latest_version_writes_with_the_subjects_latest_schema(registry_url: tuple[str, list[str]]) -> None:
    url, _ = registry_url
    ours, theirs = serdes.SchemaRegistryClient({"url": url}), ConfluentClient({"url": url})
    ctx, cctx = contexts("users")
    serdes.AvroSerializer(ours, USER)({"id": 1, "name": "a", "tags": []}, ctx)
    serdes.AvroSerializer(ours, USER_V2)({"id": 1, "name": "a", "tags": [], "age": 3}, ctx)
    conf = {"auto.register.schemas": False, "use.latest.version": True}
    value = {"id": 2, "name": "b", "tags": [], "email": "b@x", "age": 4}
    mine = serdes.AvroSerializer(ours, None, conf=conf)(value, ctx)
    assert mine == CAvroSerializer(theirs, USER_V2, conf=conf)(value, cctx)
    assert mine is not None and int.from_bytes(mine[1:5], "big") == 2
    with pytest.raises(ValueError, match="cannot enable both"):
        serdes.AvroSerializer(ours, USER, conf={"use.latest.version": True})


def test_without_auto_register_an_unknown_schema_is_refused_with_40403(registry_url: tuple[str, list[str]]) -> None:
    url, _ = registry_url
    ours = serdes.SchemaRegistryClient({"url": url})
    serialize = serdes.AvroSerializer(ours, USER, conf={"auto.register.schemas": False})
    with pytest.raises(serdes.SchemaRegistryError) as refused:
        serialize({"id": 1, "name": "a", "tags": []}, serdes.SerializationContext("t", "value"))
    assert refused.value.error_code in (40401, 40403) and refused.value.http_status_code == 404


def test_the_registry_client_caches_ids_and_schemas(registry_url: tuple[str, list[str]]) -> None:
    url, calls = registry_url
    ours = serdes.SchemaRegistryClient({"url": url})
    serialize = serdes.AvroSerializer(ours, USER)
    deserialize = serdes.AvroDeserializer(ours)
    ctx = serdes.SerializationContext("users", "value")
    for i in range(50):
        data = serialize({"id": i, "name": "n", "tags": []}, ctx)
        assert deserialize(data, ctx)["id"] == i
    assert calls == ["POST /subjects/users-value/versions"]  # the id it registered names the schema too


PERSON = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Person", "type": "object",
                     "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
                     "required": ["name"], "additionalProperties": False})  # fmt: skip


def test_json_bytes_match_confluent_kafkas_and_each_reads_the_other(registry_url: tuple[str, list[str]]) -> None:
    url, _ = registry_url
    ours, theirs = serdes.SchemaRegistryClient({"url": url}), ConfluentClient({"url": url})
    ctx, cctx = contexts("people")
    value = {"name": "Zoë", "age": 36}
    mine = serdes.JSONSerializer(PERSON, ours)(value, ctx)
    confluent = CJSONSerializer(PERSON, theirs)(value, cctx)
    assert mine == confluent
    assert CJSONDeserializer(PERSON)(mine, cctx) == value
    assert serdes.JSONDeserializer(PERSON)(confluent, ctx) == value
    assert serdes.JSONDeserializer(None, schema_registry_client=ours)(confluent, ctx) == value
    with pytest.raises(serdes.SerializationError, match="age"):
        serdes.JSONSerializer(PERSON, ours)({"name": "x", "age": -1}, ctx)


@pytest.mark.parametrize("message", [
    timestamp_pb2.Timestamp(seconds=1_700_000_000, nanos=5),  # the file's only message: indexes [0]
    type_pb2.Field(name="f", number=3, json_name="g"),  # not the file's first message: indexes [1]
    struct_pb2.Value(struct_value=struct_pb2.Struct(fields={"a": struct_pb2.Value(number_value=1.5)})),
])  # fmt: skip
def test_protobuf_bytes_match_confluent_kafkas_and_each_reads_the_other(
    registry_url: tuple[str, list[str]], message: Any
) -> None:
    url, _ = registry_url
    ours, theirs = serdes.SchemaRegistryClient({"url": url}), ConfluentClient({"url": url})
    ctx, cctx = contexts("protos")
    kind = type(message)
    conf = {"use.deprecated.format": False} if "use.deprecated.format" in CProtobufSerializer._default_conf else {}
    mine = serdes.ProtobufSerializer(kind, ours)(message, ctx)
    confluent = CProtobufSerializer(kind, theirs, conf)(message, cctx)
    assert mine == confluent
    assert CProtobufDeserializer(kind, conf)(mine, cctx) == message
    assert serdes.ProtobufDeserializer(kind)(confluent, ctx) == message
    indexes, _ = wire.decode_indexes(wire.unframe(mine)[1])
    assert indexes == serdes.protobuf.message_indexes(kind.DESCRIPTOR)


def test_message_indexes_and_framing_round_trip() -> None:
    for indexes in ([0], [1], [0, 2], [3, 0, 1], [300]):
        framed = wire.frame(258, b"payload", indexes)
        schema_id, rest = wire.unframe(framed)
        found, body = wire.decode_indexes(rest)
        assert (schema_id, found, bytes(body)) == (258, indexes, b"payload")
    assert wire.frame(1, b"", [0]) == b"\x00\x00\x00\x00\x01\x00"
    for bad in (b"", b"\x00\x00", b"\x01\x00\x00\x00\x01payload"):
        with pytest.raises(serdes.SerializationError):
            wire.unframe(bad)
    with pytest.raises(serdes.SerializationError):
        serdes.AvroDeserializer(serdes.SchemaRegistryClient({"url": "http://127.0.0.1:9"}))(b"\x02junk", None)


VALUES = st.fixed_dictionaries({
    "id": st.integers(-(2**63), 2**63 - 1),
    "name": st.text(max_size=20),
    "tags": st.lists(st.text(max_size=5), max_size=4),
    "email": st.none() | st.text(max_size=10),
})  # fmt: skip


@pytest.mark.property
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=VALUES)
def test_any_avro_value_gives_confluent_kafkas_bytes(registry_url: tuple[str, list[str]], value: dict[str, Any]) -> None:
    url, _ = registry_url
    ctx, cctx = contexts("users")
    mine = serdes.AvroSerializer(serdes.SchemaRegistryClient({"url": url}), USER)(value, ctx)
    assert mine == CAvroSerializer(ConfluentClient({"url": url}), USER)(value, cctx)
    assert serdes.AvroDeserializer(serdes.SchemaRegistryClient({"url": url}))(mine, ctx) == value


@pytest.mark.property
@settings(max_examples=200, deadline=None)
@given(schema_id=st.integers(0, 2**32 - 1), indexes=st.lists(st.integers(0, 2**31), min_size=1, max_size=6),
       payload=st.binary(max_size=64))  # fmt: skip
def test_framing_round_trips(schema_id: int, indexes: list[int], payload: bytes) -> None:
    found_id, rest = wire.unframe(wire.frame(schema_id, payload, indexes))
    found_indexes, body = wire.decode_indexes(rest)
    assert (found_id, found_indexes, bytes(body)) == (schema_id, indexes, payload)


def test_the_asyncio_serdes_write_the_same_bytes_and_read_confluent_kafkas(registry_url: tuple[str, list[str]]) -> None:
    url, calls = registry_url
    theirs = ConfluentClient({"url": url})
    user = {"id": 7, "name": "Ada", "tags": ["a"], "email": None}
    person = {"name": "Zoë", "age": 36}
    stamp = timestamp_pb2.Timestamp(seconds=5, nanos=6)
    expected = {
        "avro": CAvroSerializer(theirs, USER)(user, CContext("a", CField.VALUE)),
        "json": CJSONSerializer(PERSON, theirs)(person, CContext("j", CField.VALUE)),
        "protobuf": CProtobufSerializer(timestamp_pb2.Timestamp, theirs, {})(stamp, CContext("p", CField.VALUE)),
    }

    async def run() -> dict[str, Any]:
        async with aio.AsyncSchemaRegistryClient({"url": url}) as client:
            got = {
                "avro": await aio.AsyncAvroSerializer(client, USER)(user, serdes.SerializationContext("a", "value")),
                "json": await aio.AsyncJSONSerializer(PERSON, client)(person, serdes.SerializationContext("j", "value")),
                "protobuf": await aio.AsyncProtobufSerializer(timestamp_pb2.Timestamp, client)(
                    stamp, serdes.SerializationContext("p", "value")),
            }  # fmt: skip
            calls.clear()
            got["read"] = (
                await aio.AsyncAvroDeserializer(client)(expected["avro"], None),
                await aio.AsyncJSONDeserializer(None, schema_registry_client=client)(expected["json"], None),
                await aio.AsyncProtobufDeserializer(timestamp_pb2.Timestamp)(expected["protobuf"], None),
            )
            return got

    got = asyncio.run(run())
    assert {k: got[k] for k in expected} == expected
    assert got["read"] == (user, person, stamp)
    assert calls == []  # the ids it registered name their schemas: nothing to fetch


def test_a_registry_that_cannot_be_reached_is_a_schema_registry_error() -> None:
    with pytest.raises(serdes.SchemaRegistryError, match="cannot be reached"):
        serdes.SchemaRegistryClient({"url": "http://127.0.0.1:9"}).get_schema(1)

    async def run() -> None:
        async with aio.AsyncSchemaRegistryClient({"url": "http://127.0.0.1:9"}) as client:
            await client.get_schema(1)

    with pytest.raises(serdes.SchemaRegistryError, match="cannot be reached"):
        asyncio.run(run())

"""Avro serializer and deserializer with Confluent's framing (fastavro writes and reads the body).

``AvroSerializer(client, schema_str, to_dict=None, conf=None)`` and
``AvroDeserializer(client, schema_str=None, from_dict=None)``, as confluent-kafka's:
the serializer writes magic 0, the schema id and the Avro binary encoding of
``to_dict(obj, ctx)`` (or ``obj``); the deserializer reads the writer's schema
by the id (cached per id) and resolves it to ``schema_str`` when one is given
(Avro's schema resolution), else decodes with the writer's schema. The
record's full name names the subject for the record strategies.
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Callable
from typing import Any

import fastavro

from logstore.client.serdes.base import Context, SchemaSerializer
from logstore.client.serdes.registry_client import Schema, SchemaRegistryClient
from logstore.client.serdes.wire import SerializationError, frame, unframe


def _parse(schema_str: str, named: dict[str, Any] | None = None) -> Any:
    try:
        return fastavro.parse_schema(json.loads(schema_str), named_schemas=named if named is not None else {})
    except (ValueError, fastavro.schema.SchemaParseException, fastavro.schema.UnknownType) as e:
        raise SerializationError(f"not an Avro schema: {e}") from None


def _record_name(parsed: Any) -> str | None:
    return parsed.get("name") if isinstance(parsed, dict) else None


class AvroSerializer:
    """See the module doc."""

    def __init__(self, schema_registry_client: SchemaRegistryClient | Any, schema_str: str | None = None,
                 to_dict: Callable[[Any, Context | None], Any] | None = None,
                 conf: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._serializer = SchemaSerializer(schema_registry_client, conf)
        if schema_str is None and not self._serializer.use_latest:
            raise ValueError("an AvroSerializer needs schema_str unless use.latest.version is set")
        self._schema = None if schema_str is None else Schema(schema_str, "AVRO")
        self._parsed = None if schema_str is None else _parse(schema_str)
        self._to_dict = to_dict
        self._parsed_by_text: dict[str, Any] = {}

    def __call__(self, obj: Any, ctx: Context | None = None) -> bytes | None:
        if obj is None:
            return None
        schema_id, schema = self._serializer.resolve(ctx, _record_name(self._parsed), self._schema or Schema("", "AVRO"))
        return self._write(schema_id, schema, obj, ctx)

    def _write(self, schema_id: int, schema: Schema, obj: Any, ctx: Context | None) -> bytes:
        parsed: Any = self._parsed
        if schema is not self._schema:  # use.latest.version: the subject's latest schema
            if schema.schema_str not in self._parsed_by_text:
                self._parsed_by_text[schema.schema_str] = _parse(schema.schema_str)
            parsed = self._parsed_by_text[schema.schema_str]
        value = self._to_dict(obj, ctx) if self._to_dict is not None else obj
        out = io.BytesIO()
        try:
            fastavro.schemaless_writer(out, parsed, value)
        except (ValueError, TypeError, KeyError, AttributeError) as e:
            raise SerializationError(f"the value does not fit the Avro schema: {e}") from None
        return frame(schema_id, out.getvalue())


class AvroDeserializer:
    """See the module doc."""

    def __init__(self, schema_registry_client: SchemaRegistryClient | Any, schema_str: str | None = None,
                 from_dict: Callable[[Any, Context | None], Any] | None = None) -> None:  # fmt: skip
        self._client = schema_registry_client
        self._reader = None if schema_str is None else _parse(schema_str)
        self._from_dict = from_dict
        self._writers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, data: bytes | None, ctx: Context | None = None) -> Any:
        if data is None:
            return None
        schema_id, body = unframe(data)
        return self._read(self._writer(schema_id), schema_id, body, ctx)

    def _read(self, writer: Any, schema_id: int, body: memoryview, ctx: Context | None) -> Any:
        try:
            value = fastavro.schemaless_reader(io.BytesIO(body), writer, self._reader)
        except (ValueError, EOFError, IndexError, fastavro.read.SchemaResolutionError) as e:
            raise SerializationError(f"cannot decode Avro written with schema {schema_id}: {e}") from None
        return self._from_dict(value, ctx) if self._from_dict is not None else value

    def _writer(self, schema_id: int) -> Any:
        with self._lock:
            if schema_id in self._writers:
                return self._writers[schema_id]
        schema = self._client.get_schema(schema_id)
        referenced = [self._client.get_version(r.subject, r.version).schema.schema_str for r in schema.references]
        return self._keep(schema_id, schema, referenced)

    def _cached(self, schema_id: int) -> Any:
        with self._lock:
            return self._writers.get(schema_id)

    def _keep(self, schema_id: int, schema: Schema, referenced: list[str]) -> Any:
        named: dict[str, Any] = {}
        for text in referenced:  # the referenced named types, defined first
            _parse(text, named)
        parsed = _parse(schema.schema_str, named)
        with self._lock:
            self._writers[schema_id] = parsed
        return parsed

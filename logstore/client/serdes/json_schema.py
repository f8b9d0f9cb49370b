"""JSON Schema serializer and deserializer with Confluent's framing (jsonschema validates).

``JSONSerializer(schema_str, client, to_dict=None, conf=None)`` and
``JSONDeserializer(schema_str, from_dict=None, schema_registry_client=None)``, as
confluent-kafka's: the serializer validates ``to_dict(obj, ctx)`` (or ``obj``)
against the schema and writes magic 0, the id and the JSON text, compact and
UTF-8 (``,``/``:`` separators, non-ASCII kept: confluent-kafka's bytes); the
deserializer validates what it reads against ``schema_str`` (or, without one,
the writer's schema by the id) and returns the decoded value. A schema's
``title`` names the record for the record strategies.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import jsonschema
import jsonschema.exceptions

from logstore.client.serdes.base import Context, SchemaSerializer
from logstore.client.serdes.registry_client import Schema, SchemaRegistryClient
from logstore.client.serdes.wire import SerializationError, frame, unframe


def _validator(schema_str: str) -> Any:
    try:
        schema = json.loads(schema_str)
        cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
        cls.check_schema(schema)
    except (ValueError, jsonschema.exceptions.SchemaError) as e:
        raise SerializationError(f"not a JSON Schema: {e}") from None
    return cls(schema)


def _valid(validator: Any, value: Any) -> None:
    error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path)
        raise SerializationError(f"the value does not meet the JSON Schema at #/{where}: {error.message}")


def dumps(value: Any) -> bytes:
    """confluent-kafka's JSON bytes: compact separators, non-ASCII kept, UTF-8."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class JSONSerializer:
    """See the module doc."""

    def __init__(self, schema_str: str | None, schema_registry_client: SchemaRegistryClient | Any,
                 to_dict: Callable[[Any, Context | None], Any] | None = None,
                 conf: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._serializer = SchemaSerializer(schema_registry_client, conf, {"validate": True})
        self._validate = bool(self._serializer.conf["validate"])
        if schema_str is None and not self._serializer.use_latest:
            raise ValueError("a JSONSerializer needs schema_str unless use.latest.version is set")
        self._schema = None if schema_str is None else Schema(schema_str, "JSON")
        self._validator = None if schema_str is None else _validator(schema_str)
        self._title = None if schema_str is None else json.loads(schema_str).get("title")
        self._to_dict = to_dict
        self._validators: dict[str, Any] = {}

    def __call__(self, obj: Any, ctx: Context | None = None) -> bytes | None:
        if obj is None:
            return None
        schema_id, schema = self._serializer.resolve(ctx, self._title, self._schema or Schema("", "JSON"))
        return self._write(schema_id, schema, obj, ctx)

    def _write(self, schema_id: int, schema: Schema, obj: Any, ctx: Context | None) -> bytes:
        value = self._to_dict(obj, ctx) if self._to_dict is not None else obj
        if self._validate:
            validator = self._validator
            if schema is not self._schema:  # use.latest.version: the subject's latest schema
                if schema.schema_str not in self._validators:
                    self._validators[schema.schema_str] = _validator(schema.schema_str)
                validator = self._validators[schema.schema_str]
            _valid(validator, value)
        return frame(schema_id, dumps(value))


class JSONDeserializer:
    """See the module doc."""

    def __init__(self, schema_str: str | None, from_dict: Callable[[Any, Context | None], Any] | None = None,
                 schema_registry_client: SchemaRegistryClient | Any | None = None) -> None:  # fmt: skip
        if schema_str is None and schema_registry_client is None:
            raise ValueError("a JSONDeserializer needs schema_str or a schema_registry_client")
        self._validator = None if schema_str is None else _validator(schema_str)
        self._client = schema_registry_client
        self._from_dict = from_dict
        self._writers: dict[int, Any] = {}
        self._lock = threading.Lock()

    def __call__(self, data: bytes | None, ctx: Context | None = None) -> Any:
        if data is None:
            return None
        schema_id, body = unframe(data)
        return self._read(self._validator or self._writer(schema_id), body, ctx)

    def _read(self, validator: Any, body: memoryview, ctx: Context | None) -> Any:
        try:
            value = json.loads(bytes(body))
        except ValueError as e:
            raise SerializationError(f"not JSON: {e}") from None
        _valid(validator, value)
        return self._from_dict(value, ctx) if self._from_dict is not None else value

    def _writer(self, schema_id: int) -> Any:
        assert self._client is not None
        with self._lock:
            if schema_id in self._writers:
                return self._writers[schema_id]
        return self._keep(schema_id, self._client.get_schema(schema_id))

    def _cached(self, schema_id: int) -> Any:
        with self._lock:
            return self._validator or self._writers.get(schema_id)

    def _keep(self, schema_id: int, schema: Schema) -> Any:
        found = _validator(schema.schema_str)
        with self._lock:
            self._writers[schema_id] = found
        return found

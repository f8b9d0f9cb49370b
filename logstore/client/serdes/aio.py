"""The asyncio forms: a registry client over aiohttp, and serdes whose calls are awaited.

``AsyncSchemaRegistryClient(conf)`` takes the sync client's settings and keeps
the same caches (:class:`~logstore.client.serdes.registry_client.ClientCore`);
its methods are coroutines; one ``aiohttp.ClientSession`` (keep-alive) is opened
on first use and closed by :meth:`AsyncSchemaRegistryClient.close` (or ``async
with``). ``AsyncAvroSerializer``, ``AsyncJSONSerializer``,
``AsyncProtobufSerializer`` and their deserializers (confluent-kafka's names and
arguments) await the registry only when their caches miss; the bodies are
encoded and decoded by the same code as the sync serdes, so the bytes are the same.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from types import TracebackType
from typing import Any

import aiohttp
from google.protobuf.message import Message

from logstore.client.serdes.avro import AvroDeserializer, AvroSerializer, _record_name
from logstore.client.serdes.base import Context
from logstore.client.serdes.json_schema import JSONDeserializer, JSONSerializer
from logstore.client.serdes.protobuf import (
    KNOWN_TYPES_PREFIXES,
    ProtobufDeserializer,
    ProtobufSerializer,
    schema_text,
)
from logstore.client.serdes.registry_client import (
    ClientCore,
    RegisteredSchema,
    Request,
    Schema,
    SchemaReference,
    SchemaRegistryError,
)
from logstore.client.serdes.wire import frame, unframe


class AsyncSchemaRegistryClient(ClientCore):
    """See the module doc."""

    def __init__(self, conf: dict[str, Any]) -> None:
        super().__init__(conf)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> AsyncSchemaRegistryClient:
        return self

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None,
                        trace: TracebackType | None) -> None:  # fmt: skip
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        hit = self.cached_id(subject_name, schema, normalize_schemas)
        if hit is not None:
            return hit
        found = await self._call(self.register_request(subject_name, schema, normalize_schemas))
        return self.store_id(subject_name, schema, normalize_schemas, found)

    async def lookup_schema(self, subject_name: str, schema: Schema,
                            normalize_schemas: bool = False) -> RegisteredSchema:  # fmt: skip
        hit = self.cached_lookup(subject_name, schema, normalize_schemas)
        if hit is not None:
            return hit
        found = await self._call(self.lookup_request(subject_name, schema, normalize_schemas))
        return self.store_lookup(subject_name, schema, normalize_schemas, found)

    async def get_schema(self, schema_id: int) -> Schema:
        hit = self.cached_schema(schema_id)
        return hit if hit is not None else self.store_schema(schema_id, await self._call(self.schema_request(schema_id)))

    async def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        hit = self.cached_latest(subject_name)
        if hit is not None:
            return hit
        return self.store_latest(subject_name, await self._call(self.latest_request(subject_name)))

    async def get_version(self, subject_name: str, version: int) -> RegisteredSchema:
        hit = self.cached_version(subject_name, version)
        if hit is not None:
            return hit
        return self.store_version(subject_name, version, await self._call(self.version_request(subject_name, version)))

    async def _call(self, request: Request) -> Any:
        method, _, body, _ = request
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout))
        data = None if body is None else json.dumps(body).encode()
        try:
            async with self._session.request(method, self.target(request), data=data,
                                             headers=self.headers(data is not None)) as response:  # fmt: skip
                raw = await response.read()
                if response.status >= 400:
                    raise self.refusal(response.status, raw)
                return json.loads(raw or b"null")
        except aiohttp.ClientError as e:
            raise SchemaRegistryError(-1, -1, f"the registry at {self.url} cannot be reached: {e}") from None


class AsyncAvroSerializer:
    def __init__(self, schema_registry_client: AsyncSchemaRegistryClient, schema_str: str | None = None,
                 to_dict: Callable[[Any, Context | None], Any] | None = None,
                 conf: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._core = AvroSerializer(schema_registry_client, schema_str, to_dict, conf)

    async def __call__(self, obj: Any, ctx: Context | None = None) -> bytes | None:
        if obj is None:
            return None
        core = self._core
        schema_id, schema = await core._serializer.resolve_async(ctx, _record_name(core._parsed),
                                                                 core._schema or Schema("", "AVRO"))  # fmt: skip
        return core._write(schema_id, schema, obj, ctx)


class AsyncAvroDeserializer:
    def __init__(self, schema_registry_client: AsyncSchemaRegistryClient, schema_str: str | None = None,
                 from_dict: Callable[[Any, Context | None], Any] | None = None) -> None:  # fmt: skip
        self._client = schema_registry_client
        self._core = AvroDeserializer(schema_registry_client, schema_str, from_dict)

    async def __call__(self, data: bytes | None, ctx: Context | None = None) -> Any:
        if data is None:
            return None
        schema_id, body = unframe(data)
        writer = self._core._cached(schema_id)
        if writer is None:
            schema = await self._client.get_schema(schema_id)
            referenced = [(await self._client.get_version(r.subject, r.version)).schema.schema_str
                          for r in schema.references]  # fmt: skip
            writer = self._core._keep(schema_id, schema, referenced)
        return self._core._read(writer, schema_id, body, ctx)


class AsyncJSONSerializer:
    def __init__(self, schema_str: str | None, schema_registry_client: AsyncSchemaRegistryClient,
                 to_dict: Callable[[Any, Context | None], Any] | None = None,
                 conf: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._core = JSONSerializer(schema_str, schema_registry_client, to_dict, conf)

    async def __call__(self, obj: Any, ctx: Context | None = None) -> bytes | None:
        if obj is None:
            return None
        core = self._core
        schema_id, schema = await core._serializer.resolve_async(ctx, core._title, core._schema or Schema("", "JSON"))
        return core._write(schema_id, schema, obj, ctx)


class AsyncJSONDeserializer:
    def __init__(self, schema_str: str | None, from_dict: Callable[[Any, Context | None], Any] | None = None,
                 schema_registry_client: AsyncSchemaRegistryClient | None = None) -> None:  # fmt: skip
        self._client = schema_registry_client
        self._core = JSONDeserializer(schema_str, from_dict, schema_registry_client)

    async def __call__(self, data: bytes | None, ctx: Context | None = None) -> Any:
        if data is None:
            return None
        schema_id, body = unframe(data)
        validator = self._core._cached(schema_id)
        if validator is None:
            assert self._client is not None
            validator = self._core._keep(schema_id, await self._client.get_schema(schema_id))
        return self._core._read(validator, body, ctx)


class AsyncProtobufSerializer:
    def __init__(self, msg_type: type[Message], schema_registry_client: AsyncSchemaRegistryClient,
                 conf: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._client = schema_registry_client
        self._core = ProtobufSerializer(msg_type, schema_registry_client, conf)

    async def __call__(self, message: Message | None, ctx: Context | None = None) -> bytes | None:
        if message is None:
            return None
        core = self._core
        if not isinstance(message, core._msg_type):
            return core(message, ctx)  # the sync path raises the type error
        if core._schema is None:
            file: Any = core._msg_type.DESCRIPTOR.file
            core._schema = Schema(schema_text(file), "PROTOBUF", await self._references(file))
        schema_id, _ = await core._serializer.resolve_async(ctx, core._name, core._schema)
        return frame(schema_id, message.SerializeToString(), core._indexes)

    async def _references(self, file: Any) -> tuple[SchemaReference, ...]:
        found = []
        for dependency in file.dependencies:
            if self._core._skip_known and dependency.name.startswith(KNOWN_TYPES_PREFIXES):
                continue
            schema = Schema(schema_text(dependency), "PROTOBUF", await self._references(dependency))
            normalize = self._core._serializer.normalize
            if self._core._serializer.auto_register:
                await self._client.register_schema(dependency.name, schema, normalize)
            version = (await self._client.lookup_schema(dependency.name, schema, normalize)).version
            found.append(SchemaReference(dependency.name, dependency.name, version))
        return tuple(found)


class AsyncProtobufDeserializer:
    def __init__(self, message_type: type[Message], conf: dict[str, Any] | None = None) -> None:
        self._core = ProtobufDeserializer(message_type, conf)

    async def __call__(self, data: bytes | None, ctx: Context | None = None) -> Message | None:
        return self._core(data, ctx)  # no registry call: the message type is given

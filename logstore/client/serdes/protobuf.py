"""Protobuf serializer and deserializer with Confluent's framing (the ``protobuf`` runtime encodes).

``ProtobufSerializer(msg_type, client, conf=None)`` and
``ProtobufDeserializer(message_type, conf=None)``, as confluent-kafka's: the
serializer registers the message's .proto file as confluent-kafka does (the
base64 ``FileDescriptorProto``; its imports first, each under the subject named
by the import path, as references; Google's well-known types are skipped,
``skip.known.types``), then writes magic 0, the id, the message indexes (the
message type's path in its file, see wire.py) and ``SerializeToString()``. The
deserializer skips the indexes and parses the bytes as ``message_type``.
"""

from __future__ import annotations

import base64
import threading
from typing import Any

from google.protobuf.descriptor import Descriptor, FileDescriptor
from google.protobuf.message import DecodeError, Message

from logstore.client.serdes.base import Context, SchemaSerializer
from logstore.client.serdes.registry_client import Schema, SchemaReference, SchemaRegistryClient
from logstore.client.serdes.wire import SerializationError, decode_indexes, frame, unframe

KNOWN_TYPES_PREFIXES = ("google/protobuf/", "google/type/", "confluent/")


def message_indexes(descriptor: Descriptor) -> list[int]:
    """The path of ``descriptor`` in its file: the top-level message's index, then nested ones."""
    path = []
    current: Descriptor | None = descriptor
    while current is not None:
        parent = current.containing_type
        siblings = list(parent.nested_types if parent is not None else current.file.message_types_by_name.values())
        path.append(next(i for i, d in enumerate(siblings) if d.full_name == current.full_name))
        current = parent
    return path[::-1]


def schema_text(file: FileDescriptor) -> str:
    """What confluent-kafka registers for a .proto file: its FileDescriptorProto, base64."""
    return base64.standard_b64encode(file.serialized_pb).decode("ascii")


class ProtobufSerializer:
    """See the module doc."""

    def __init__(self, msg_type: type[Message], schema_registry_client: SchemaRegistryClient | Any,
                 conf: dict[str, Any] | None = None) -> None:  # fmt: skip
        self._serializer = SchemaSerializer(schema_registry_client, conf, {"skip.known.types": True})
        self._skip_known = bool(self._serializer.conf["skip.known.types"])
        self._client = schema_registry_client
        self._msg_type = msg_type
        descriptor: Any = msg_type.DESCRIPTOR
        self._indexes = message_indexes(descriptor)
        self._name = descriptor.full_name
        self._schema: Schema | None = None
        self._lock = threading.Lock()

    def __call__(self, message: Message | None, ctx: Context | None = None) -> bytes | None:
        if message is None:
            return None
        if not isinstance(message, self._msg_type):
            raise SerializationError(f"message must be of type {self._msg_type.__name__}, not {type(message).__name__}")
        schema_id, _ = self._serializer.resolve(ctx, self._name, self._file_schema())
        return frame(schema_id, message.SerializeToString(), self._indexes)

    def _file_schema(self) -> Schema:
        with self._lock:
            if self._schema is None:
                file: Any = self._msg_type.DESCRIPTOR.file
                self._schema = Schema(schema_text(file), "PROTOBUF", self._references(file))
            return self._schema

    def _references(self, file: FileDescriptor) -> tuple[SchemaReference, ...]:
        """The imports of ``file``, each registered (or looked up) under its path, depth first."""
        found = []
        for dependency in file.dependencies:
            if self._skip_known and dependency.name.startswith(KNOWN_TYPES_PREFIXES):
                continue
            schema = Schema(schema_text(dependency), "PROTOBUF", self._references(dependency))
            if self._serializer.auto_register:
                self._client.register_schema(dependency.name, schema, self._serializer.normalize)
            version = self._client.lookup_schema(dependency.name, schema, self._serializer.normalize).version
            found.append(SchemaReference(dependency.name, dependency.name, version))
        return tuple(found)


class ProtobufDeserializer:
    """See the module doc."""

    def __init__(self, message_type: type[Message], conf: dict[str, Any] | None = None) -> None:
        if conf:
            unknown = set(conf) - {"use.deprecated.format"}
            if unknown or conf.get("use.deprecated.format"):
                raise ValueError(f"unsupported ProtobufDeserializer settings: {', '.join(sorted(conf))}")
        self._message_type = message_type

    def __call__(self, data: bytes | None, ctx: Context | None = None) -> Message | None:
        if data is None:
            return None
        _, rest = unframe(data)
        _, body = decode_indexes(rest)
        try:
            return self._message_type.FromString(bytes(body))
        except DecodeError as e:
            raise SerializationError(f"not a {self._message_type.__name__}: {e}") from None

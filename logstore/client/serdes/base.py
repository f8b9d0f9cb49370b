"""What the three serializers share: Confluent's settings, subject names, and the id to write.

Settings (confluent-kafka's names and defaults): ``auto.register.schemas``
(True: register the serializer's schema under the subject on first use, else
look it up and fail if it is not there), ``use.latest.version`` (False: write
with the subject's latest version instead; cannot be combined with
auto-registration), ``normalize.schemas`` (False), ``subject.name.strategy``
(``topic_subject_name_strategy``: ``{topic}-key`` / ``{topic}-value``; also
``topic_record_subject_name_strategy`` and ``record_subject_name_strategy``).

A serializer resolves a subject's id once and keeps it (the registry never
changes what an id names); with ``use.latest.version`` it asks the client,
whose cache follows ``latest.cache.ttl.sec``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

from logstore.client.serdes.registry_client import RegisteredSchema, Schema, SchemaRegistryClient
from logstore.client.serdes.wire import SerializationError


class Context(Protocol):
    """What a serializer is called with (confluent-kafka's and logstore's SerializationContext)."""

    topic: str | None
    field: str


class MessageField:
    """confluent-kafka's names for the two fields a record serializes."""

    KEY = "key"
    VALUE = "value"


class SerializationContext:
    """A topic and the field being (de)serialized, as confluent-kafka's."""

    __slots__ = ("field", "headers", "topic")

    def __init__(self, topic: str | None, field: str, headers: Any = None) -> None:
        self.topic = topic
        self.field = field
        self.headers = headers


SubjectNameStrategy = Callable[[Context, str | None], str]


def topic_subject_name_strategy(ctx: Context, record_name: str | None) -> str:
    return f"{ctx.topic}-{ctx.field}"


def topic_record_subject_name_strategy(ctx: Context, record_name: str | None) -> str:
    return f"{ctx.topic}-{record_name}"


def record_subject_name_strategy(ctx: Context, record_name: str | None) -> str:
    if not record_name:
        raise SerializationError("record_subject_name_strategy needs a named record type")
    return record_name


DEFAULTS: dict[str, Any] = {
    "auto.register.schemas": True,
    "use.latest.version": False,
    "normalize.schemas": False,
    "subject.name.strategy": topic_subject_name_strategy,
}


class SchemaSerializer:
    """The settings and the subject -> id resolution of one serializer (see the module doc)."""

    def __init__(self, client: Any, conf: dict[str, Any] | None,
                 extra: dict[str, Any] | None = None) -> None:  # fmt: skip
        known = {**DEFAULTS, **(extra or {})}
        given = dict(conf or {})
        unknown = set(given) - set(known)
        if unknown:
            raise ValueError(f"unknown serializer settings: {', '.join(sorted(unknown))}")
        self.conf = {**known, **given}
        self.client = client  # a SchemaRegistryClient, or aio's AsyncSchemaRegistryClient
        self.auto_register = bool(self.conf["auto.register.schemas"])
        self.use_latest = bool(self.conf["use.latest.version"])
        self.normalize = bool(self.conf["normalize.schemas"])
        if self.auto_register and self.use_latest:
            raise ValueError("cannot enable both use.latest.version and auto.register.schemas")
        self.subject_name: SubjectNameStrategy = self.conf["subject.name.strategy"]
        if not callable(self.subject_name):
            raise ValueError("subject.name.strategy must be callable")
        self._ids: dict[str, int] = {}
        self._lock = threading.Lock()

    def resolve(self, ctx: Context | None, record_name: str | None, schema: Schema) -> tuple[int, Schema]:
        """(the id to write, the schema to write with) for a record of this subject."""
        subject = self._subject(ctx, record_name)
        client: SchemaRegistryClient = self.client
        if self.use_latest:
            latest: RegisteredSchema = client.get_latest_version(subject)
            return latest.schema_id, latest.schema
        with self._lock:
            known = self._ids.get(subject)
        if known is None:
            if self.auto_register:
                known = client.register_schema(subject, schema, self.normalize)
            else:
                known = client.lookup_schema(subject, schema, self.normalize).schema_id
            with self._lock:
                self._ids[subject] = known
        return known, schema

    async def resolve_async(self, ctx: Context | None, record_name: str | None, schema: Schema) -> tuple[int, Schema]:
        """:meth:`resolve` through an asyncio client (logstore.client.serdes.aio)."""
        subject = self._subject(ctx, record_name)
        client: Any = self.client
        if self.use_latest:
            latest: RegisteredSchema = await client.get_latest_version(subject)
            return latest.schema_id, latest.schema
        with self._lock:
            known = self._ids.get(subject)
        if known is None:
            if self.auto_register:
                known = await client.register_schema(subject, schema, self.normalize)
            else:
                known = (await client.lookup_schema(subject, schema, self.normalize)).schema_id
            with self._lock:
                self._ids[subject] = known
        assert known is not None
        return known, schema

    def _subject(self, ctx: Context | None, record_name: str | None) -> str:
        if ctx is None:
            raise SerializationError("a SerializationContext (topic, field) is needed to name the subject")
        return self.subject_name(ctx, record_name)

"""Schema ids checked on produce: topics that refuse records without a registered schema id.

A topic with ``confluent.value.schema.validation=true`` (or Redpanda's
``redpanda.value.schema.id.validation=true``; the ``key`` pair for keys)
takes only records whose value is in Confluent's wire format:

    byte 0: magic 0 | bytes 1-4: schema id, big-endian int32 | the serialized payload

with an id the schema registry has registered (a live version) under the
subject the topic's ``confluent.value.subject.name.strategy`` names:

- ``TopicNameStrategy`` (default): ``<topic>-value`` (``<topic>-key``);
- ``RecordNameStrategy``: the schema's record name (registry.py's
  ``Registry.record_names``: an Avro named type's full name, a JSON Schema's
  ``title``, a Protobuf schema's top-level messages);
- ``TopicRecordNameStrategy``: ``<topic>-<record name>``.

Confluent's class names (``io.confluent.kafka.serializers.subject.RecordNameStrategy``)
are taken too. A null value (a tombstone) or null key carries no payload and
passes. A batch with any refused record is refused whole with INVALID_RECORD,
each refused record named with its reason (KIP-467 ``record_errors``), as
Kafka refuses a batch for a record without a key in a compacted topic.

Cost (docs/benchmarks.md, ~11 µs per 1,000-record batch): on top of storage's
one C scan, one C walk of the records (``ls_schema_ids``: the ids of the keys
or values, and the one id they share when they agree, no Python per record)
and, per batch, a dict and a set lookup: the allowed ids per (topic, key or
value, strategy) are cached with the registry's generation
(``RegistryService.generation``, which rises whenever ``_schemas`` adds a
record) and rebuilt only when it changes. numpy runs when the ids differ
within a batch (``np.isin`` against the allowed ids) and for compressed
batches (decompressed by ``columns_of``, ids gathered by :func:`framed_ids`);
Python runs per record only on the refusal path, to name the records.

Where the registry state comes from: the broker's own registry when
``schema.registry.listeners`` is set; otherwise this module reads ``_schemas``
itself (a :class:`~logstore.schemas.service.RegistryService` with no HTTP
listener), so a broker without a registry listener still validates, against
its copy of ``_schemas-0``. Invariant: the state is that of this broker's copy
of ``_schemas-0`` up to its high watermark, read before each validated batch;
a broker holding no copy of it knows no ids and refuses every framed record
of a validated topic (its message says so).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from kio.schema.errors import ErrorCode

from logstore._native import ffi, lib, raise_for
from logstore.broker.context import Services
from logstore.broker.replication.partition import AppendResult
from logstore.broker.schema_registry import SchemasTopic
from logstore.records.batch import Columns, columns_of
from logstore.schemas.registry import Registry
from logstore.schemas.service import RegistryService
from logstore.storage.config import LogConfig

MAGIC = 0
FRAME_BYTES = 5  # magic byte + 4-byte id
ID_NULL, ID_NONE, ID_MIXED = -1, -2, -3  # a null field; a field without the framing; records that differ
_HAVE_C = hasattr(lib, "ls_schema_ids")  # an extension built before it: the numpy path
assert not _HAVE_C or (lib.LS_SCHEMA_ID_NULL, lib.LS_SCHEMA_ID_NONE, lib.LS_SCHEMA_ID_MIXED) == (ID_NULL, ID_NONE, ID_MIXED)
_ALLOWED_KEPT = 4096  # cached (topic, part, strategy) entries; cleared whole past this
_NAMES = {"TopicNameStrategy": "topic", "RecordNameStrategy": "record", "TopicRecordNameStrategy": "topic_record"}


def strategy_of(name: str) -> str:
    """``TopicNameStrategy`` (or Confluent's class name of it) -> ``topic``; ``record``, ``topic_record``."""
    return _NAMES[name.rsplit(".", 1)[-1]]


def subject_strategy(config: LogConfig, part: str) -> str:
    """The topic's subject name strategy for ``part`` (``key``/``value``): Confluent's key, else
    Redpanda's when only that one is set."""
    confluent = f"confluent.{part}.subject.name.strategy"
    redpanda = f"redpanda.{part}.subject.name.strategy"
    if confluent not in config.overrides and redpanda in config.overrides:
        return str(config.values[redpanda])
    return str(config.values[confluent])


def framed_ids(buffer: Any, positions: np.ndarray, lengths: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(framed, ids) of the fields at ``positions``/``lengths`` of ``buffer``: whether each starts
    with magic 0 and has an id (at least 5 bytes), and the id its bytes 1-4 hold (uint32;
    meaningless where not framed). Vectorized: the magic bytes are one ``take`` of the bytes, the
    ids one fancy index into a big-endian uint32 view of ``buffer`` at every byte (stride 1, no
    copy). The path of compressed batches (the C walk, ``ls_schema_ids``, takes the others)."""
    raw = np.frombuffer(buffer, dtype=np.uint8)
    size = len(raw)
    if size < FRAME_BYTES:
        return np.zeros(len(lengths), dtype=bool), np.zeros(len(lengths), dtype=np.uint32)
    words = np.ndarray((size - 3,), dtype=">u4", buffer=raw, strides=(1,))  # words[i]: bytes i..i+3
    at = np.minimum(positions, size - FRAME_BYTES)  # a null or short field: read anywhere, not framed
    framed = (lengths >= FRAME_BYTES) & (raw.take(at) == MAGIC)
    return framed, words[at + 1]  # indexing, not take: take would copy the whole strided view first


class _Ids:
    """The schema ids of a batch's keys or values: one C walk (``ls_schema_ids``) into an array
    kept from one call to the next, with the one id every record has when they agree (the fast
    path: a set lookup decides the batch). A compressed batch, or an extension built before
    ``ls_schema_ids``, goes through :func:`columns_of` and :func:`framed_ids` (numpy). Ids are
    :data:`ID_NULL` for a null field and :data:`ID_NONE` for one without the framing. Not
    thread-safe: the event loop's."""

    def __init__(self) -> None:
        self._capacity = 0
        self._array = np.empty(0, dtype=np.int64)
        self._pointer: Any = None
        self._count = ffi.new("int64_t *")
        self._uniform = ffi.new("int64_t *")
        self._columns: Columns | None = None

    def __call__(self, data: Any, count: int, which: int) -> tuple[int, np.ndarray]:
        """(the id every record has, or :data:`ID_MIXED`; the ids) of the ``count`` records'
        keys (``which`` 0) or values (1) of ``data`` (whole, validated batches)."""
        if _HAVE_C:
            if count > self._capacity:
                self._capacity = max(count, 2 * self._capacity, 64)
                self._array = np.empty(self._capacity, dtype=np.int64)
                self._pointer = ffi.from_buffer("int64_t[]", self._array)
            rc = lib.ls_schema_ids(ffi.from_buffer(data), len(data), which, self._capacity, self._pointer,
                                   self._count, self._uniform)  # fmt: skip
            if rc == 0 and self._count[0] == count:
                return int(self._uniform[0]), self._array[:count]
            if rc not in (0, lib.LS_ERR_ARGUMENT):
                raise_for(rc, "reading the schema ids of a produced batch")
        columns = self._columns = columns_of(memoryview(data), self._columns)  # compressed
        positions = columns.key_positions if which == 0 else columns.value_positions
        lengths = columns.key_lengths if which == 0 else columns.value_lengths
        framed, found = framed_ids(columns.buffer, positions, lengths)
        ids = np.where(lengths < 0, ID_NULL, np.where(framed, found.astype(np.int64), ID_NONE))
        same = len(ids) > 0 and bool((ids == ids[0]).all())
        return (int(ids[0]) if same else ID_MIXED), ids


class SchemaIdCheck:
    """The produce path's schema id check (see the module doc): called by the partition on a
    validated batch (``ReplicaManager.record_check``); an INVALID_RECORD :class:`AppendResult`
    refuses it, None lets it through.

    State: the allowed ids per (topic, ``key``/``value``, strategy), each with the registry
    generation it was computed at; an entry is used only at that generation."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self._own: RegistryService | None = None  # when the broker serves no registry
        self._allowed: dict[tuple[str, str, str], tuple[int, np.ndarray, frozenset[int]]] = {}
        self._ids = _Ids()

    def service(self) -> RegistryService:
        server = getattr(self.broker, "schema_registry", None)
        if server is not None:
            return server.service
        if self._own is None:
            self._own = RegistryService(SchemasTopic(self.broker))
        return self._own

    def __call__(self, topic: str, config: LogConfig, data: Any, count: int = -1) -> AppendResult | None:
        """``data``: one validated batch (storage's validator); ``count``: its records (-1: count them)."""
        on_value = config.confluent_value_schema_validation or config.redpanda_value_schema_id_validation
        on_key = config.confluent_key_schema_validation or config.redpanda_key_schema_id_validation
        if not (on_value or on_key):
            return None
        service = self.service()
        service.catch_up()
        registry = service.registry
        if count < 0:
            count = len(columns_of(memoryview(data)))
        refused: dict[int, str] = {}
        for which, part, on in ((0, "key", on_key), (1, "value", on_value)):
            if not on:
                continue
            strategy = strategy_of(subject_strategy(config, part))
            allowed, allowed_set = self.allowed(registry, service.generation, topic, part, strategy)
            uniform, ids = self._ids(data, count, which)
            if uniform >= 0 and uniform in allowed_set:
                continue  # the common case: every record framed with one allowed id
            bad = (ids != ID_NULL) & ~np.isin(ids, allowed)
            for index in np.flatnonzero(bad).tolist():
                if index not in refused:
                    refused[index] = self._reason(registry, topic, part, strategy, int(ids[index]))
        if not refused:
            return None
        errors = tuple(sorted(refused.items()))
        shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i, why in errors[:3])
        message = (
            f"One or more records have been rejected due to {len(errors)} record errors in total, and only "
            f"showing the first three errors at most: [{shown}]"
        )
        return AppendResult(ErrorCode.invalid_record, message=message, record_errors=errors)

    def allowed(
        self, registry: Registry, generation: int, topic: str, part: str, strategy: str
    ) -> tuple[np.ndarray, frozenset[int]]:
        """The ids a ``part`` of ``topic`` may carry under ``strategy`` (sorted, and as a set);
        cached per registry generation."""
        key = (topic, part, strategy)
        cached = self._allowed.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1], cached[2]
        versions = registry.state.versions
        found: set[int] = set()
        if strategy == "topic":
            found = {made.id for made in versions.get(f"{topic}-{part}", {}).values() if not made.deleted}
        else:
            for subject, made_versions in versions.items():
                for made in made_versions.values():
                    if made.deleted or made.id in found:
                        continue
                    names = registry.record_names(made.id)
                    if strategy == "topic_record":
                        names = tuple(f"{topic}-{name}" for name in names)
                    if subject in names:
                        found.add(made.id)
        allowed = np.array(sorted(found), dtype=np.int64)
        if len(self._allowed) >= _ALLOWED_KEPT:
            self._allowed.clear()
        self._allowed[key] = (generation, allowed, frozenset(found))
        return allowed, frozenset(found)

    def _reason(self, registry: Registry, topic: str, part: str, strategy: str, schema_id: int) -> str:
        """Why one record's ``part`` (its id, or :data:`ID_NONE`) is refused (the error path)."""
        if schema_id == ID_NONE:
            return (
                f"the {part} has no schema id: it does not start with magic byte 0 and a 4-byte schema id "
                "(Confluent's wire format); produce it with a schema registry serializer"
            )
        if schema_id not in registry.state.by_id:
            where = "" if self.broker_has_schemas() else " (this broker holds no copy of _schemas-0)"
            return f"the {part}'s schema id {schema_id} is unknown to the schema registry{where}"
        if strategy == "topic":
            subject = f"subject '{topic}-{part}'"
        elif strategy == "record":
            subject = "the subject of its record name (RecordNameStrategy)"
        else:
            subject = f"the subject '{topic}-<record name>' (TopicRecordNameStrategy)"
        return f"the {part}'s schema id {schema_id} is not registered under {subject}"

    def broker_has_schemas(self) -> bool:
        """Whether this broker holds a copy of ``_schemas-0`` (leader or follower)."""
        journal = self.service().journal
        return not isinstance(journal, SchemasTopic) or journal.has_copy()

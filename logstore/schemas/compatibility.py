"""Schema types and compatibility levels (Confluent's rules), each type checked by a library made
for it.

Levels: NONE; BACKWARD (the new schema reads data written with the latest),
FORWARD (the latest reads data written with the new), FULL (both); the
``_TRANSITIVE`` forms check against every earlier version rather than only
the latest (Confluent's ``CompatibilityChecker``). A schema of another type
than an earlier version's is incompatible with it.

Types (each a :class:`ParsedSchema`; :func:`parse` dispatches on the name):

- AVRO, parsed and checked by Apache Avro's own library (``avro.schema``,
  ``avro.compatibility.ReaderWriterCompatibilityChecker``); references are the
  referenced schemas' named types, defined first;
- JSON (JSON Schema): :mod:`logstore.schemas.json_schema` (``jsonschema`` parses
  and checks it against its draft's meta-schema; Confluent's compatibility rules
  in :mod:`logstore.schemas.json_diff`); references resolve by name as ``$ref``;
- PROTOBUF: :mod:`logstore.schemas.protobuf` (``protoc`` compiles it; Confluent's
  Protobuf rules there); references are imports, by name.

References come as (name, text) pairs, the references' own references first.
Parsing is cached (:func:`parse` keeps the last :data:`CACHE_SIZE` results:
the registry parses every live version on each register and check, and a
parsed schema is immutable).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import avro.errors
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from logstore.schemas import errors, json_schema, protobuf
from logstore.schemas.records import AVRO

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"  # Confluent's default
JSON = "JSON"
PROTOBUF = "PROTOBUF"
TYPES = (AVRO, JSON, PROTOBUF)
CACHE_SIZE = 4096


class ParsedSchema(Protocol):
    """A schema a library parsed: its canonical text and whether it can read another's data."""

    def canonical(self) -> str:
        """The schema's text in its canonical form: same text, same schema (Confluent's canonical string)."""
        ...

    def normalized(self) -> str:
        """The canonical form with what does not change the schema's meaning put in one order
        (Confluent's ``normalize=true``); idempotent."""
        ...

    def reads(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema (empty: it can)."""
        ...


@dataclass(frozen=True)
class AvroSchema:
    """An Avro schema (Apache Avro's parser and its reader/writer compatibility check)."""

    parsed: avro.schema.Schema

    def canonical(self) -> str:
        """The schema as Avro's library writes it back (compact, its key order): not the Parsing
        Canonical Form, which drops defaults, docs and aliases, so that two schemas that differ
        only in a default would be one."""
        return json.dumps(self.parsed.to_json(), separators=(",", ":"))

    def normalized(self) -> str:
        return self.canonical()  # Avro's library already puts every key in its own order

    def reads(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, AvroSchema)
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.parsed, writer.parsed)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        found = sorted(f"{m} at {loc}" for m, loc in zip(result.messages, result.locations, strict=False))
        return found or [str(result.compatibility)]


def parse(schema_type: str, text: str, references: Sequence[tuple[str, str]] = ()) -> ParsedSchema:
    """``text`` parsed as ``schema_type``, the ``references`` ((name, text), dependencies first)
    known to it; RegistryError 42201 (invalid schema) with the parser's reason if it is not one."""
    return _parse(schema_type, text, tuple(references))


@functools.lru_cache(maxsize=CACHE_SIZE)
def _parse(schema_type: str, text: str, references: tuple[tuple[str, str], ...]) -> ParsedSchema:
    if schema_type == JSON:
        return json_schema.parse(text, references)
    if schema_type == PROTOBUF:
        return protobuf.parse(text, references)
    if schema_type != AVRO:
        raise errors.invalid_schema(f"schema type {schema_type} is not supported; supported: {', '.join(TYPES)}")
    try:
        names = avro.schema.Names()
        for _, referenced in references:
            avro.schema.make_avsc_object(json.loads(referenced), names)
        return AvroSchema(avro.schema.make_avsc_object(json.loads(text), names))
    except (ValueError, TypeError, avro.errors.AvroException) as e:
        raise errors.invalid_schema(f"{e}") from None
    except RecursionError:
        raise errors.invalid_schema("the schema is nested too deeply") from None


def check(level: str, new: ParsedSchema, earlier: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` breaks ``level`` against ``earlier`` (oldest first); empty: it does not."""
    if level not in LEVELS:
        raise errors.invalid_compatibility(level)
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    found: list[str] = []
    for old in against:
        if type(old) is not type(new):
            found.append(f"{{schema type changed: {type(old).__name__} to {type(new).__name__}}}")
            continue
        if level.startswith(("BACKWARD", "FULL")):
            found += [f"{{reader: new, writer: old, {m}}}" for m in new.reads(old)]
        if level.startswith(("FORWARD", "FULL")):
            found += [f"{{reader: old, writer: new, {m}}}" for m in old.reads(new)]
    return found

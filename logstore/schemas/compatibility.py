"""Schema types and compatibility levels (Confluent's rules), each type checked by a library made
for it.

Levels: NONE; BACKWARD (the new schema reads data written with the latest),
FORWARD (the latest reads data written with the new), FULL (both); the
``_TRANSITIVE`` forms check against every earlier version rather than only
the latest (Confluent's ``CompatibilityChecker``).

Types: AVRO, parsed and checked by Apache Avro's own library
(``avro.schema``, ``avro.compatibility.ReaderWriterCompatibilityChecker``);
references are the referenced schemas' named types, defined first. JSON and
PROTOBUF come with their libraries (jsonschema, a .proto parser); until
then a schema of those types is refused as an invalid schema, by name.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import avro.errors
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from logstore.schemas import errors
from logstore.schemas.records import AVRO

LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL", "FULL_TRANSITIVE")
DEFAULT_LEVEL = "BACKWARD"  # Confluent's default
TYPES = (AVRO,)


class ParsedSchema(Protocol):
    """A schema a library parsed: its canonical text and whether it can read another's data."""

    def canonical(self) -> str: ...

    def reads(self, writer: ParsedSchema) -> list[str]:
        """Why data written with ``writer`` cannot be read with this schema (empty: it can)."""
        ...


@dataclass(frozen=True)
class AvroSchema:
    """An Avro schema (Apache Avro's parser and its reader/writer compatibility check)."""

    parsed: avro.schema.Schema

    def canonical(self) -> str:
        return str(self.parsed.canonical_form)

    def reads(self, writer: ParsedSchema) -> list[str]:
        assert isinstance(writer, AvroSchema)
        result = ReaderWriterCompatibilityChecker().get_compatibility(self.parsed, writer.parsed)
        if result.compatibility is SchemaCompatibilityType.compatible:
            return []
        found = sorted(f"{m} at {loc}" for m, loc in zip(result.messages, result.locations, strict=False))
        return found or [str(result.compatibility)]


def parse(schema_type: str, text: str, references: Sequence[str] = ()) -> ParsedSchema:
    """``text`` parsed as ``schema_type``, the ``references``' texts defined first; RegistryError
    42201 (invalid schema) with the parser's reason if it is not one."""
    if schema_type != AVRO:
        raise errors.invalid_schema(f"schema type {schema_type} is not supported yet; supported: {', '.join(TYPES)}")
    try:
        names = avro.schema.Names()
        for referenced in references:
            avro.schema.make_avsc_object(json.loads(referenced), names)
        return AvroSchema(avro.schema.make_avsc_object(json.loads(text), names))
    except (ValueError, TypeError, avro.errors.AvroException) as e:
        raise errors.invalid_schema(f"{e}") from None


def check(level: str, new: ParsedSchema, earlier: Sequence[ParsedSchema]) -> list[str]:
    """Why ``new`` breaks ``level`` against ``earlier`` (oldest first); empty: it does not."""
    if level not in LEVELS:
        raise errors.invalid_compatibility(level)
    if level == "NONE" or not earlier:
        return []
    against = earlier if level.endswith("_TRANSITIVE") else earlier[-1:]
    found: list[str] = []
    for old in against:
        if level.startswith(("BACKWARD", "FULL")):
            found += [f"{{reader: new, writer: old, {m}}}" for m in new.reads(old)]
        if level.startswith(("FORWARD", "FULL")):
            found += [f"{{reader: old, writer: new, {m}}}" for m in old.reads(new)]
    return found

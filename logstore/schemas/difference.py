"""One difference between two schemas, as Confluent's diffs name it (JSON Schema's ``JsonSchemaDiff``,
Protobuf's ``ProtobufDiff``): its type, where it is, and whether the type's rules call it compatible.
json_diff.py and proto_diff.py each hold their type's table of rules and make these."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    """``type``: Confluent's name for the change; ``path``: where (a JSON pointer, or ``#/M/3`` in a
    .proto); ``compatible`` and ``description``: the rules table's entry for ``type``."""

    type: str
    path: str
    compatible: bool
    description: str

    def message(self) -> str:
        """The change as Confluent's registry reports it in a compatibility answer."""
        return f'{{errorType:"{self.type}", description:"{self.description}", path:"{self.path}"}}'

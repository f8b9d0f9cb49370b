"""The records of the compacted ``_schemas`` topic, in Confluent Schema Registry's format.

Keys and values are JSON (compact, Jackson's field order), so a Confluent
registry pointed at the same topic reads what logstore wrote and the other
way round::

    {"keytype":"SCHEMA","subject":"s","version":1,"magic":1}
        {"subject":"s","version":1,"id":1,"schemaType":"JSON","references":[...],"schema":"...","deleted":false}
        (schemaType left out for AVRO, references when empty; a null value: the version deleted for good)
    {"keytype":"CONFIG","subject":null,"magic":0}        {"compatibilityLevel":"BACKWARD"}  (subject: its own)
    {"keytype":"MODE","subject":null,"magic":0}          {"mode":"READONLY"}
    {"keytype":"DELETE_SUBJECT","subject":"s","magic":0} {"subject":"s","version":3}  (soft delete up to 3)
    {"keytype":"CLEAR_SUBJECT","subject":"s","magic":0}  {"subject":"s"}  (the soft-deleted versions gone)
    {"keytype":"NOOP","magic":0}                         (nothing: a marker to read up to)

A CONFIG or MODE key with a null value removes that setting. Unknown key
types are skipped (a newer registry's records), never an error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = (
    "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP",
)  # fmt: skip
AVRO = "AVRO"


@dataclass(frozen=True, slots=True)
class Reference:
    """A schema's reference to another subject's version, under the name it is imported by."""

    name: str
    subject: str
    version: int

    def json(self) -> dict[str, Any]:
        return {"name": self.name, "subject": self.subject, "version": self.version}


@dataclass(frozen=True, slots=True)
class SchemaValue:
    """One version of a subject (a SCHEMA record's value)."""

    subject: str
    version: int
    id: int
    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = field(default=())
    deleted: bool = False

    def json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"subject": self.subject, "version": self.version, "id": self.id}
        if self.schema_type != AVRO:
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [r.json() for r in self.references]
        out["schema"] = self.schema
        out["deleted"] = self.deleted
        return out


Record = tuple[bytes, bytes | None]


def _dump(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def schema_record(value: SchemaValue) -> Record:
    key = {"keytype": SCHEMA, "subject": value.subject, "version": value.version, "magic": 1}
    return _dump(key), _dump(value.json())


def schema_tombstone(subject: str, version: int) -> Record:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1}), None


def config_record(subject: str | None, level: str | None) -> Record:
    key = _dump({"keytype": CONFIG, "subject": subject, "magic": 0})
    return key, None if level is None else _dump({"compatibilityLevel": level})


def mode_record(subject: str | None, mode: str | None) -> Record:
    key = _dump({"keytype": MODE, "subject": subject, "magic": 0})
    return key, None if mode is None else _dump({"mode": mode})


def delete_subject_record(subject: str, version: int) -> Record:
    key = _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})
    return key, _dump({"subject": subject, "version": version})


def clear_subject_record(subject: str) -> Record:
    return _dump({"keytype": CLEAR_SUBJECT, "subject": subject, "magic": 0}), _dump({"subject": subject})


def noop_record() -> Record:
    return _dump({"keytype": NOOP, "magic": 0}), None


def decode(key: bytes | None, value: bytes | None) -> tuple[dict[str, Any], dict[str, Any] | None] | None:
    """(key, value) as JSON objects; None for a record that is not the registry's (no keytype)."""
    if not key:
        return None
    try:
        parsed = json.loads(key)
        body = None if value is None else json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(parsed, dict) or "keytype" not in parsed or (body is not None and not isinstance(body, dict)):
        return None
    return parsed, body


def schema_value(body: dict[str, Any]) -> SchemaValue:
    """A SCHEMA record's value (KeyError or TypeError if it is not one)."""
    refs = tuple(Reference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
    return SchemaValue(
        body["subject"], int(body["version"]), int(body["id"]), body["schema"],
        body.get("schemaType") or AVRO, refs, bool(body.get("deleted", False)),
    )  # fmt: skip

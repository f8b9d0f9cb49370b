"""The Schema Registry's state and operations (Confluent's semantics), without sockets or topics.

State (:class:`RegistryState`): every subject's versions, the schemas by
global id, the compatibility levels and modes (global and per subject). It
changes only by :meth:`RegistryState.apply` of ``_schemas`` records
(schemas/records.py: Confluent's format), so a registry that reads the topic from the
start holds what the writer held.

Operations (:class:`Registry`): a read answers from the state; a write checks
against the state and returns the records that make it (the caller appends
them to ``_schemas`` and applies them once written: the writer's state never
runs ahead of the topic). One writer at a time (in a cluster, one broker).

Rules (Confluent's):

- ids are global and never reused: the same schema (type, canonical text,
  references) under any subject has one id; a new one is the highest seen + 1;
- versions of a subject rise from 1 and are not reused while the subject has
  any (a soft-deleted version still holds its number);
- registering a schema the subject already has (not deleted) returns its id
  and writes nothing; otherwise it must pass the subject's compatibility level
  (the subject's, else the global one, else BACKWARD) against the live
  versions;
- deletes are soft first (the version is hidden, its id still resolves), then
  permanent (``permanent=true``, only after a soft delete);
- mode READONLY (global or the subject's) refuses writes with 42205; IMPORT
  lets a write name its id and version.

Invariants (asserted by :meth:`RegistryState.check`): every version's id
resolves to its schema; versions of a subject are unique; the next id is
above every id.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from logstore.schemas import compatibility as compat
from logstore.schemas import errors
from logstore.schemas.records import (
    AVRO,
    CLEAR_SUBJECT,
    CONFIG,
    DELETE_SUBJECT,
    MODE,
    SCHEMA,
    Record,
    Reference,
    SchemaValue,
    clear_subject_record,
    config_record,
    decode,
    delete_subject_record,
    mode_record,
    schema_record,
    schema_tombstone,
    schema_value,
)

MODES = ("READWRITE", "READONLY", "IMPORT")
MAX_VERSION = 2**31 - 1


@dataclass(frozen=True, slots=True)
class Schema:
    """A schema as an id names it."""

    schema: str
    schema_type: str = AVRO
    references: tuple[Reference, ...] = ()


@dataclass
class RegistryState:
    """What ``_schemas`` holds, replayed (see the module doc)."""

    versions: dict[str, dict[int, SchemaValue]] = field(default_factory=dict)
    by_id: dict[int, Schema] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)  # None: the global level
    modes: dict[str | None, str] = field(default_factory=dict)
    next_id: int = 1

    def apply(self, key: bytes | None, value: bytes | None) -> None:
        """One ``_schemas`` record; records that are not the registry's are skipped."""
        found = decode(key, value)
        if found is None:
            return
        head, body = found
        kind, subject = head["keytype"], head.get("subject")
        if kind == CONFIG:
            self._setting(self.configs, subject, None if body is None else body.get("compatibilityLevel"))
            return
        if kind == MODE:
            self._setting(self.modes, subject, None if body is None else body.get("mode"))
            return
        if not isinstance(subject, str):
            return  # a NOOP, or a record of a kind this registry does not know
        if kind == SCHEMA:
            version = int(head["version"])
            if body is None:
                self.versions.get(subject, {}).pop(version, None)
                if not self.versions.get(subject, True):
                    del self.versions[subject]
                return
            made = schema_value(body)
            self.versions.setdefault(made.subject, {})[made.version] = made
            self.by_id.setdefault(made.id, Schema(made.schema, made.schema_type, made.references))
            self.next_id = max(self.next_id, made.id + 1)
        elif kind == DELETE_SUBJECT and body is not None:
            upto = int(body["version"])
            for version, made in list(self.versions.get(subject, {}).items()):
                if version <= upto:
                    self.versions[subject][version] = replace(made, deleted=True)
        elif kind == CLEAR_SUBJECT:
            kept = {v: s for v, s in self.versions.get(subject, {}).items() if not s.deleted}
            if kept:
                self.versions[subject] = kept
            else:
                self.versions.pop(subject, None)

    @staticmethod
    def _setting(table: dict[str | None, str], subject: str | None, value: str | None) -> None:
        if value is None:
            table.pop(subject, None)
        else:
            table[subject] = value

    def check(self) -> None:
        """Assert the invariants of the module doc. O(versions)."""
        for subject, versions in self.versions.items():
            for number, made in versions.items():
                assert made.subject == subject and made.version == number
                assert made.id in self.by_id and made.id < self.next_id


@dataclass
class Registry:
    """Confluent's operations over a :class:`RegistryState` (see the module doc)."""

    state: RegistryState = field(default_factory=RegistryState)
    # (type, canonical text, references) -> the lowest id with them, for the first _indexed ids of
    # state.by_id (which only grows, in insertion order): a register finds its id in O(1).
    _ids: dict[tuple[str, str, tuple[Reference, ...]], int] = field(default_factory=dict, compare=False, repr=False)
    _indexed: int = field(default=0, compare=False, repr=False)

    # -- reading ---------------------------------------------------------------

    def subjects(self, deleted: bool = False) -> list[str]:
        """Subjects with a live version (``deleted``: soft-deleted ones too), sorted."""
        return sorted(s for s, v in self.state.versions.items() if deleted or any(not m.deleted for m in v.values()))

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        found = self._subject(subject, deleted)
        return sorted(v for v, m in found.items() if deleted or not m.deleted)

    def version(self, subject: str, version: int | str, deleted: bool = False) -> SchemaValue:
        """A subject's version (``"latest"``, or -1: the highest live one)."""
        number = self._version_number(version)  # Confluent checks the version's form first
        found = self._subject(subject, deleted)
        if number == -1:
            live = [v for v, m in found.items() if deleted or not m.deleted]
            if not live:
                raise errors.subject_not_found(subject)
            number = max(live)
        made = found.get(number)
        if made is None or (made.deleted and not deleted):
            raise errors.version_not_found(subject, number)
        return made

    def schema(self, schema_id: int) -> Schema:
        made = self.state.by_id.get(schema_id)
        if made is None:
            raise errors.schema_not_found(schema_id)
        return made

    def record_names(self, schema_id: int) -> tuple[str, ...]:
        """The record names the serializers' RecordNameStrategy gives schema ``schema_id``: an Avro
        named type's full name, a JSON Schema's ``title``, a Protobuf schema's top-level messages
        (package-qualified). Empty when it has none or is unknown or does not parse."""
        made = self.state.by_id.get(schema_id)
        if made is None:
            return ()
        try:
            if made.schema_type == "PROTOBUF":
                parsed = self._parse(made.schema_type, made.schema, made.references)
                return tuple(parsed.message_names())  # type: ignore[attr-defined]
            body = json.loads(made.schema)
        except (errors.RegistryError, ValueError):
            return ()
        if not isinstance(body, dict):
            return ()
        if made.schema_type == "JSON":
            title = body.get("title")
            return (title,) if isinstance(title, str) else ()
        name, namespace = body.get("name"), body.get("namespace")
        if not isinstance(name, str):
            return ()
        return (name if "." in name or not isinstance(namespace, str) or not namespace else f"{namespace}.{name}",)

    def subject_versions_of(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) of every version with this id (``/schemas/ids/{id}/versions``)."""
        self.schema(schema_id)
        return sorted((s, v) for s, vs in self.state.versions.items() for v, m in vs.items()
                      if m.id == schema_id and (deleted or not m.deleted))  # fmt: skip

    def lookup(self, subject: str, schema: str, schema_type: str = AVRO,
               references: Sequence[Reference] = (), deleted: bool = False) -> SchemaValue:  # fmt: skip
        """The subject's version with this schema (``POST /subjects/{s}``)."""
        found = self._subject(subject, deleted)
        canonical = self._parse(schema_type, schema, references).canonical()
        for number in sorted(found, reverse=True):
            made = found[number]
            if (deleted or not made.deleted) and self._same(made, canonical, schema_type, references):
                return made
        raise errors.schema_not_found()

    def normalize(self, schema_type: str, schema: str, references: Sequence[Reference] = ()) -> str:
        """``schema`` in its type's normal form (``?normalize=true``): Avro as its library writes it,
        JSON Schema with its keys sorted, Protobuf rendered back from its descriptors; so that
        texts that differ only in form register once. 42201 if it does not parse."""
        return self._parse(schema_type, schema, references).normalized()

    def compatibility(self, subject: str | None = None, fallback: bool = True) -> str | None:
        """The level that applies to ``subject`` (its own, else the global one, else BACKWARD);
        ``fallback=False``: only what is set for it."""
        if subject is not None and (subject in self.state.configs or not fallback):
            return self.state.configs.get(subject)
        level = self.state.configs.get(None)
        return level if level is not None or not fallback else compat.DEFAULT_LEVEL

    def mode(self, subject: str | None = None) -> str:
        if subject is not None and subject in self.state.modes:
            return self.state.modes[subject]
        return self.state.modes.get(None, "READWRITE")

    def check(self, subject: str, schema: str, schema_type: str = AVRO, references: Sequence[Reference] = (),
              version: int | str = "latest") -> list[str]:  # fmt: skip
        """Why ``schema`` breaks the subject's level against ``version`` (``"latest"``: the
        level's versions, transitive or not); empty: compatible (POST /compatibility/...)."""
        new = self._parse(schema_type, schema, references)
        level = self.compatibility(subject) or compat.DEFAULT_LEVEL
        if subject not in self.state.versions:
            return []
        if version == "latest" or version == -1:
            return compat.check(level, new, self._live_parsed(subject))
        made = self.version(subject, version)
        return compat.check(level.replace("_TRANSITIVE", ""), new, [self._parsed(made)])

    # -- writing: each returns the records that make it ---------------------------

    def register(self, subject: str, schema: str, schema_type: str = AVRO, references: Sequence[Reference] = (),
                 schema_id: int | None = None, version: int | None = None) -> tuple[int, list[Record]]:  # fmt: skip
        """The id of ``schema`` under ``subject`` and the records that register it (none if the
        subject has it already). ``schema_id``/``version``: given in IMPORT mode only."""
        mode = self.mode(subject)
        self._writable(subject)
        refs = tuple(references)
        self._check_references(refs)
        parsed = self._parse(schema_type, schema, refs)
        canonical = parsed.canonical()
        found = self.state.versions.get(subject, {})
        for number in sorted(found, reverse=True):
            made = found[number]
            if not made.deleted and self._same(made, canonical, schema_type, refs):
                return made.id, []
        if (schema_id is not None or version is not None) and mode != "IMPORT":
            raise errors.operation_not_permitted("an id or version can be given only in IMPORT mode")
        if mode != "IMPORT":
            problems = compat.check(self.compatibility(subject) or "BACKWARD", parsed, self._live_parsed(subject))
            if problems:
                raise errors.incompatible(subject, problems)
        if schema_id is None:
            schema_id = self._id_of(canonical, schema_type, refs)
        elif schema_id in self.state.by_id and not self._same_schema(self.state.by_id[schema_id], canonical,
                                                                      schema_type, refs):  # fmt: skip
            raise errors.RegistryError(422, 42207, f"Overwrite new schema with id {schema_id} is not permitted.")
        number = version if version is not None else max(found, default=0) + 1
        if not 1 <= number <= MAX_VERSION:
            raise errors.invalid_version(number)
        made = SchemaValue(subject, number, schema_id, schema, schema_type, refs)
        return schema_id, [schema_record(made)]

    def delete_version(self, subject: str, version: int | str, permanent: bool = False) -> tuple[int, list[Record]]:
        """Soft-delete a version, or delete a soft-deleted one for good; (its number, records)."""
        self._writable(subject)
        made = self.version(subject, version, deleted=permanent)
        self._no_references_to(subject, made.version)
        if permanent:
            if not made.deleted:
                raise errors.version_not_soft_deleted(subject, made.version)
            return made.version, [schema_tombstone(subject, made.version)]
        if made.deleted:
            raise errors.version_soft_deleted(subject, made.version)
        return made.version, [schema_record(replace(made, deleted=True))]

    def delete_subject(self, subject: str, permanent: bool = False) -> tuple[list[int], list[Record]]:
        """Soft-delete every version, or delete the soft-deleted ones for good; (the versions, records)."""
        self._writable(subject)
        found = self._subject(subject, deleted=True)
        live = sorted(v for v, m in found.items() if not m.deleted)
        if permanent:
            if live:
                raise errors.subject_not_soft_deleted(subject)
            numbers = sorted(found)
            return numbers, [schema_tombstone(subject, v) for v in numbers] + [clear_subject_record(subject)]
        if not live:
            raise errors.subject_soft_deleted(subject)
        for number in live:
            self._no_references_to(subject, number)
        return live, [delete_subject_record(subject, max(live))]

    def set_compatibility(self, level: str, subject: str | None = None) -> list[Record]:
        level = level.upper()
        if level not in compat.LEVELS:
            raise errors.invalid_compatibility(level)
        return [config_record(subject, level)]

    def delete_compatibility(self, subject: str | None = None) -> tuple[str, list[Record]]:
        level = self.compatibility(subject)
        assert level is not None
        return level, [config_record(subject, None)]

    def set_mode(self, mode: str, subject: str | None = None, force: bool = False) -> list[Record]:
        """``force``: IMPORT even with subjects registered (Confluent's ``?force=true``)."""
        mode = mode.upper()
        if mode not in MODES:
            raise errors.invalid_mode(mode)
        if mode == "IMPORT" and subject is None and self.subjects() and not force:
            raise errors.operation_not_permitted(
                "Cannot import since found existing subjects; set the mode with force=true to import anyway"
            )
        return [mode_record(subject, mode)]

    def delete_mode(self, subject: str) -> tuple[str, list[Record]]:
        """Drop the subject's own mode (the global one applies again); (the mode it had, records)."""
        found = self.state.modes.get(subject)
        if found is None:
            raise errors.subject_mode_not_configured(subject)
        return found, [mode_record(subject, None)]

    # -- inside ------------------------------------------------------------------

    def _subject(self, subject: str, deleted: bool) -> dict[int, SchemaValue]:
        found = self.state.versions.get(subject)
        if not found:
            raise errors.subject_not_found(subject)
        if not deleted and all(m.deleted for m in found.values()):
            raise errors.subject_not_found(subject)
        return found

    @staticmethod
    def _version_number(version: int | str) -> int:
        if version == "latest":
            return -1
        try:
            number = int(version)
        except (TypeError, ValueError):
            raise errors.invalid_version(version) from None
        if number != -1 and not 1 <= number <= MAX_VERSION:
            raise errors.invalid_version(version)
        return number

    def _writable(self, subject: str | None) -> None:
        if self.mode(subject) == "READONLY":
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    def _check_references(self, references: Iterable[Reference]) -> None:
        for ref in references:
            self.version(ref.subject, ref.version)  # 40401 / 40402 when it does not exist

    def _no_references_to(self, subject: str, version: int) -> None:
        for versions in self.state.versions.values():
            for made in versions.values():
                if not made.deleted and any(r.subject == subject and r.version == version for r in made.references):
                    raise errors.reference_exists(subject, version)

    def _referenced(self, references: Sequence[Reference]) -> list[tuple[str, str]]:
        """(name, text) of the references and of theirs, each once, dependencies first."""
        found: list[tuple[str, str]] = []
        seen: set[tuple[str, int]] = set()

        def visit(refs: Sequence[Reference]) -> None:
            for ref in refs:
                made = self.version(ref.subject, ref.version)
                if (made.subject, made.version) not in seen:
                    seen.add((made.subject, made.version))
                    visit(made.references)
                    found.append((ref.name, made.schema))

        visit(references)
        return found

    def _parse(self, schema_type: str, schema: str, references: Sequence[Reference]) -> compat.ParsedSchema:
        return compat.parse(schema_type, schema, self._referenced(references))  # cached there

    def _parsed(self, made: SchemaValue) -> compat.ParsedSchema:
        return self._parse(made.schema_type, made.schema, made.references)

    def _live_parsed(self, subject: str) -> list[compat.ParsedSchema]:
        found = self.state.versions.get(subject, {})
        return [self._parsed(found[v]) for v in sorted(found) if not found[v].deleted]

    def _same(self, made: SchemaValue, canonical: str, schema_type: str, references: Sequence[Reference]) -> bool:
        return self._same_schema(Schema(made.schema, made.schema_type, made.references), canonical, schema_type,
                                 references)  # fmt: skip

    def _same_schema(self, made: Schema, canonical: str, schema_type: str, references: Sequence[Reference]) -> bool:
        if made.schema_type != schema_type or tuple(made.references) != tuple(references):
            return False
        return self._parse(made.schema_type, made.schema, made.references).canonical() == canonical

    def _id_of(self, canonical: str, schema_type: str, references: Sequence[Reference]) -> int:
        by_id, ids = self.state.by_id, self._ids
        if self._indexed < len(by_id):
            for schema_id, made in itertools.islice(by_id.items(), self._indexed, None):
                try:
                    text = self._parse(made.schema_type, made.schema, made.references).canonical()
                except errors.RegistryError:
                    continue  # its references are gone: nothing registered now can be it
                key = (made.schema_type, text, tuple(made.references))
                if schema_id < ids.get(key, schema_id + 1):
                    ids[key] = schema_id
            self._indexed = len(by_id)
        return ids.get((schema_type, canonical, tuple(references)), self.state.next_id)


def replay(records: Iterable[Record], state: RegistryState | None = None) -> RegistryState:
    """``records`` applied in order to ``state`` (a new one by default)."""
    state = state or RegistryState()
    for key, value in records:
        state.apply(key, value)
    return state


def as_json(made: SchemaValue) -> dict[str, Any]:
    """A version as ``GET /subjects/{s}/versions/{v}`` answers it."""
    out = made.json()
    out.pop("deleted", None)
    return out

"""The registry's state and operations: Confluent's rules for ids, versions, compatibility, deletes
and modes, each write's records replayed into a second registry that must end up equal."""

from __future__ import annotations

import json

import pytest

from logstore.schemas import errors
from logstore.schemas.records import Record, Reference, decode
from logstore.schemas.registry import Registry, RegistryState, replay

pytestmark = pytest.mark.unit


def record(fields: list[tuple[object, ...]], name: str = "User") -> str:
    """An Avro record schema: (name, type) or (name, type, default) per field."""
    out = []
    for field in fields:
        entry = {"name": field[0], "type": field[1]}
        if len(field) > 2:
            entry["default"] = field[2]
        out.append(entry)
    return json.dumps({"type": "record", "name": name, "fields": out})


V1 = record([("id", "int")])
V2 = record([("id", "int"), ("email", "string", "")])  # a field with a default: backward compatible
BREAKING = record([("id", "string")])


class Writer:
    """A registry whose writes are applied as the broker will: append, then apply; a follower
    replays the same records."""

    def __init__(self) -> None:
        self.registry = Registry()
        self.log: list[Record] = []

    def write(self, records: list[Record]) -> None:
        for key, value in records:
            self.log.append((key, value))
            self.registry.state.apply(key, value)
        self.registry.state.check()

    def follower(self) -> RegistryState:
        return replay(self.log)


def test_ids_are_global_and_versions_rise_per_subject() -> None:
    w = Writer()
    first, made = w.registry.register("users-value", V1)
    w.write(made)
    assert first == 1 and w.registry.versions("users-value") == [1]
    again, made = w.registry.register("users-value", V1)
    assert (again, made) == (1, [])  # already there: same id, nothing written
    other, made = w.registry.register("audit-value", V1)
    w.write(made)
    assert other == 1 and w.registry.version("audit-value", "latest").version == 1  # same schema, same id
    second, made = w.registry.register("users-value", V2)
    w.write(made)
    assert second == 2 and w.registry.version("users-value", "latest").version == 2
    assert w.registry.subject_versions_of(1) == [("audit-value", 1), ("users-value", 1)]
    assert w.follower() == w.registry.state


def test_an_incompatible_schema_is_refused_with_confluents_409_unless_the_level_allows_it() -> None:
    w = Writer()
    w.write(w.registry.register("t-value", V1)[1])
    with pytest.raises(errors.RegistryError) as refused:
        w.registry.register("t-value", BREAKING)
    assert refused.value.status == 409 and refused.value.code == 409 and "incompatible" in refused.value.message
    assert w.registry.check("t-value", BREAKING) and not w.registry.check("t-value", V2)
    w.write(w.registry.set_compatibility("none", "t-value"))
    assert w.registry.compatibility("t-value") == "NONE" and w.registry.compatibility() == "BACKWARD"
    schema_id, made = w.registry.register("t-value", BREAKING)
    w.write(made)
    assert schema_id == 2
    with pytest.raises(errors.RegistryError) as bad:
        w.registry.set_compatibility("sideways")
    assert bad.value.code == 42203


def test_transitive_levels_check_every_earlier_version() -> None:
    w = Writer()
    w.write(w.registry.set_compatibility("FORWARD_TRANSITIVE", "s"))
    w.write(w.registry.register("s", record([("a", "int"), ("b", "int")]))[1])
    w.write(w.registry.register("s", record([("a", "int"), ("b", "int"), ("c", "int")]))[1])
    # dropping b: the latest (a, b, c) can still read data without b? No: b has no default, so the
    # first version cannot read it either; transitive finds both.
    problems = w.registry.check("s", record([("a", "int"), ("c", "int")]))
    assert len([p for p in problems if "reader: old" in p]) == 2


def test_deletes_are_soft_then_permanent_and_ids_stay_resolvable() -> None:
    w = Writer()
    w.write(w.registry.register("s", V1)[1])
    w.write(w.registry.register("s", V2)[1])
    with pytest.raises(errors.RegistryError) as early:
        w.registry.delete_version("s", 1, permanent=True)
    assert early.value.code == 40407
    number, made = w.registry.delete_version("s", 1)
    w.write(made)
    assert number == 1 and w.registry.versions("s") == [2] and w.registry.versions("s", deleted=True) == [1, 2]
    assert w.registry.schema(1).schema == V1  # a soft-deleted version's id still resolves
    with pytest.raises(errors.RegistryError) as gone:
        w.registry.version("s", 1)
    assert gone.value.code == 40402
    numbers, made = w.registry.delete_subject("s")
    w.write(made)
    assert numbers == [2] and w.registry.subjects() == [] and w.registry.subjects(deleted=True) == ["s"]
    with pytest.raises(errors.RegistryError) as again:
        w.registry.delete_subject("s")
    assert again.value.code == 40404
    numbers, made = w.registry.delete_subject("s", permanent=True)
    w.write(made)
    assert numbers == [1, 2] and w.registry.subjects(deleted=True) == []
    with pytest.raises(errors.RegistryError) as missing:
        w.registry.versions("s")
    assert missing.value.code == 40401
    schema_id, made = w.registry.register("s", record([("x", "long")]))
    w.write(made)
    assert schema_id == 3 and w.registry.version("s", "latest").version == 1  # ids never reused
    assert w.follower() == w.registry.state


def test_references_resolve_and_hold_what_they_reference() -> None:
    w = Writer()
    address = json.dumps({"type": "record", "name": "Address", "namespace": "x", "fields": [{"name": "city", "type": "string"}]})
    w.write(w.registry.register("address", address)[1])
    person = json.dumps({"type": "record", "name": "Person", "fields": [{"name": "home", "type": "x.Address"}]})
    ref = Reference("x.Address", "address", 1)
    schema_id, made = w.registry.register("person", person, references=[ref])
    w.write(made)
    assert w.registry.schema(schema_id).references == (ref,)
    with pytest.raises(errors.RegistryError) as held:
        w.registry.delete_version("address", 1)
    assert held.value.code == 42206
    with pytest.raises(errors.RegistryError) as unknown:
        w.registry.register("other", person, references=[Reference("x.Address", "nowhere", 1)])
    assert unknown.value.code == 40401


def test_modes_readonly_refuses_writes_and_import_takes_ids() -> None:
    w = Writer()
    w.write(w.registry.set_mode("IMPORT"))
    schema_id, made = w.registry.register("s", V1, schema_id=42, version=7)
    w.write(made)
    assert schema_id == 42 and w.registry.version("s", 7).id == 42
    w.write(w.registry.set_mode("READONLY"))
    with pytest.raises(errors.RegistryError) as refused:
        w.registry.register("s", V2)
    assert refused.value.code == 42205
    w.write(w.registry.set_mode("READWRITE"))
    assert w.registry.register("s", V2)[0] == 43  # the next id is past every imported one
    with pytest.raises(errors.RegistryError) as bad:
        w.registry.set_mode("WRITEONLY")
    assert bad.value.code == 42204


def test_invalid_schemas_and_versions_get_422_and_records_keep_confluents_shape() -> None:
    registry = Registry()
    with pytest.raises(errors.RegistryError) as bad:
        registry.register("s", '{"type": "recrd"}')
    assert (bad.value.status, bad.value.code) == (422, 42201)
    with pytest.raises(errors.RegistryError) as unsupported:
        registry.register("s", "{}", schema_type="XML")
    assert unsupported.value.code == 42201 and "XML" in unsupported.value.message
    with pytest.raises(errors.RegistryError) as version:
        registry.version("s", "first")
    assert version.value.code == 42202
    (key, value), = registry.register("s", V1)[1]
    assert key == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    parsed = decode(key, value)
    assert parsed is not None and parsed[1] == {"subject": "s", "version": 1, "id": 1, "schema": V1, "deleted": False}
    assert decode(b"not json", b"{}") is None and decode(b'{"no":"keytype"}', None) is None


def test_an_avro_schema_that_differs_only_in_a_default_is_a_new_version() -> None:
    # Avro's Parsing Canonical Form drops defaults: as the registry's identity it made this change
    # return the old id and write nothing
    w = Writer()
    w.write(w.registry.register("s", record([("e", "string")]))[1])
    schema_id, made = w.registry.register("s", record([("e", "string", "x")]))
    assert schema_id == 2 and made
    spaced = json.dumps(json.loads(record([("e", "string")])), indent=4)
    assert w.registry.register("s", spaced) == (1, [])  # white space alone changes nothing

"""The Protobuf type: protoc's parse, imports as references, the two text forms, and Confluent's
Protobuf compatibility rules.

The rule cases restate examples from Confluent's own sources, cited per case:

- [docs] Confluent Platform docs, "Protobuf Schema Serializer and Deserializer", section
  "Protobuf compatibility rules" (scalar groups, oneofs; "the best practice for Protobuf is
  BACKWARD_TRANSITIVE, as adding new message types is not forward compatible");
- [fixtures] confluentinc/schema-registry, protobuf-provider/src/test/resources/
  diff-schema-examples.json: the case named by its description there.

(Checked once, outside the suite, against all 54 cases of that fixture file, references
included: every compatible/incompatible verdict agreed.)

Cost, measured here on this machine (2 shared cores): a parse is one protoc process, 5-15 ms;
compatibility.parse caches parses, so the registry pays it once per distinct schema.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.schemas import compatibility, errors, protobuf
from logstore.schemas.records import Reference
from logstore.schemas.registry import Registry

pytestmark = pytest.mark.unit


def proto(body: str, package: str = "acme", syntax: str = "proto3", imports: str = "") -> str:
    return f'syntax = "{syntax}";\npackage {package};\n{imports}\n{body}\n'


def changes(original: str, update: str, refs: tuple[tuple[str, str], ...] = ()) -> list[str]:
    u, o = protobuf.parse(update, refs), protobuf.parse(original, refs)
    return sorted(f"{d.type} {d.path}" for d in u.differences(o))


def reads(update: str, original: str) -> bool:
    return not protobuf.parse(update).reads(protobuf.parse(original))


V1 = proto("message Order { int64 id = 1; string note = 2; }")


@pytest.mark.parametrize(
    ("update", "expected", "compatible"),
    [  # [fixtures] "Detect added field", "Detect removed field", "Detect changed field number"
        ("message Order { int64 id = 1; string note = 2; double total = 3; }", ["FIELD_ADDED #/Order/3"], True),
        ("message Order { int64 id = 1; }", ["FIELD_REMOVED #/Order/2"], True),
        ("message Order { int64 id = 1; string note = 3; }", ["FIELD_ADDED #/Order/3", "FIELD_REMOVED #/Order/2"], True),
        # "Detect compatible field number type change": int64 -> int32/uint64/bool, one wire group [docs]
        ("message Order { uint64 id = 1; string note = 2; }", [], True),
        # "Detect compatible field string type change": string <-> bytes
        ("message Order { int64 id = 1; bytes note = 2; }", [], True),
        # "Detect incompatible field type change": another scalar group
        ("message Order { sint64 id = 1; string note = 2; }", ["FIELD_SCALAR_KIND_CHANGED #/Order/1"], False),
        ("message Order { double id = 1; string note = 2; }", ["FIELD_SCALAR_KIND_CHANGED #/Order/1"], False),
        ("message Order { int64 id = 1; Note note = 2; } message Note { string text = 1; }",
         ["FIELD_KIND_CHANGED #/Order/2", "MESSAGE_ADDED #/Note"], False),
        # "Detect incompatible field label change for number" / "...for string": between labels
        # written out (a proto3 field without one has none, as in Confluent's parser)
        ("message Order { repeated int64 id = 1; string note = 2; }", [], True),
        # a renamed field: names are not on the wire
        ("message Order { int64 order_id = 1; string note = 2; }", ["FIELD_NAME_CHANGED #/Order/1"], True),
    ],
)  # fmt: skip
def test_field_changes_have_confluents_verdict(update: str, expected: list[str], compatible: bool) -> None:
    assert changes(V1, proto(update)) == expected
    assert reads(proto(update), V1) is compatible


def test_messages_enums_and_the_package() -> None:
    # [fixtures] "Detect compatible message addition", "Detect compatible message index change"
    two = proto("message Order { int64 id = 1; string note = 2; } message Line { string sku = 1; }")
    assert changes(V1, two) == ["MESSAGE_ADDED #/Line"] and reads(two, V1)
    swapped = proto("message Line { string sku = 1; } message Order { int64 id = 1; string note = 2; }")
    assert changes(two, swapped) == ["MESSAGE_MOVED #/Line", "MESSAGE_MOVED #/Order"] and reads(swapped, two)
    # [docs] adding a message type is not forward compatible: the old schema lacks it
    assert changes(two, V1) == ["MESSAGE_REMOVED #/Line"] and not reads(V1, two)
    assert compatibility.check("FORWARD", protobuf.parse(two), [protobuf.parse(V1)])
    assert not compatibility.check("BACKWARD", protobuf.parse(two), [protobuf.parse(V1)])
    # [fixtures] "Detect package change" (incompatible in Confluent's current rules)
    assert changes(V1, proto("message Order { int64 id = 1; string note = 2; }", package="other")) == [
        "PACKAGE_CHANGED #/"]
    # [fixtures] "Detect enum const change", "Detect field number type to enum change"
    e1 = proto("message T { int32 s = 1; }")
    e2 = proto("message T { Status s = 1; } enum Status { A = 0; B = 1; }")
    assert changes(e1, e2) == ["ENUM_ADDED #/Status"] and reads(e2, e1)
    e3 = proto("message T { Status s = 1; } enum Status { A = 0; BEE = 1; C = 2; }")
    assert changes(e2, e3) == ["ENUM_CONST_ADDED #/Status/2", "ENUM_CONST_CHANGED #/Status/1"]


def test_label_changes_between_written_labels() -> None:
    # [fixtures] "Detect incompatible field label change for number" / "...for string" / "...for bytes"
    o1 = proto("message T { optional int64 id = 1; optional string note = 2; }")
    o2 = proto("message T { repeated int64 id = 1; repeated string note = 2; }")
    assert changes(o1, o2) == ["FIELD_NUMERIC_LABEL_CHANGED #/T/1", "FIELD_STRING_OR_BYTES_LABEL_CHANGED #/T/2"]
    assert not reads(o2, o1)
    assert reads(proto("message T { optional int64 id = 1; repeated bytes note = 2; }"), o1)


def test_proto2_required_fields() -> None:
    # [fixtures] "Detect added required field", "Detect removed required field"
    p1 = proto("message T { optional string a = 1; }", syntax="proto2")
    p2 = proto("message T { optional string a = 1; required int32 b = 2; }", syntax="proto2")
    assert changes(p1, p2) == ["REQUIRED_FIELD_ADDED #/T/2"] and not reads(p2, p1)
    assert changes(p2, p1) == ["REQUIRED_FIELD_REMOVED #/T/2"] and not reads(p1, p2)


def test_oneofs() -> None:
    base = proto("message T { string a = 1; int32 b = 2; }")
    # [fixtures] "Detect compatible move field to oneof": one field into a new oneof
    one = proto("message T { oneof choice { string a = 1; } int32 b = 2; }")
    assert changes(base, one) == ["ONEOF_ADDED #/T/choice"] and reads(one, base)
    # "Detect incompatible field to oneof change": two fields that coexisted now exclude each other
    both = proto("message T { oneof choice { string a = 1; int32 b = 2; } }")
    assert "MULTIPLE_FIELDS_MOVED_TO_ONEOF #/T/choice" in changes(base, both) and not reads(both, base)
    # "Detect incompatible move field to oneof": into a oneof that already held an existing field
    held = proto("message T { oneof choice { string a = 1; } int32 b = 2; }")
    into = proto("message T { oneof choice { string a = 1; int32 b = 2; } }")
    assert changes(held, into) == ["FIELD_MOVED_TO_EXISTING_ONEOF #/T/choice"]
    # "Detect compatible add field to oneof" / "Detect incompatible remove field from oneof"
    wider = proto("message T { oneof choice { string a = 1; double c = 3; } int32 b = 2; }")
    assert changes(held, wider) == ["ONEOF_FIELD_ADDED #/T/choice/3"] and reads(wider, held)
    assert changes(wider, held) == ["ONEOF_FIELD_REMOVED #/T/choice/3"] and not reads(held, wider)
    # "Detect incompatible field type change when enclosing oneof is renamed"
    renamed = proto("message T { oneof other { bytes a = 1; } int32 b = 2; }")
    assert reads(renamed, held)  # string -> bytes: same group
    retyped = proto("message T { oneof other { double a = 1; } int32 b = 2; }")
    assert "FIELD_SCALAR_KIND_CHANGED #/T/other/1" in changes(held, retyped)


def test_message_typed_fields_compare_their_messages_even_across_imports() -> None:
    # [fixtures] "Detect incompatible import change": the imported message's field changed group
    home1 = proto("message Home { int32 device = 1; bool on = 2; }", package="acme.home")
    home2 = proto("message Home { string device = 1; bool on = 2; }", package="acme.home")
    user = proto("message User { acme.home.Home home = 1; }", imports='import "home.proto";')
    u1, u2 = protobuf.parse(user, [("home.proto", home1)]), protobuf.parse(user, [("home.proto", home2)])
    found = sorted(f"{d.type} {d.path}" for d in u2.differences(u1))
    assert found == ["FIELD_NAMED_TYPE_CHANGED #/User/1", "FIELD_SCALAR_KIND_CHANGED #/Home/1"]
    # maps compare their key and value types: "Detect compatible name qualification in map"
    m1 = proto("message T { map<string, int32> m = 1; }")
    assert reads(proto("message T { map<string, int64> m = 1; }"), m1)
    assert not reads(proto("message T { map<string, string> m = 1; }"), m1)


def test_the_registry_resolves_imports_from_referenced_subjects() -> None:
    registry = Registry()

    def write(records: list[tuple[bytes | None, bytes | None]]) -> None:
        for key, value in records:
            registry.state.apply(key, value)

    common = proto("message Money { int64 units = 1; string currency = 2; }", package="acme.common")
    write(registry.register("money", common, "PROTOBUF")[1])
    order = proto("message Order { acme.common.Money total = 1; }", imports='import "acme/money.proto";')
    ref = Reference("acme/money.proto", "money", 1)
    schema_id, made = registry.register("orders-value", order, "PROTOBUF", [ref])
    write(made)
    assert schema_id == 2
    # the same schema with other white space and comments is the same schema (canonical form)
    spaced = order.replace("message Order {", "// an order\nmessage   Order\n{")
    assert registry.register("orders-value", spaced, "PROTOBUF", [ref]) == (2, [])
    with pytest.raises(errors.RegistryError) as missing:
        registry.register("other", order, "PROTOBUF")  # the import without its reference
    assert missing.value.code == 42201 and "acme/money.proto" in missing.value.message
    with pytest.raises(errors.RegistryError) as incompatible:
        registry.register("orders-value", proto("message Order { string total = 1; }"), "PROTOBUF")
    assert incompatible.value.code == 409 and "FIELD_KIND_CHANGED" in incompatible.value.message


@pytest.mark.parametrize(
    "text",
    [
        "message {",  # syntax
        proto("message T { int32 a = 1; string b = 1; }"),  # a duplicate number
        proto("message T { Missing m = 1; }"),  # an unknown type
        proto("message T { int32 a = 1 [default = 3]; }"),  # proto3 has no defaults
        proto("message T { int32 a = 1; }", imports='import "nowhere.proto";'),
        'syntax = "proto4";',
    ],
)
def test_malformed_protos_are_42201_with_protocs_reason(text: str) -> None:
    with pytest.raises(errors.RegistryError) as bad:
        compatibility.parse("PROTOBUF", text)
    assert (bad.value.status, bad.value.code) == (422, 42201)
    assert "logstore-proto-" not in bad.value.message  # no temporary paths leak


def test_a_reference_name_must_be_a_relative_proto_path() -> None:
    for name in ("/etc/passwd.proto", "../up.proto", "x.txt"):
        with pytest.raises(errors.RegistryError) as bad:
            protobuf.parse(proto("message T { int32 a = 1; }"), [(name, proto("message U {}"))])
        assert bad.value.code == 42201 and "reference name" in bad.value.message


def test_a_huge_proto_parses_once_and_then_comes_from_the_cache() -> None:
    fields = "\n".join(f"  string f{i} = {i};" for i in range(1, 3001))
    text = proto(f"message Wide {{\n{fields}\n}}")
    started = time.perf_counter()
    parsed = compatibility.parse("PROTOBUF", text)
    first = time.perf_counter() - started
    started = time.perf_counter()
    assert compatibility.parse("PROTOBUF", text) is parsed
    assert time.perf_counter() - started < first  # no second protoc run
    assert len(parsed.canonical().splitlines()) == 3000 + 4  # syntax, package, message { }


def test_canonical_and_normalized_forms_parse_back_to_themselves() -> None:
    text = proto(
        """
        message Order {
          repeated int32 counts = 3 [packed = true];
          optional string note = 2;
          map<string, Line> lines = 7;
          oneof pay { string card = 8; int64 account = 9; }
          message Line { string sku = 1; double price = 2 [json_name = "p"]; }
          enum Status { OPEN = 0; CLOSED = 1; }
          reserved 20, 21 to 25;
          reserved "old";
        }
        service Orders { rpc Get (Order) returns (stream Order); }
        """,
        imports='import "google/protobuf/timestamp.proto";\noption java_package = "com.acme";',
    )
    parsed = protobuf.parse(text)
    again = protobuf.parse(parsed.canonical())
    assert again.file == parsed.file and again.canonical() == parsed.canonical()
    normalized = parsed.normalized()
    assert protobuf.parse(normalized).normalized() == normalized
    assert normalized.index("optional string note = 2") < normalized.index("repeated int32 counts = 3")
    assert parsed.message_names() == ["acme.Order"]


FIELD_TYPES = st.sampled_from(["int32", "int64", "uint32", "bool", "sint64", "string", "bytes", "double", "fixed32"])
MESSAGES = st.lists(
    st.tuples(FIELD_TYPES, st.booleans()), min_size=1, max_size=6
).map(lambda fs: proto("message T {\n" + "\n".join(
    f"  {'repeated ' if rep else ''}{t} f{i} = {i + 1};" for i, (t, rep) in enumerate(fs)) + "\n}"))  # fmt: skip


@pytest.mark.property
@settings(max_examples=25, deadline=None)
@given(MESSAGES)
def test_a_proto_is_compatible_with_itself_at_every_level_and_normalizing_is_idempotent(text: str) -> None:
    parsed = compatibility.parse("PROTOBUF", text)
    for level in compatibility.LEVELS:
        assert compatibility.check(level, parsed, [parsed]) == []
    normalized = parsed.normalized()
    assert compatibility.parse("PROTOBUF", normalized).normalized() == normalized


def test_a_base64_file_descriptor_is_the_same_schema_as_its_proto_text() -> None:
    # Confluent's registry takes a schema as a base64 FileDescriptorProto too; confluent-kafka's
    # ProtobufSerializer registers that form.
    import base64

    from google.protobuf import timestamp_pb2

    serialized = base64.standard_b64encode(timestamp_pb2.DESCRIPTOR.serialized_pb).decode()
    from_bytes = compatibility.parse("PROTOBUF", serialized)
    from_text = compatibility.parse("PROTOBUF", from_bytes.canonical())
    assert from_bytes.canonical() == from_text.canonical()
    assert from_bytes.message_names() == ["google.protobuf.Timestamp"]
    assert protobuf.from_serialized("bm90IGEgZGVzY3JpcHRvcg==") is None  # base64, but not a descriptor


@pytest.mark.parametrize("imported", ["stdio.h", "/etc/passwd", "other.proto"])
def test_protoc_opens_no_file_but_the_references_and_the_well_known_types(imported: str) -> None:
    # protoc's own include path is /usr/include: an import of anything there must not reach it
    with pytest.raises(errors.RegistryError) as refused:
        protobuf.parse(proto("message T { int32 a = 1; }", imports=f'import "{imported}";'))
    assert refused.value.code == 42201 and "neither a reference's name" in refused.value.message
    with pytest.raises(errors.RegistryError) as concatenated:
        protobuf.parse(proto("message T {}", imports='import "std" "io.h";'))
    assert concatenated.value.code == 42201
    # commented-out imports are not imports
    assert protobuf.parse(proto("message T {}", imports='// import "stdio.h";\n/* import "x.h"; */'))


def test_references_of_references_are_resolved_transitively() -> None:
    registry = Registry()

    def write(records: list[tuple[bytes | None, bytes | None]]) -> None:
        for key, value in records:
            registry.state.apply(key, value)

    money = proto("message Money { int64 units = 1; }", package="acme.common")
    write(registry.register("money", money, "PROTOBUF")[1])
    line = proto("message Line { acme.common.Money price = 1; }", package="acme.lines",
                 imports='import "money.proto";')  # fmt: skip
    write(registry.register("line", line, "PROTOBUF", [Reference("money.proto", "money", 1)])[1])
    order = proto("message Order { repeated acme.lines.Line lines = 1; }", imports='import "line.proto";')
    schema_id, made = registry.register("order", order, "PROTOBUF", [Reference("line.proto", "line", 1)])
    assert schema_id == 3 and made  # money.proto came along through line's own reference

"""Confluent's Protobuf compatibility rules over compiled descriptors, and the table of its changes.

:func:`compare` walks an *original* file (the writer's) and an *update* (the
reader's) and names each change with Confluent's ``Difference.Type`` (its
``ProtobufDiff``); :data:`RULES` says which are compatible. The update reads
what the original wrote when every change is compatible. Messages and enums are
matched by name (nested ones within their parent), fields by number.

The rules, in short (the table is the reference):

- adding or removing a field, a message, an enum, an enum constant or a oneof,
  renaming a field or changing the package is compatible (Protobuf skips
  unknown fields; names are not on the wire); removing a message is not (a
  record's message index could name it); moving a message is (message indexes
  are read against the writer's schema);
- a proto2 ``required`` field added or removed is incompatible;
- a field's kind (scalar, message, map) changing is incompatible; scalars may
  change only within a wire-compatible group: {int32, int64, uint32, uint64,
  bool, enums}, {sint32, sint64}, {string, bytes}, {fixed32, sfixed32},
  {fixed64, sfixed64}, {float}, {double};
- a label change (repeated / optional / required) is incompatible for numbers
  (packed encoding) and compatible for string and bytes;
- a message-typed field must keep its type's name (without the package), and
  that message must itself be compatible (FIELD_NAMED_TYPE_CHANGED otherwise);
- oneofs: a field removed from a oneof is incompatible, one added is not; moving
  several existing fields into one oneof, or one field into a oneof that already
  held existing fields, is incompatible (values that coexisted now exclude each
  other).

One difference from Confluent's Java diff: a field moved into a oneof still has
its type compared (Confluent skips it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from google.protobuf import descriptor_pb2

from logstore.schemas import errors
from logstore.schemas.difference import Difference

FDP = descriptor_pb2.FieldDescriptorProto
Message = descriptor_pb2.DescriptorProto
Enum = descriptor_pb2.EnumDescriptorProto

# Confluent's Difference.Type: compatible?, what it means (original -> update).
RULES: dict[str, tuple[bool, str]] = {
    "PACKAGE_CHANGED": (False, "the package changed (the messages' full names with it)"),
    "MESSAGE_ADDED": (True, "a message added"),
    "MESSAGE_REMOVED": (False, "a message removed"),
    "MESSAGE_MOVED": (True, "a message moved (its index changed)"),
    "ENUM_ADDED": (True, "an enum added"),
    "ENUM_REMOVED": (True, "an enum removed"),
    "ENUM_CONST_ADDED": (True, "an enum constant added"),
    "ENUM_CONST_CHANGED": (True, "an enum constant renamed"),
    "ENUM_CONST_REMOVED": (True, "an enum constant removed"),
    "FIELD_ADDED": (True, "a field added"),
    "FIELD_REMOVED": (True, "a field removed"),
    "FIELD_NAME_CHANGED": (True, "a field renamed"),
    "FIELD_KIND_CHANGED": (False, "a field's kind (scalar, message, map) changed"),
    "FIELD_SCALAR_KIND_CHANGED": (False, "a field's scalar type changed to one of another wire group"),
    "FIELD_NAMED_TYPE_CHANGED": (False, "a field's message type changed, or is not compatible"),
    "FIELD_NUMERIC_LABEL_CHANGED": (False, "a numeric field's label (repeated, optional, required) changed"),
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED": (True, "a string or bytes field's label changed"),
    "REQUIRED_FIELD_ADDED": (False, "a required field added"),
    "REQUIRED_FIELD_REMOVED": (False, "a required field removed"),
    "ONEOF_ADDED": (True, "a oneof added"),
    "ONEOF_REMOVED": (True, "a oneof removed"),
    "ONEOF_FIELD_ADDED": (True, "a field added to a oneof"),
    "ONEOF_FIELD_REMOVED": (False, "a field removed from a oneof"),
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": (True, "a field moved out of its oneof"),
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": (False, "several existing fields moved into one oneof"),
    "FIELD_MOVED_TO_EXISTING_ONEOF": (False, "an existing field moved into a oneof that held existing fields"),
}

SCALAR_GROUPS: dict[int, str] = {
    FDP.TYPE_INT32: "GENERAL_NUMBER", FDP.TYPE_INT64: "GENERAL_NUMBER", FDP.TYPE_UINT32: "GENERAL_NUMBER",
    FDP.TYPE_UINT64: "GENERAL_NUMBER", FDP.TYPE_BOOL: "GENERAL_NUMBER", FDP.TYPE_ENUM: "GENERAL_NUMBER",
    FDP.TYPE_SINT32: "SIGNED_NUMBER", FDP.TYPE_SINT64: "SIGNED_NUMBER",
    FDP.TYPE_STRING: "STRING_OR_BYTES", FDP.TYPE_BYTES: "STRING_OR_BYTES",
    FDP.TYPE_FIXED32: "FIXED32", FDP.TYPE_SFIXED32: "FIXED32",
    FDP.TYPE_FIXED64: "FIXED64", FDP.TYPE_SFIXED64: "FIXED64",
    FDP.TYPE_FLOAT: "FLOAT", FDP.TYPE_DOUBLE: "DOUBLE",
}  # fmt: skip


@dataclass(frozen=True)
class _Type:
    """A message or enum by its full name (without the leading dot), and its file's package."""

    node: Message | Enum
    package: str
    is_map: bool

    def local_name(self, full: str) -> str:
        return full[len(self.package) + 1 :] if self.package and full.startswith(self.package + ".") else full


def index(files: Sequence[descriptor_pb2.FileDescriptorProto]) -> dict[str, _Type]:
    """Every message and enum of ``files`` by full name."""
    found: dict[str, _Type] = {}

    def walk(prefix: str, package: str, messages: Sequence[Message], enums: Sequence[Enum]) -> None:
        for m in messages:
            found[prefix + m.name] = _Type(m, package, m.options.map_entry)
            walk(prefix + m.name + ".", package, m.nested_type, m.enum_type)
        for e in enums:
            found[prefix + e.name] = _Type(e, package, False)

    for f in files:
        walk(f"{f.package}." if f.package else "", f.package, f.message_type, f.enum_type)
    return found


@dataclass
class _Walk:
    original: dict[str, _Type]
    update: dict[str, _Type]
    original_proto3: bool
    update_proto3: bool
    found: list[Difference] = field(default_factory=list)
    visiting: set[tuple[str, str]] = field(default_factory=set)

    def add(self, kind: str, path: str) -> None:
        assert kind in RULES, kind
        self.found.append(Difference(kind, path, *RULES[kind]))

    def types(self, omessages: Sequence[Message], oenums: Sequence[Enum], oprefix: str,
              umessages: Sequence[Message], uenums: Sequence[Enum], uprefix: str, path: str) -> None:  # fmt: skip
        om = {m.name: (i, m) for i, m in enumerate(m for m in omessages if not m.options.map_entry)}
        um = {m.name: (i, m) for i, m in enumerate(m for m in umessages if not m.options.map_entry)}
        for name in sorted(om.keys() | um.keys()):
            at = f"{path}{name}"
            if name not in um:
                self.add("MESSAGE_REMOVED", at)
            elif name not in om:
                self.add("MESSAGE_ADDED", at)
            else:
                self.message(om[name][1], oprefix + name, um[name][1], uprefix + name, at)
                if om[name][0] != um[name][0]:
                    self.add("MESSAGE_MOVED", at)
        oe, ue = {e.name: e for e in oenums}, {e.name: e for e in uenums}
        for name in sorted(oe.keys() | ue.keys()):
            at = f"{path}{name}"
            if name not in ue:
                self.add("ENUM_REMOVED", at)
            elif name not in oe:
                self.add("ENUM_ADDED", at)
            else:
                self.enum(oe[name], ue[name], at)

    def enum(self, o: Enum, u: Enum, path: str) -> None:
        ov = {v.number: v.name for v in o.value}
        uv = {v.number: v.name for v in u.value}
        for number in sorted(ov.keys() | uv.keys()):
            if number not in uv:
                self.add("ENUM_CONST_REMOVED", f"{path}/{number}")
            elif number not in ov:
                self.add("ENUM_CONST_ADDED", f"{path}/{number}")
            elif ov[number] != uv[number]:
                self.add("ENUM_CONST_CHANGED", f"{path}/{number}")

    def message(self, o: Message, ofull: str, u: Message, ufull: str, path: str) -> None:
        if (ofull, ufull) in self.visiting:
            return
        self.visiting.add((ofull, ufull))
        try:
            self._message(o, ofull, u, ufull, path)
        finally:
            self.visiting.discard((ofull, ufull))

    def _message(self, o: Message, ofull: str, u: Message, ufull: str, path: str) -> None:
        """Fields by number across the whole message, whatever oneof holds them (so a oneof
        renamed, merged or left cannot hide a field's change); then the nested types."""
        oby, otag_oneof, oneofs_o = _fields(o)
        uby, utag_oneof, oneofs_u = _fields(u)
        deleted = {name for name, members in oneofs_o.items()  # a oneof gone with all its fields
                   if name not in oneofs_u and not any(n in uby for n in members)}  # fmt: skip
        for name, members in oneofs_u.items():  # values that coexisted must not come to exclude each other
            groups = {f"oneof:{otag_oneof[n]}" if n in otag_oneof else f"field:{n}" for n in members if n in oby}
            top_level_in = sum(1 for n in members if n in oby and n not in otag_oneof)
            if len(groups) > 1:
                self.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if top_level_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF",
                         f"{path}/{name}")  # fmt: skip
        for name in sorted(oneofs_o.keys() | oneofs_u.keys()):
            if name not in oneofs_u:
                self.add("ONEOF_REMOVED", f"{path}/{name}")
            elif name not in oneofs_o:
                self.add("ONEOF_ADDED", f"{path}/{name}")
        for number in sorted(oby.keys() | uby.keys()):
            oneof_o, oneof_u = otag_oneof.get(number), utag_oneof.get(number)
            if number not in uby:
                if oneof_o is not None:
                    if oneof_o not in deleted:
                        self.add("ONEOF_FIELD_REMOVED", f"{path}/{oneof_o}/{number}")
                else:
                    required = oby[number].label == FDP.LABEL_REQUIRED
                    self.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", f"{path}/{number}")
            elif number not in oby:
                if oneof_u is not None:
                    self.add("ONEOF_FIELD_ADDED", f"{path}/{oneof_u}/{number}")
                else:
                    required = uby[number].label == FDP.LABEL_REQUIRED
                    self.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED", f"{path}/{number}")
            else:
                if oneof_o is not None and oneof_u is None:
                    self.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", f"{path}/{number}")
                at = f"{path}/{oneof_u}/{number}" if oneof_u is not None else f"{path}/{number}"
                self.field(oby[number], uby[number], at)
        self.types(o.nested_type, o.enum_type, ofull + ".", u.nested_type, u.enum_type, ufull + ".", path + "/")

    def field(self, o: descriptor_pb2.FieldDescriptorProto, u: descriptor_pb2.FieldDescriptorProto, path: str) -> None:
        if o.name != u.name:
            self.add("FIELD_NAME_CHANGED", path)
        self.labels_and_types(self._label(o, True), o.type, o.type_name,
                              self._label(u, False), u.type, u.type_name, path)  # fmt: skip

    def _label(self, f: descriptor_pb2.FieldDescriptorProto, original: bool) -> str | None:
        """Confluent's label: None for a proto3 field without one, and for a map."""
        entry = (self.original if original else self.update).get(f.type_name.lstrip("."))
        if entry is not None and entry.is_map:
            return None
        if f.label == FDP.LABEL_REPEATED:
            return "repeated"
        if f.label == FDP.LABEL_REQUIRED:
            return "required"
        proto3 = self.original_proto3 if original else self.update_proto3
        return "optional" if not proto3 or f.proto3_optional else None

    def labels_and_types(self, olabel: str | None, otype: int, otype_name: str,
                         ulabel: str | None, utype: int, utype_name: str, path: str) -> None:  # fmt: skip
        ofull, ufull = otype_name.lstrip("."), utype_name.lstrip(".")
        ot, ut = self.original.get(ofull), self.update.get(ufull)
        okind, ukind = _kind(otype, ot), _kind(utype, ut)
        if okind != ukind:
            self.add("FIELD_KIND_CHANGED", path)
        elif okind == "SCALAR":
            if SCALAR_GROUPS[otype] != SCALAR_GROUPS[utype]:
                self.add("FIELD_SCALAR_KIND_CHANGED", path)
            elif olabel is not None and ulabel is not None and olabel != ulabel:
                string = SCALAR_GROUPS[otype] == "STRING_OR_BYTES"
                self.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if string else "FIELD_NUMERIC_LABEL_CHANGED", path)
        elif okind == "MAP":
            assert ot is not None and ut is not None and isinstance(ot.node, Message) and isinstance(ut.node, Message)
            for a, b in zip(ot.node.field, ut.node.field, strict=False):  # key, value
                self.labels_and_types(None, a.type, a.type_name, None, b.type, b.type_name, path)
        elif ot is None or ut is None:  # a type this walk cannot see: compare names
            if ofull != ufull:
                self.add("FIELD_NAMED_TYPE_CHANGED", path)
        elif ot.local_name(ofull) != ut.local_name(ufull):
            self.add("FIELD_NAMED_TYPE_CHANGED", path)
        else:
            assert isinstance(ot.node, Message) and isinstance(ut.node, Message)
            sub = _Walk(self.original, self.update, self.original_proto3, self.update_proto3,
                        visiting=self.visiting)  # fmt: skip
            sub.message(ot.node, ofull, ut.node, ufull, f"#/{ot.local_name(ofull)}")
            self.found += sub.found
            if not all(d.compatible for d in sub.found):
                self.add("FIELD_NAMED_TYPE_CHANGED", path)


def _kind(kind: int, named: _Type | None) -> str:
    if kind in (FDP.TYPE_MESSAGE, FDP.TYPE_GROUP):
        return "MAP" if named is not None and named.is_map else "MESSAGE"
    return "SCALAR"


def _fields(message: Message) -> tuple[dict[int, descriptor_pb2.FieldDescriptorProto], dict[int, str],
                                       dict[str, list[int]]]:  # fmt: skip
    """(every field by number, the real oneof of each member by number, each oneof's members)."""
    by_number = {f.number: f for f in message.field}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[int]] = {}
    for f in message.field:
        if f.HasField("oneof_index") and not f.proto3_optional:  # proto3 optional: a synthetic oneof
            name = message.oneof_decl[f.oneof_index].name
            oneof_of[f.number] = name
            oneofs.setdefault(name, []).append(f.number)
    return by_number, oneof_of, oneofs


def compare(original: descriptor_pb2.FileDescriptorProto, original_files: Sequence[descriptor_pb2.FileDescriptorProto],
            update: descriptor_pb2.FileDescriptorProto,
            update_files: Sequence[descriptor_pb2.FileDescriptorProto]) -> list[Difference]:  # fmt: skip
    """Every difference from ``original`` (the writer's file) to ``update`` (the reader's);
    ``*_files``: every file each imports, to resolve field types."""
    walk = _Walk(index(original_files), index(update_files), original.syntax == "proto3", update.syntax == "proto3")
    if original.package != update.package:
        walk.add("PACKAGE_CHANGED", "#/")
    oprefix = f"{original.package}." if original.package else ""
    uprefix = f"{update.package}." if update.package else ""
    try:
        walk.types(original.message_type, original.enum_type, oprefix, update.message_type, update.enum_type,
                   uprefix, "#/")  # fmt: skip
    except RecursionError:  # message types can chain deeper than the stack
        raise errors.invalid_schema("the schemas nest too deeply to be compared") from None
    return walk.found

"""The Protobuf type: .proto text compiled by ``protoc``, read as descriptors with ``protobuf``.

Why ``protoc`` (Debian's ``protobuf-compiler``) and not a pure-Python .proto
parser: the registry must refuse what Protobuf refuses (an unknown type, a
duplicate field number, a proto3 field with a default, a bad import), and must
know each field's resolved type to compare schemas; ``protoc`` is Protobuf's own
compiler and answers both, for proto2 and proto3, with the well-known types
(``google/protobuf/*.proto``) it ships. A pure-Python parser (proto-schema-parser)
gives a syntax tree only: names unresolved, semantics unchecked. The cost is a
process per parse: about 10-15 ms on this machine (measured in the tests' module
doc); compatibility.py caches parses, so a schema is compiled once per process,
not once per register or check.

Parsing (:func:`parse`): the schema is .proto text, or (as Confluent's registry also
takes, and confluent-kafka's ``ProtobufSerializer`` sends) a base64 ``FileDescriptorProto``,
rendered to .proto text first. It is written to a private temporary directory
as ``MAIN`` beside its references, each at its reference ``name`` (the path an
``import`` names, e.g. ``"acme/address.proto"``), and compiled with
``--include_imports``; the ``FileDescriptorSet`` it writes is the parse. A
compiler error, a reference name that is not a relative path, or an import of a
file that is neither a reference nor a well-known type is Confluent's 42201
with ``protoc``'s message.

Forms: :meth:`ProtobufSchema.canonical` renders the descriptor back to .proto
text (comments and layout dropped, type names fully qualified, declaration
order kept: message indexes on the wire count declaration order);
:meth:`ProtobufSchema.normalized` also puts fields in number order and imports
and options in name order (messages and enums keep their order, for the same
reason). Both forms parse back to themselves. Custom options (extensions of
``google.protobuf.*Options``) are not rendered.

Compatibility: :mod:`logstore.schemas.proto_diff` (Confluent's Protobuf rules).
"""

from __future__ import annotations

import base64
import binascii
import os
import pathlib
import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from google.protobuf import descriptor_pb2
from google.protobuf.message import DecodeError

from logstore.schemas import errors, proto_diff

MAIN = "__schema__.proto"
# Imports allowed without a reference: protobuf's well-known types, which protoc ships.
WELL_KNOWN = "google/protobuf/"
PROTOC = "protoc"
PROTOC_TIMEOUT_S = 30.0
FDP = descriptor_pb2.FieldDescriptorProto
SCALARS = {
    FDP.TYPE_DOUBLE: "double", FDP.TYPE_FLOAT: "float", FDP.TYPE_INT64: "int64", FDP.TYPE_UINT64: "uint64",
    FDP.TYPE_INT32: "int32", FDP.TYPE_FIXED64: "fixed64", FDP.TYPE_FIXED32: "fixed32", FDP.TYPE_BOOL: "bool",
    FDP.TYPE_STRING: "string", FDP.TYPE_BYTES: "bytes", FDP.TYPE_UINT32: "uint32",
    FDP.TYPE_SFIXED32: "sfixed32", FDP.TYPE_SFIXED64: "sfixed64", FDP.TYPE_SINT32: "sint32",
    FDP.TYPE_SINT64: "sint64",
}  # fmt: skip


@dataclass(frozen=True)
class ProtobufSchema:
    """A compiled .proto: its own file's descriptor and every file it imports, by name."""

    file: descriptor_pb2.FileDescriptorProto
    files: tuple[descriptor_pb2.FileDescriptorProto, ...]  # dependencies first, ``file`` last

    def canonical(self) -> str:
        return render(self.file)

    def normalized(self) -> str:
        return render(self.file, normalize=True)

    def reads(self, writer: object) -> list[str]:
        assert isinstance(writer, ProtobufSchema)
        return [d.message() for d in self.differences(writer) if not d.compatible]

    def differences(self, writer: ProtobufSchema) -> list[proto_diff.Difference]:
        """Every difference from ``writer`` (the original) to this schema (the update)."""
        return proto_diff.compare(writer.file, writer.files, self.file, self.files)

    def message_names(self) -> list[str]:
        """Full names of the top-level messages, in declaration order (message index 0, 1, ...)."""
        prefix = f"{self.file.package}." if self.file.package else ""
        return [prefix + m.name for m in self.file.message_type]


def parse(text: str, references: Sequence[tuple[str, str]] = ()) -> ProtobufSchema:
    """``text`` compiled with ``references`` ((import name, .proto text)) beside it; 42201 with
    protoc's reason if it does not compile."""
    texts = [(name, from_serialized(t) or t) for name, t in references] + [(MAIN, from_serialized(text) or text)]
    allowed = {name for name, _ in references}
    for name, body in texts:
        which = "the schema" if name == MAIN else f"reference {name!r}"
        for imported in imports(body, which):
            if imported not in allowed and not imported.startswith(WELL_KNOWN):
                raise errors.invalid_schema(
                    f"{which} imports {imported!r}, which is neither a reference's name nor one of "
                    f"protobuf's well-known types ({WELL_KNOWN}*)")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="logstore-proto-") as tmp:
        root = pathlib.Path(tmp)
        for name, body in texts:
            _write(root, name, body)
        out = root / "__out__.pb"
        try:
            done = subprocess.run(
                [PROTOC, f"-I{root}", "--include_imports", f"--descriptor_set_out={out}", str(root / MAIN)],
                capture_output=True, timeout=PROTOC_TIMEOUT_S, cwd=root, check=False,
            )  # fmt: skip
        except FileNotFoundError:
            raise errors.RegistryError(500, 50001, "protoc is not installed (Debian's protobuf-compiler)") from None
        except subprocess.TimeoutExpired:
            raise errors.invalid_schema(f"protoc did not finish in {PROTOC_TIMEOUT_S:.0f} s") from None
        if done.returncode != 0:
            lines = done.stderr.decode("utf-8", "replace").replace(f"{root}{os.sep}", "").splitlines()
            why = "\n".join(line for line in lines if not line.startswith("[libprotobuf WARNING")).strip()
            raise errors.invalid_schema(why.replace(MAIN, "schema") or f"protoc exited {done.returncode}")
        found = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    files = tuple(found.file)
    assert files and files[-1].name == MAIN, [f.name for f in files]
    return ProtobufSchema(files[-1], files)


def from_serialized(text: str) -> str | None:
    """``text`` as .proto text when it is a base64 ``FileDescriptorProto`` (what confluent-kafka's
    ``ProtobufSerializer`` registers, as Confluent's registry accepts), else None."""
    stripped = text.strip()
    if not stripped or len(stripped) % 4 or any(c in stripped for c in ' \n\t;{"'):
        return None
    try:
        found = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(stripped, validate=True))
    except (binascii.Error, ValueError, DecodeError):
        return None
    if not (found.name or found.message_type or found.enum_type or found.service):
        return None
    return render(found)


_TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|//[^\n]*|/\*.*?\*/', re.S)
_IMPORT = re.compile(r'\bimport\s+(?:(?:public|weak)\s+)?(?:"([^"]*)"|\'([^\']*)\')\s*;')


def imports(text: str, which: str = "the schema") -> list[str]:
    """The files ``text`` imports, read past comments, so that protoc is asked to open no file but
    the references and the well-known types; 42201 for an import statement not of the plain form."""
    bare = _TOKENS.sub(lambda m: " " if m[0][0] == "/" else m[0], text)
    found = [a or b for a, b in _IMPORT.findall(bare)]
    if len(found) != len(re.findall(r"(?<![\w.])import\s*[\"']", bare)):
        raise errors.invalid_schema(f"{which} has an import statement other than import [public|weak] \"file\";")
    return found


def _write(root: pathlib.Path, name: str, text: str) -> None:
    path = pathlib.PurePosixPath(name)
    if not name or path.is_absolute() or ".." in path.parts or "\\" in name or not name.endswith(".proto"):
        raise errors.invalid_schema(f"reference name {name!r} is not a relative .proto path")
    target = root / path
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text, encoding="utf-8")


# -- rendering a descriptor back to .proto text ----------------------------------------------


def render(file: descriptor_pb2.FileDescriptorProto, normalize: bool = False) -> str:
    """``file`` as .proto text (see the module doc for the two forms)."""
    out: list[str] = [f'syntax = "{file.syntax or "proto2"}";']
    if file.package:
        out.append(f"package {file.package};")
    public, weak = set(file.public_dependency), set(file.weak_dependency)
    imports = [(("public " if i in public else "weak " if i in weak else "") + f'"{d}"')
               for i, d in enumerate(file.dependency)]  # fmt: skip
    out += [f"import {i};" for i in (sorted(imports) if normalize else imports)]
    out += [f"option {o};" for o in _options(file.options, normalize)]
    proto3 = file.syntax == "proto3"
    for message in file.message_type:
        out += _message(message, proto3, normalize, "")
    for enum in file.enum_type:
        out += _enum(enum, normalize, "")
    out += _extensions(file.extension, proto3, normalize, "")
    for service in file.service:
        out.append(f"service {service.name} {{")
        out += [f"  option {o};" for o in _options(service.options, normalize)]
        for method in service.method:
            cs, ss = "stream " if method.client_streaming else "", "stream " if method.server_streaming else ""
            options = _options(method.options, normalize)
            body = " {" + "".join(f" option {o};" for o in options) + " }" if options else ";"
            out.append(f"  rpc {method.name} ({cs}{method.input_type}) returns ({ss}{method.output_type}){body}")
        out.append("}")
    return "\n".join(out) + "\n"


def _options(options: object, normalize: bool) -> list[str]:
    """``name = value`` of each option set (custom options, unknown here, are left out)."""
    found = []
    for field, value in options.ListFields():  # type: ignore[attr-defined]
        if field.is_extension or field.name in ("map_entry", "uninterpreted_option"):
            continue
        if field.is_repeated or field.message_type is not None:  # features, lists: not written back
            continue
        found.append(f"{field.name} = {_literal(field, value)}")
    return sorted(found) if normalize else found


def _literal(field: object, value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return _quote(value)
    enum = getattr(field, "enum_type", None)
    if enum is not None and isinstance(value, int):
        return str(enum.values_by_number[value].name)
    return str(value)


def _quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _json_name(name: str) -> str:
    """protoc's default json_name: lowerCamelCase of the field name."""
    parts = name.split("_")
    return parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:])


def _field(field: descriptor_pb2.FieldDescriptorProto, proto3: bool, entries: dict[str, descriptor_pb2.DescriptorProto],
           in_oneof: bool) -> str:  # fmt: skip
    entry = entries.get(field.type_name)
    if entry is not None:  # a map field: its entry type is not written out
        key, value = entry.field[0], entry.field[1]
        kind = f"map<{_type(key)}, {_type(value)}>"
        label = ""
    else:
        kind = _type(field)
        if field.label == FDP.LABEL_REPEATED:
            label = "repeated "
        elif field.label == FDP.LABEL_REQUIRED:
            label = "required "
        elif in_oneof:
            label = ""
        elif proto3:
            label = "optional " if field.proto3_optional else ""
        else:
            label = "optional "
    options = []
    if field.HasField("default_value"):  # protoc's text: raw for strings, C-escaped for bytes
        default = field.default_value
        if field.type == FDP.TYPE_STRING:
            default = _quote(default)
        elif field.type == FDP.TYPE_BYTES:
            default = f'"{default}"'
        options.append(f"default = {default}")
    if field.HasField("json_name") and field.json_name != _json_name(field.name):
        options.append(f"json_name = {_quote(field.json_name)}")
    options += _options(field.options, False)
    suffix = f" [{', '.join(options)}]" if options else ""
    return f"{label}{kind} {field.name} = {field.number}{suffix};"


def _type(field: descriptor_pb2.FieldDescriptorProto) -> str:
    return SCALARS.get(field.type) or field.type_name


def _message(message: descriptor_pb2.DescriptorProto, proto3: bool, normalize: bool, indent: str) -> list[str]:
    inner = indent + "  "
    out = [f"{indent}message {message.name} {{"]
    out += [f"{inner}option {o};" for o in _options(message.options, normalize)]
    entries = {}
    for nested in message.nested_type:
        if nested.options.map_entry:
            entries[nested.name] = nested
    # a map field's type_name is fully qualified: match the entry by its last part
    by_type = {f.type_name: entries[f.type_name.rsplit(".", 1)[-1]] for f in message.field
               if f.type == FDP.TYPE_MESSAGE and f.type_name.rsplit(".", 1)[-1] in entries}  # fmt: skip
    fields = sorted(message.field, key=lambda f: f.number) if normalize else list(message.field)
    real_oneofs = {f.oneof_index for f in message.field if f.HasField("oneof_index") and not f.proto3_optional}
    groups = {f.type_name.rsplit(".", 1)[-1] for f in message.field if f.type == FDP.TYPE_GROUP}
    done: set[int] = set()
    for f in fields:
        if f.HasField("oneof_index") and f.oneof_index in real_oneofs:
            if f.oneof_index in done:
                continue
            done.add(f.oneof_index)
            oneof = message.oneof_decl[f.oneof_index]
            out.append(f"{inner}oneof {oneof.name} {{")
            out += [f"{inner}  option {o};" for o in _options(oneof.options, normalize)]
            out += [f"{inner}  {_field(m, proto3, by_type, True)}" for m in fields
                    if m.HasField("oneof_index") and m.oneof_index == f.oneof_index]  # fmt: skip
            out.append(f"{inner}}}")
        elif f.type == FDP.TYPE_GROUP:  # a proto2 group: its message is written in place
            nested = next(n for n in message.nested_type if n.name == f.type_name.rsplit(".", 1)[-1])
            body = _message(nested, proto3, normalize, inner)
            label = {FDP.LABEL_REPEATED: "repeated", FDP.LABEL_REQUIRED: "required"}.get(f.label, "optional")
            out.append(f"{inner}{label} group {nested.name} = {f.number} {{")
            out += body[1:]
        else:
            out.append(inner + _field(f, proto3, by_type, False))
    for nested in message.nested_type:
        if not nested.options.map_entry and nested.name not in groups:
            out += _message(nested, proto3, normalize, inner)
    for enum in message.enum_type:
        out += _enum(enum, normalize, inner)
    out += _extensions(message.extension, proto3, normalize, inner)
    for r in message.extension_range:
        out.append(f"{inner}extensions {r.start} to {'max' if r.end >= 536870912 else r.end - 1};")
    for reserved in message.reserved_range:
        start, end = reserved.start, reserved.end - 1
        out.append(f"{inner}reserved {start}" + (f" to {end};" if end != start else ";"))
    if message.reserved_name:
        names = sorted(message.reserved_name) if normalize else list(message.reserved_name)
        out.append(f"{inner}reserved {', '.join(_quote(n) for n in names)};")
    out.append(f"{indent}}}")
    return out


def _enum(enum: descriptor_pb2.EnumDescriptorProto, normalize: bool, indent: str) -> list[str]:
    inner = indent + "  "
    out = [f"{indent}enum {enum.name} {{"]
    out += [f"{inner}option {o};" for o in _options(enum.options, normalize)]
    for value in enum.value:
        options = _options(value.options, normalize)
        suffix = f" [{', '.join(options)}]" if options else ""
        out.append(f"{inner}{value.name} = {value.number}{suffix};")
    for r in enum.reserved_range:  # enum ranges are inclusive
        out.append(f"{inner}reserved {r.start}" + (f" to {r.end};" if r.end != r.start else ";"))
    if enum.reserved_name:
        out.append(f"{inner}reserved {', '.join(_quote(n) for n in enum.reserved_name)};")
    out.append(f"{indent}}}")
    return out


def _extensions(fields: Sequence[descriptor_pb2.FieldDescriptorProto], proto3: bool, normalize: bool,
                indent: str) -> list[str]:  # fmt: skip
    out: list[str] = []
    extendees: dict[str, list[descriptor_pb2.FieldDescriptorProto]] = {}
    for f in fields:
        extendees.setdefault(f.extendee, []).append(f)
    for extendee, members in extendees.items():
        out.append(f"{indent}extend {extendee} {{")
        ordered = sorted(members, key=lambda f: f.number) if normalize else members
        out += [f"{indent}  {_field(f, proto3, {}, False)}" for f in ordered]
        out.append(f"{indent}}}")
    return out

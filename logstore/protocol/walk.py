"""The bounds walk: every request body's lengths and nulls checked (in C, then in Python for the message) before kio reads it."""

from __future__ import annotations

import dataclasses
import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kio.serial import entity_reader
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from logstore._native import ffi, lib
from logstore.protocol.primitives import SIZE, MalformedRequest, _past_end, read_uvarint

_I16 = struct.Struct(">h")

# -- lengths checked before kio decodes -----------------------------------------
#
# kio's native reader sizes an array's storage from the length on the wire
# before reading its items: a 5-byte compact length (up to 2**35) or a large
# int32 one makes it allocate tens of gigabytes, and a failed allocation
# aborts the whole process. So every request body is first walked: in C
# (native/walk.c, over a program compiled by _WalkProgram below), and, when
# C refuses a body, by the walk here, in Python, which names the field for
# the error. Both apply the same rules: each array must fit in the bytes
# left (at its items' minimum size),
# each string and bytes field in the frame, and a null may only stand where
# the schema allows one (kio would hand a handler ``None`` for a
# non-nullable array). Anything else raises MalformedRequest, which the
# server reports as a body it cannot decode and closes the connection, as
# Kafka does. Runs of fixed-size fields are skipped at once, and so are
# arrays of fixed-size items.

_Step = Callable[[bytes | memoryview, int, int], int]  # (frame, at, end) -> the offset after the field
_FIXED_SIZES = {"int8": 1, "uint8": 1, "bool": 1, "int16": 2, "uint16": 2, "error_code": 2,
                "int32": 4, "uint32": 4, "timedelta_i32": 4, "int64": 8, "uint64": 8, "float64": 8,
                "timedelta_i64": 8, "datetime_i64": 8, "uuid": 16}  # fmt: skip


@dataclass(frozen=True)
class _Shape:
    """How to walk one field: its step, its minimum size, and whether that size is exact."""

    step: _Step
    size: int
    exact: bool


def _fixed(size: int, name: str) -> _Shape:
    def fixed(frame: bytes | memoryview, at: int, end: int) -> int:
        at += size
        if at > end:
            raise _past_end(name)
        return at

    return _Shape(fixed, size, True)


def _null(name: str) -> MalformedRequest:
    return MalformedRequest(f"{name} is null, which its schema does not allow")


def _primitive(kafka_type: str, flexible: bool, nullable: bool, name: str) -> _Shape:
    size = _FIXED_SIZES.get(kafka_type)
    if size is not None:
        return _fixed(size, name)
    if kafka_type not in ("string", "bytes", "records"):
        raise LookupError(f"no length check for kafka_type {kafka_type!r} ({name})")
    if flexible:

        def compact(frame: bytes | memoryview, at: int, end: int) -> int:
            length, at = read_uvarint(frame, at, end, name)
            if length == 0:
                if not nullable:
                    raise _null(name)
                return at
            at += length - 1
            if at > end:
                raise _past_end(name)
            return at

        return _Shape(compact, 1, False)
    prefix = _I16 if kafka_type == "string" else SIZE

    def legacy(frame: bytes | memoryview, at: int, end: int) -> int:
        if at + prefix.size > end:
            raise _past_end(name)
        (length,) = prefix.unpack_from(frame, at)
        at += prefix.size
        if length < 0:
            if not nullable:
                raise _null(name)
            return at
        at += length
        if at > end:
            raise _past_end(name)
        return at

    return _Shape(legacy, prefix.size, False)


def _array(item: _Shape, flexible: bool, nullable: bool, name: str) -> _Shape:
    item_step, item_size, exact = item.step, item.size, item.exact

    def array(frame: bytes | memoryview, at: int, end: int) -> int:
        if flexible:
            count, at = read_uvarint(frame, at, end, name)
            count -= 1
        else:
            if at + 4 > end:
                raise _past_end(name)
            (count,) = SIZE.unpack_from(frame, at)
            at += 4
        if count < 0:
            if not nullable:
                raise _null(name)
            return at
        if count * max(item_size, 1) > end - at:  # storage for ``count`` items is allocated up front
            raise MalformedRequest(f"{name} claims {count} items; {end - at} bytes are left")
        if exact:
            return at + count * item_size
        for _ in range(count):
            at = item_step(frame, at, end)
        return at

    return _Shape(array, 1 if flexible else 4, False)


def _field(field: dataclasses.Field[Any], flexible: bool) -> _Shape:
    kind = classify_field(field)
    nullable = is_optional(field)
    name = field.name
    if isinstance(kind, EntityTupleField):
        return _array(_entity(kind.type_), flexible, nullable, name)
    if isinstance(kind, EntityField):
        entity = _entity(kind.type_)
        if not nullable:
            return entity
        step = entity.step

        def nullable_entity(frame: bytes | memoryview, at: int, end: int) -> int:
            if at >= end:
                raise _past_end(name)
            return at + 1 if frame[at] == 0xFF else step(frame, at + 1, end)

        return _Shape(nullable_entity, 1, False)
    if isinstance(kind, PrimitiveTupleField):
        item = _primitive(get_schema_field_type(field), flexible, False, name)
        return _array(item, flexible, nullable, name)
    return _primitive(get_schema_field_type(field), flexible, nullable, name)


@functools.cache
def _entity(cls: type) -> _Shape:
    """How to walk one kio entity (a request, or a struct inside one)."""
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list[_Step] = []
    tagged: dict[int, _Step] = {}
    minimum = 1 if flexible else 0
    run = 0  # bytes of consecutive fixed-size fields, skipped as one
    run_names: list[str] = []
    for field in dataclasses.fields(cls):
        shape = _field(field, flexible)
        tag = get_field_tag(field)
        if tag is not None:
            tagged[tag] = shape.step
            continue
        minimum += shape.size
        if shape.exact:
            run += shape.size
            run_names.append(field.name)
            continue
        if run:
            steps.append(_fixed(run, "/".join(run_names)).step)
            run, run_names = 0, []
        steps.append(shape.step)
    if not flexible and not steps:
        return _fixed(run, f"{cls.__name__} ({'/'.join(run_names)})")
    if run:
        steps.append(_fixed(run, "/".join(run_names)).step)

    def tags(frame: bytes | memoryview, at: int, end: int) -> int:
        count, at = read_uvarint(frame, at, end, "tagged fields")
        for _ in range(count):
            tag, at = read_uvarint(frame, at, end, "a tag")
            size, at = read_uvarint(frame, at, end, "a tag size")
            if at + size > end:
                raise _past_end(f"tagged field {tag}")
            known = tagged.get(tag)
            if known is not None:
                known(frame, at, at + size)
            at += size
        return at

    def entity(frame: bytes | memoryview, at: int, end: int) -> int:
        for step in steps:
            at = step(frame, at, end)
        if flexible:
            if at < end and frame[at] == 0:  # no tagged fields: the usual case
                return at + 1
            return tags(frame, at, end)
        return at

    return _Shape(entity, minimum, False)


class _WalkProgram:
    """A kio request class compiled for the C walk (``ls_request_walk``, native/walk.c).

    The same rules as the Python walk above, which stays for the error
    message when the C walk refuses a body: every op mirrors one _Shape, and
    arrays take their items' minimum size and exactness from that _Shape.
    """

    def __init__(self) -> None:
        self.code: list[int] = []
        self._entities: dict[type, int] = {}

    def _emit(self, ops: list[int]) -> int:
        start = len(self.code)
        self.code += ops
        return start

    def entity(self, cls: type) -> int:
        """The start of ``cls``'s ops (compiled once)."""
        start = self._entities.get(cls)
        if start is not None:
            return start
        flexible = bool(getattr(cls, "__flexible__", False))
        ops: list[int] = []
        tagged: list[int] = []
        for field in dataclasses.fields(cls):
            field_ops = self._field(field, flexible)
            tag = get_field_tag(field)
            if tag is not None:
                tagged += [tag, self._emit([*field_ops, lib.LS_WALK_END])]
            else:
                ops += field_ops
        if flexible:
            ops += [lib.LS_WALK_TAGS, self._emit([len(tagged) // 2, *tagged])]
        start = self._entities[cls] = self._emit([*ops, lib.LS_WALK_END])
        return start

    def _field(self, field: dataclasses.Field[Any], flexible: bool) -> list[int]:
        kind = classify_field(field)
        nullable = is_optional(field)
        flags = (lib.LS_WALK_FLEXIBLE if flexible else 0) | (lib.LS_WALK_NULLABLE if nullable else 0)
        if isinstance(kind, EntityTupleField):
            item = _entity(kind.type_)
            return [lib.LS_WALK_ARRAY, flags, item.size, int(item.exact), self.entity(kind.type_)]
        if isinstance(kind, EntityField):
            op = lib.LS_WALK_NULLABLE_STRUCT if nullable else lib.LS_WALK_STRUCT
            return [op, self.entity(kind.type_)]
        kafka_type = get_schema_field_type(field)
        if isinstance(kind, PrimitiveTupleField):
            shape = _primitive(kafka_type, flexible, False, field.name)
            item_pc = self._emit([*self._primitive(kafka_type, flexible, False), lib.LS_WALK_END])
            return [lib.LS_WALK_ARRAY, flags, shape.size, int(shape.exact), item_pc]
        return self._primitive(kafka_type, flexible, nullable)

    @staticmethod
    def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> list[int]:
        size = _FIXED_SIZES.get(kafka_type)
        if size is not None:
            return [lib.LS_WALK_FIXED, size]
        if kafka_type not in ("string", "bytes", "records"):
            raise LookupError(f"no length check for kafka_type {kafka_type!r}")
        flags = (lib.LS_WALK_FLEXIBLE if flexible else 0) | (lib.LS_WALK_NULLABLE if nullable else 0)
        return [lib.LS_WALK_STRING, flags | (0 if kafka_type == "string" else lib.LS_WALK_WIDE)]


@functools.cache
def walk_program(request_class: type) -> tuple[Any, int, int]:
    """(the int32 program as cffi owns it, its length, the request's start) for ls_request_walk."""
    program = _WalkProgram()
    start = program.entity(request_class)
    return ffi.new("int32_t[]", program.code), len(program.code), start


def checked_reader(request_class: type) -> Callable[[bytes, int], Any]:
    """kio's reader for ``request_class``, after the lengths in the body are checked.

    The check runs in C; when it refuses a body, the Python walk runs to say
    which field is wrong (the two apply the same rules: tested against each
    other in tests/protocol/test_request_walk.py).
    """
    check = _entity(request_class).step
    read: Callable[[bytes | memoryview, int], Any] = entity_reader(request_class)
    program, length, start = walk_program(request_class)
    walk = lib.ls_request_walk
    from_buffer = ffi.from_buffer

    def checked_read(frame: bytes | memoryview, at: int) -> Any:
        if walk(program, length, start, from_buffer(frame), len(frame), at) < 0:
            check(frame, at, len(frame))  # raises, naming the field
            raise MalformedRequest("the request body breaks its schema")
        return read(frame, at)

    return checked_read

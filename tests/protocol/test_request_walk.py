"""The C request walk (native/walk.c) against the Python walk: the same bodies accepted, the same end.

Bodies: every request this broker serves, at every version it serves, built
from kio's classes with random values, then mutated (flipped, inserted,
deleted and overwritten bytes, huge lengths, truncations).
"""

from __future__ import annotations

import dataclasses
import datetime
import io
import random
import uuid
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.serial import entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

from logstore._native import ffi, lib
from logstore.broker.apis import registry
from logstore.protocol import MalformedRequest, codec, walk_program
from logstore.protocol.walk import _entity

pytestmark = pytest.mark.unit

_PRIMITIVES: dict[str, Any] = {
    "int8": lambda r: r.randint(-128, 127),
    "int16": lambda r: r.randint(-1, 300),
    "int32": lambda r: r.randint(-1, 70_000),
    "int64": lambda r: r.randint(-1, 2**40),
    "uint8": lambda r: r.randint(0, 255),
    "uint16": lambda r: r.randint(0, 65_535),
    "uint32": lambda r: r.randint(0, 70_000),
    "uint64": lambda r: r.randint(0, 2**40),
    "float64": lambda r: r.random(),
    "bool": lambda r: r.random() < 0.5,
    "string": lambda r: "".join(r.choice("abcé-_.") for _ in range(r.randint(0, 12))),
    "bytes": lambda r: r.randbytes(r.randint(0, 20)),
    "records": lambda r: r.randbytes(r.randint(0, 40)),
    "uuid": lambda r: uuid.UUID(int=r.getrandbits(128)),
    "error_code": lambda r: r.choice([ErrorCode.none, ErrorCode.unknown_server_error]),
    "timedelta_i32": lambda r: datetime.timedelta(milliseconds=r.randint(0, 10_000)),
    "timedelta_i64": lambda r: datetime.timedelta(milliseconds=r.randint(0, 10_000)),
    "datetime_i64": lambda r: datetime.datetime.fromtimestamp(r.randint(0, 2**31), datetime.UTC),
}


def build(cls: type, rng: random.Random, depth: int = 0) -> Any:
    """A random instance of a kio entity class."""
    values = {}
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        if is_optional(field) and rng.random() < 0.2:
            values[field.name] = None
        elif isinstance(kind, EntityTupleField):
            count = rng.randint(0, 3 if depth < 2 else 1)
            values[field.name] = tuple(build(kind.type_, rng, depth + 1) for _ in range(count))
        elif isinstance(kind, EntityField):
            values[field.name] = build(kind.type_, rng, depth + 1)
        elif isinstance(kind, PrimitiveTupleField):
            make = _PRIMITIVES[get_schema_field_type(field)]
            values[field.name] = tuple(make(rng) for _ in range(rng.randint(0, 3)))
        else:
            values[field.name] = _PRIMITIVES[get_schema_field_type(field)](rng)
    return cls(**values)


def encode(entity: Any) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def mutate(body: bytes, rng: random.Random) -> bytes:
    data = bytearray(body)
    for _ in range(rng.randint(1, 3)):
        kind = rng.randrange(6)
        at = rng.randrange(len(data) + 1)
        if kind == 0 and data:
            data[min(at, len(data) - 1)] ^= 1 << rng.randrange(8)
        elif kind == 1:
            data[at:at] = rng.randbytes(rng.randint(1, 4))
        elif kind == 2:
            del data[at : at + rng.randint(1, 4)]
        elif kind == 3:
            data[at : at + 4] = rng.choice(
                [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff\x0f", b"\x00\x00", b"\xff\xff"]
            )
        elif kind == 4:
            del data[at:]
        else:
            data[at : at + 1] = bytes([rng.choice([0, 1, 0x80, 0xFF])])
    return bytes(data)


def python_walk(cls: type, frame: bytes, at: int) -> int:
    try:
        return _entity(cls).step(frame, at, len(frame))
    except MalformedRequest:
        return -1


def c_walk(cls: type, frame: bytes, at: int) -> int:
    program, length, start = walk_program(cls)
    after = int(lib.ls_request_walk(program, length, start, ffi.from_buffer(frame), len(frame), at))
    return after if after >= 0 else -1


SERVED = sorted(
    (api.key, version)
    for api in registry().values()
    for version in range(api.min_version, api.max_version + 1)
    if api.decode is None  # Produce has its own decoder
)


@pytest.mark.parametrize(("key", "version"), SERVED)
def test_c_walk_accepts_what_the_python_walk_accepts(key: int, version: int) -> None:
    cls = codec(key, version).request_class
    rng = random.Random(key * 100 + version)
    accepted = refused = 0
    for _ in range(40):
        body = b"hd" + encode(build(cls, rng))
        assert c_walk(cls, body, 2) == python_walk(cls, body, 2) == len(body)
        for _ in range(25):
            bad = mutate(body, rng)
            ours, theirs = c_walk(cls, bad, 2), python_walk(cls, bad, 2)
            assert ours == theirs, (bad.hex(), ours, theirs)
            accepted += ours >= 0
            refused += ours < 0
    assert accepted and refused  # both outcomes were exercised


def test_refused_bodies_still_name_the_field() -> None:
    read = codec(3, 1).read  # Metadata v1: topics, an array of strings
    with pytest.raises(MalformedRequest, match="topics claims 2147483647 items"):
        read(b"\x7f\xff\xff\xff", 0)

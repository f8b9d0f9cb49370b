"""Kafka wire framing: request headers, kio codecs per (API, version), response frames.

A request frame is ``int32 size`` + header + body. Header v1 is ``api_key
int16, api_version int16, correlation_id int32, client_id nullable int16
string``; header v2 (flexible versions) adds tagged fields. Response header
v0 is the correlation id; v1 adds tagged fields; ApiVersions always answers
with v0 (KIP-511), so a client that does not know our versions can read it.

Bodies are decoded and encoded by kio. A record set in a response may be a
:class:`FileRegion`: the encoder leaves a hole for it, and the connection
fills the hole with ``sendfile`` straight from the segment file.
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import os
import struct
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, NamedTuple

from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)
from kio.static.constants import EntityType

from logstore._native import ffi, lib

NO_THROTTLE = datetime.timedelta(0)
AUTHORIZED_OPERATIONS_UNKNOWN = -(2**31)
"""Kafka's "not asked for" value of every authorized-operations field."""
HEADER = struct.Struct(">hhi")
SIZE = struct.Struct(">i")
_I16 = struct.Struct(">h")
_I64 = struct.Struct(">q")
ITEMS_MAX = 100_000  # array items in one request; each needs several bytes anyway
API_VERSIONS_KEY = 18


class ProtocolError(Exception):
    """A request this broker cannot parse: the connection is closed after a log line."""


class RequestHeader(NamedTuple):
    """A request's header (a tuple: built for every request, so it must be cheap)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    body_offset: int


_HEADER_AND_LENGTH = struct.Struct(">hhih")  # api key, version, correlation id, client_id length
_CLIENT_IDS: dict[bytes, str] = {}
_CLIENT_IDS_MAX = 4096
_CLIENT_ID_CACHED_MAX = 255  # bytes: the cache holds at most ~2 MiB


def parse_header(frame: bytes | memoryview, flexible: bool) -> RequestHeader:
    """The request header; ``flexible`` selects header v2 (tagged fields)."""
    if len(frame) < _HEADER_AND_LENGTH.size:
        raise ProtocolError(f"a {len(frame)}-byte frame is shorter than a request header")
    api_key, api_version, correlation_id, length = _HEADER_AND_LENGTH.unpack_from(frame, 0)
    at = _HEADER_AND_LENGTH.size
    client_id = None
    if length >= 0:
        if at + length > len(frame):
            raise ProtocolError("client_id runs past the end of the frame")
        raw = bytes(frame[at : at + length])
        client_id = _CLIENT_IDS.get(raw)
        if client_id is None:
            client_id = raw.decode("utf-8", "replace")
            # A client sends the same id every time; long or endless new ids are not kept.
            if length <= _CLIENT_ID_CACHED_MAX and len(_CLIENT_IDS) < _CLIENT_IDS_MAX:
                _CLIENT_IDS[raw] = client_id
        at += length
    elif length != -1:
        raise ProtocolError(f"client_id has negative length {length}")
    if flexible:
        if at < len(frame) and frame[at] == 0:  # no tagged fields: nearly always
            return RequestHeader(api_key, api_version, correlation_id, client_id, at + 1)
        count, at = read_uvarint(frame, at, len(frame), "request header")
        for _ in range(count):
            _, at = read_uvarint(frame, at, len(frame), "request header")
            size, at = read_uvarint(frame, at, len(frame), "request header")
            at += size
        if at > len(frame):
            raise ProtocolError("tagged header fields run past the end of the frame")
    return RequestHeader(api_key, api_version, correlation_id, client_id, at)


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


class MalformedRequest(ProtocolError, ValueError):
    """A request body whose lengths or nulls break its schema, found before kio reads it."""


def _past_end(name: str) -> MalformedRequest:
    return MalformedRequest(f"{name} runs past the end of the frame")


def read_uvarint(frame: bytes | memoryview, at: int, end: int, name: str) -> tuple[int, int]:
    value = shift = 0
    for _ in range(5):
        if at >= end:
            raise _past_end(name)
        byte = frame[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise MalformedRequest(f"{name}: varint longer than 5 bytes")


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
    other in tests/unit/test_request_walk.py).
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


@dataclass(frozen=True)
class Codec:
    """kio's classes for one (API, version)."""

    request_class: type
    response_module: ModuleType
    read: Callable[[bytes, int], Any]
    write: Callable[[Any, Any], None]
    flexible: bool


@functools.cache
def codec(api_key: int, version: int) -> Codec:
    request_module = load_payload_module(api_key, version, EntityType.request)
    response_module = load_payload_module(api_key, version, EntityType.response)
    request_class = _payload_class(request_module, "Request")
    response_class = _payload_class(response_module, "Response")
    return Codec(
        request_class,
        response_module,
        checked_reader(request_class),
        entity_writer(response_class),
        bool(getattr(request_class, "__flexible__", False)),
    )


def _payload_class(module: ModuleType, suffix: str) -> type:
    for name, value in vars(module).items():
        if name.endswith(suffix) and getattr(value, "__type__", None) in (
            EntityType.request,
            EntityType.response,
        ):
            return value
    raise LookupError(f"no {suffix} class in {module.__name__}")


@functools.cache
def _field_names(cls: type) -> frozenset[str]:
    return frozenset(f.name for f in dataclasses.fields(cls))


def build(cls: type, **values: Any) -> Any:
    """An instance of a kio class from the values its version has (others dropped).

    Handlers are written once for every version: a field a version lacks is
    simply not passed on.
    """
    names = _field_names(cls)
    return cls(**{k: v for k, v in values.items() if k in names})


class FileRegion:
    """Bytes of a segment file, sent with ``sendfile``; owns a dup of the file descriptor.

    The dup keeps the bytes readable if the segment is closed or deleted
    before the response is sent (an unlinked file stays readable).
    """

    __slots__ = ("fd", "position", "size")

    def __init__(self, fd: int, position: int, size: int) -> None:
        self.fd = os.dup(fd)
        self.position = position
        self.size = size

    def __len__(self) -> int:
        return self.size

    def fileno(self) -> int:
        return self.fd

    def seek(self, offset: int, whence: int = 0) -> int:
        # asyncio.sendfile updates the file position when done; ours is unused.
        return offset

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        self.close()


class ResponseBuffer:
    """A kio write target that keeps FileRegions as separate chunks."""

    __slots__ = ("chunks", "current", "size")

    def __init__(self, header: bytes) -> None:
        self.chunks: list[bytes | bytearray | FileRegion] = []
        self.current = bytearray(4)  # the frame size, filled in by frame()
        self.current += header
        self.size = len(header)

    def write(self, data: Any) -> int:
        if isinstance(data, FileRegion):
            self.chunks.append(self.current)
            self.chunks.append(data)
            self.current = bytearray()
        else:
            self.current += data
        self.size += len(data)
        return len(data)

    def frame(self) -> list[bytes | bytearray | FileRegion]:
        self.chunks.append(self.current)
        first = self.chunks[0]
        assert isinstance(first, bytearray)
        SIZE.pack_into(first, 0, self.size)
        return self.chunks


class WireCursor:
    """Reads a request body field by field, bounds-checked; errors name ``context``.

    For the hot APIs' direct decoders (Produce): no objects
    but the request's own, views instead of copies.
    """

    __slots__ = ("at", "context", "end", "flexible", "frame")

    def __init__(self, frame: bytes | memoryview, at: int, flexible: bool, context: str) -> None:
        self.frame = frame
        self.at = at
        self.end = len(frame)
        self.flexible = flexible
        self.context = context

    def need(self, n: int, what: str) -> None:
        if n < 0 or self.at + n > self.end:
            raise ProtocolError(f"{self.context}: {what} runs past the end of the frame")

    def int16(self) -> int:
        self.need(2, "an int16")
        (value,) = _I16.unpack_from(self.frame, self.at)
        self.at += 2
        return int(value)

    def int64(self) -> int:
        self.need(8, "an int64")
        (value,) = _I64.unpack_from(self.frame, self.at)
        self.at += 8
        return int(value)

    def int32(self) -> int:
        self.need(4, "an int32")
        (value,) = SIZE.unpack_from(self.frame, self.at)
        self.at += 4
        return int(value)

    def uvarint(self) -> int:
        value, self.at = read_uvarint(self.frame, self.at, self.end, self.context)
        return value

    def length(self, legacy: struct.Struct) -> int:
        """A string/bytes/array length; -1 for null."""
        if self.flexible:
            return self.uvarint() - 1
        self.need(legacy.size, "a length")
        (value,) = legacy.unpack_from(self.frame, self.at)
        self.at += legacy.size
        return int(value)

    def take(self, n: int, what: str) -> memoryview:
        self.need(n, what)
        view = memoryview(self.frame)[self.at : self.at + n]
        self.at += n
        return view

    def string(self, nullable: bool, what: str) -> str | None:
        n = self.length(_I16)
        if n < 0:
            if nullable and n == -1:
                return None
            raise ProtocolError(f"{self.context}: {what} is null or has a negative length")
        return bytes(self.take(n, what)).decode("utf-8", "replace")

    def array_count(self, what: str) -> int:
        n = self.length(SIZE)
        if not 0 <= n <= ITEMS_MAX or n > self.end - self.at:
            raise ProtocolError(f"{self.context}: {what} has {n} items")
        return n

    def skip_tags(self) -> None:
        if not self.flexible:
            return
        for _ in range(self.uvarint()):
            self.uvarint()
            size = self.uvarint()
            self.need(size, "a tagged field")
            self.at += size


EMPTY_TAGS = b"\x00"
"""An empty tagged-field section (flexible versions)."""


def wire_uvarint(value: int) -> bytes:
    """An unsigned varint.

    >>> wire_uvarint(1), wire_uvarint(300)
    (b'\\x01', b'\\xac\\x02')
    """
    if 0 <= value < 0x80:
        return _ONE_BYTE[value]
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ONE_BYTE = [bytes([n]) for n in range(0x80)]  # the usual varints: counts and short lengths


def wire_string(value: str | None, flexible: bool, nullable: bool) -> bytes:
    """A (compact when ``flexible``) string; None only where the field is nullable.

    >>> wire_string("ab", False, False), wire_string("ab", True, False), wire_string(None, True, True)
    (b'\\x00\\x02ab', b'\\x03ab', b'\\x00')
    """
    if value is None:
        assert nullable
        return b"\x00" if flexible else b"\xff\xff"
    raw = value.encode()
    return (wire_uvarint(len(raw) + 1) if flexible else _I16.pack(len(raw))) + raw


def wire_count(n: int, flexible: bool) -> bytes:
    """An array's length: a compact (n + 1) varint when ``flexible``, else an int32."""
    return wire_uvarint(n + 1) if flexible else SIZE.pack(n)


class RawBody(bytes):
    """A response body a handler encoded itself (the hot paths); sent as it is."""


class DeferredBody:
    """A response body that can only be encoded later (when a batched append has settled).

    The connection queues the frame in its place, in request order, and
    calls ``encode`` when it writes the queued responses.
    """

    __slots__ = ("encode",)

    def __init__(self, encode: Callable[[], bytes]) -> None:
        self.encode = encode


class DeferredFrame:
    """A response frame whose body is a :class:`DeferredBody`."""

    __slots__ = ("body", "header")

    def __init__(self, header: bytes, body: DeferredBody) -> None:
        self.header = header
        self.body = body

    def resolve(self) -> bytes:
        body = self.body.encode()
        return SIZE.pack(len(self.header) + len(body)) + self.header + body


def encode_response(codec_: Codec, correlation_id: int, response: Any, header_v0: bool = False) -> list[Any]:
    """A whole response frame as chunks (bytes, FileRegions, or a DeferredFrame)."""
    header = SIZE.pack(correlation_id)
    if codec_.flexible and not header_v0:
        header += b"\x00"  # no tagged fields
    if isinstance(response, RawBody):
        return [SIZE.pack(len(header) + len(response)) + header + response]
    if isinstance(response, DeferredBody):
        return [DeferredFrame(header, response)]
    buffer = ResponseBuffer(header)
    codec_.write(buffer, response)
    return buffer.frame()

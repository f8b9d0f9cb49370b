"""kio's classes and codecs per (API, version), for both ends of a connection."""

from __future__ import annotations

import dataclasses
import datetime
import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, TypeVar

from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from logstore.protocol.primitives import API_VERSIONS_KEY
from logstore.protocol.walk import checked_reader


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


_T = TypeVar("_T")


def group_by_topic(items: Iterable[tuple[str, _T]]) -> dict[str, list[_T]]:
    """``(topic, item)`` pairs as ``{topic: [item, ...]}``, topics in first-seen order and items
    in theirs: the topics-then-partitions nesting of every per-partition request and response. O(n)."""
    grouped: dict[str, list[_T]] = {}
    for topic, item in items:
        grouped.setdefault(topic, []).append(item)
    return grouped


@dataclass(frozen=True)
class ClientCodec:
    """kio's classes for one (API, version) as a client uses them: requests out, responses in.

    ``request_flexible`` selects request header v2; ``response_flexible`` says
    whether the response header carries a tag section (never for ApiVersions,
    whose response header is always v0: KIP-511).
    """

    request_class: type
    response_class: type
    write: Callable[[Any, Any], None]
    read: Callable[[bytes | memoryview, int], tuple[Any, int]]
    request_flexible: bool
    response_flexible: bool


@functools.cache
def client_codec(api_key: int, version: int) -> ClientCodec:
    request_class = _payload_class(load_payload_module(api_key, version, EntityType.request), "Request")
    response_class = _payload_class(load_payload_module(api_key, version, EntityType.response), "Response")
    flexible = bool(getattr(request_class, "__flexible__", False))
    return ClientCodec(
        request_class,
        response_class,
        entity_writer(request_class),
        entity_reader(response_class),
        flexible,
        flexible and api_key != API_VERSIONS_KEY,
    )


_MS_KINDS = frozenset({"timedelta_i32", "timedelta_i64"})


@functools.cache
def _plan(cls: type) -> tuple[tuple[str, str, type | None, bool], ...]:
    """(name, kind, entity class or None, has a default) per field of ``cls``."""
    from kio.serial._introspect import EntityField, EntityTupleField, classify_field, get_schema_field_type

    plan: list[tuple[str, str, type | None, bool]] = []
    for field in dataclasses.fields(cls):
        kind = classify_field(field)
        has_default = (
            field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
        )
        if isinstance(kind, EntityTupleField):
            plan.append((field.name, "entities", kind.type_, has_default))
        elif isinstance(kind, EntityField):
            plan.append((field.name, "entity", kind.type_, has_default))
        else:
            plan.append((field.name, get_schema_field_type(field), None, has_default))
    return tuple(plan)


def from_dict(cls: type, values: dict[str, Any]) -> Any:
    """A kio entity of ``cls`` from plain values, nested: lists of dicts become tuples of entities.

    One request is written once for every version: keys a version lacks are
    dropped (as :func:`build` does), ``*_ms``-style timedelta fields take
    milliseconds, and a field the version has but ``values`` lacks is an error
    unless kio gives it a default.
    """
    out: dict[str, Any] = {}
    for name, kind, entity, has_default in _plan(cls):
        if name not in values:
            if has_default:
                continue
            raise KeyError(f"{cls.__module__}.{cls.__name__} needs a value for {name!r}")
        value = values[name]
        if value is None:
            out[name] = None
        elif kind == "entities":
            assert entity is not None
            out[name] = tuple(from_dict(entity, item) for item in value)
        elif kind == "entity":
            assert entity is not None
            out[name] = from_dict(entity, value)
        elif kind in _MS_KINDS and not isinstance(value, datetime.timedelta):
            out[name] = datetime.timedelta(milliseconds=value)
        elif kind == "error_code" and not isinstance(value, ErrorCode):
            out[name] = ErrorCode(value)
        elif kind == "datetime_i64" and not isinstance(value, datetime.datetime):
            out[name] = datetime.datetime.fromtimestamp(value / 1000, datetime.UTC)
        elif isinstance(value, list):
            out[name] = tuple(value)
        else:
            out[name] = value
    return cls(**out)

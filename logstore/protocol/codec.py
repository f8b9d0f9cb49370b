"""kio's classes and codecs per (API, version), for both ends of a connection."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from kio.index import load_payload_module
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

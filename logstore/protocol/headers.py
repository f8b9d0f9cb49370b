"""Request headers (v1 and flexible v2), parsed on the broker's hot path and written by the client."""

from __future__ import annotations

import struct
from typing import NamedTuple

from logstore.protocol.primitives import ProtocolError, read_uvarint


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


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None, flexible: bool
) -> bytes:
    """A request header as the client writes it: v2 (an empty tag section) when ``flexible``.

    >>> encode_request_header(18, 3, 7, "c", True)
    b'\\x00\\x12\\x00\\x03\\x00\\x00\\x00\\x07\\x00\\x01c\\x00'
    """
    if client_id is None:
        head = _HEADER_AND_LENGTH.pack(api_key, api_version, correlation_id, -1)
    else:
        raw = client_id.encode()
        head = _HEADER_AND_LENGTH.pack(api_key, api_version, correlation_id, len(raw)) + raw
    return head + b"\x00" if flexible else head

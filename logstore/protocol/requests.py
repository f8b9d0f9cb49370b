"""Requests as a client sends them, and their responses as a client reads them.

One encoder and one decoder for every side that speaks to a broker: logstore's
client (client/connection.py), the brokers among themselves
(broker/network/inter_broker.py) and the in-process transport (embedded.py). Produce
is written directly (record sets not copied: protocol/produce.py); the rest
by kio. A response that cannot be decoded raises :class:`ResponseError`; each
caller turns it into its own error (the client's ``_BAD_MSG``, the broker's
channel failure).
"""

from __future__ import annotations

import io
from typing import Any

from logstore.protocol import (
    SIZE,
    ProtocolError,
    client_codec,
    encode_request_header,
    from_dict,
    read_uvarint,
)
from logstore.protocol.produce import MAX_VERSION as PRODUCE_MAX_VERSION
from logstore.protocol.produce import MIN_VERSION as PRODUCE_MIN_VERSION
from logstore.protocol.produce import Chunk, encode_produce_request

PRODUCE = 0


class ResponseError(ProtocolError):
    """A response frame that does not decode as the API and version it answers."""


def encode_body(api_key: int, version: int, fields: dict[str, Any]) -> tuple[list[Chunk], int, bool]:
    """A request body for ``fields`` at ``version`` as chunks, its size, and whether its header is
    flexible (v2). Produce is written directly (record sets not copied); the rest by kio."""
    codec = client_codec(api_key, version)
    if api_key == PRODUCE and PRODUCE_MIN_VERSION <= version <= PRODUCE_MAX_VERSION:
        chunks = encode_produce_request(version, fields)
        return chunks, sum(len(chunk) for chunk in chunks), codec.request_flexible
    buffer = io.BytesIO()
    codec.write(buffer, from_dict(codec.request_class, fields))
    body = buffer.getbuffer()
    return [body], len(body), codec.request_flexible


def encode_request(
    api_key: int, version: int, correlation: int, client_id: str | None, fields: dict[str, Any]
) -> bytes:
    """A whole request frame (size, header, body) for ``fields`` at ``version``."""
    chunks, size, flexible = encode_body(api_key, version, fields)
    header = encode_request_header(api_key, version, correlation, client_id, flexible)
    return b"".join((SIZE.pack(len(header) + size), header, *chunks))


def decode_response(api_key: int, version: int, frame: bytes | memoryview, where: str) -> Any:
    """The kio response in ``frame`` (correlation id first, no size); :class:`ResponseError` if not."""
    codec = client_codec(api_key, version)
    try:
        at = skip_tags(frame, 4) if codec.response_flexible else 4
        response, _ = codec.read(frame, at)
    except Exception as e:
        raise ResponseError(f"{where}: cannot decode API {api_key} v{version}: {e}") from None
    return response


def skip_tags(frame: bytes | memoryview, at: int) -> int:
    """The offset past a tagged-field section starting at ``at``."""
    count, at = read_uvarint(frame, at, len(frame), "response header")
    for _ in range(count):
        _, at = read_uvarint(frame, at, len(frame), "response header")
        size, at = read_uvarint(frame, at, len(frame), "response header")
        at += size
    return at

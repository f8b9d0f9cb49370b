"""The Kafka wire layer shared by the broker and the client.

A request frame is ``int32 size`` + header + body. Header v1 is ``api_key
int16, api_version int16, correlation_id int32, client_id nullable int16
string``; header v2 (flexible versions) adds tagged fields. Response header
v0 is the correlation id; v1 adds tagged fields; ApiVersions always answers
with v0 (KIP-511), so a client that does not know our versions can read it.

Bodies are decoded and encoded by kio. A record set in a response may be a
:class:`FileRegion`: the encoder leaves a hole for it, and the connection
fills the hole with ``sendfile`` straight from the segment file.

Modules, one concern each (neither the broker nor the client is imported here):

- :mod:`~logstore.protocol.primitives`: constants, varints, strings, :class:`WireCursor`
- :mod:`~logstore.protocol.headers`: request headers
- :mod:`~logstore.protocol.walk`: the bounds walk run before kio reads a request
- :mod:`~logstore.protocol.codec`: kio's classes per (API, version), both directions
- :mod:`~logstore.protocol.frames`: response frames (file regions, deferred bodies)
- :mod:`~logstore.protocol.framing`: a byte stream split into frames
- :mod:`~logstore.protocol.errors`: Kafka's error codes as one table
"""

from logstore.protocol.codec import ClientCodec, Codec, build, client_codec, codec, from_dict, group_by_topic
from logstore.protocol.errors import ERRORS, ErrorInfo, error_for, error_info
from logstore.protocol.frames import (
    DeferredBody,
    DeferredFrame,
    FileRegion,
    RawBody,
    ResponseBuffer,
    encode_response,
)
from logstore.protocol.framing import Frame, FrameReader, FrameSizeError
from logstore.protocol.headers import RequestHeader, encode_request_header, parse_header
from logstore.protocol.primitives import (
    API_VERSIONS_KEY,
    AUTHORIZED_OPERATIONS_UNKNOWN,
    EMPTY_TAGS,
    HEADER,
    ITEMS_MAX,
    NO_THROTTLE,
    SIZE,
    MalformedRequest,
    ProtocolError,
    WireCursor,
    read_uvarint,
    wire_count,
    wire_string,
    wire_uvarint,
)
from logstore.protocol.walk import checked_reader, walk_program

__all__ = [
    "API_VERSIONS_KEY",
    "AUTHORIZED_OPERATIONS_UNKNOWN",
    "EMPTY_TAGS",
    "ERRORS",
    "HEADER",
    "ITEMS_MAX",
    "NO_THROTTLE",
    "SIZE",
    "ClientCodec",
    "Codec",
    "DeferredBody",
    "DeferredFrame",
    "ErrorInfo",
    "FileRegion",
    "Frame",
    "FrameReader",
    "FrameSizeError",
    "MalformedRequest",
    "ProtocolError",
    "RawBody",
    "RequestHeader",
    "ResponseBuffer",
    "WireCursor",
    "build",
    "checked_reader",
    "client_codec",
    "codec",
    "encode_request_header",
    "encode_response",
    "error_for",
    "error_info",
    "from_dict",
    "group_by_topic",
    "parse_header",
    "read_uvarint",
    "walk_program",
    "wire_count",
    "wire_string",
    "wire_uvarint",
]

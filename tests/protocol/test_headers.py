"""Request headers (protocol/headers.py): v1 and v2 (flexible) headers parsed, bad ones refused."""

from __future__ import annotations

import struct

import pytest

from logstore.protocol import ProtocolError, parse_header

pytestmark = pytest.mark.unit


def test_parse_header_v1_and_v2() -> None:
    frame = struct.pack(">hhih", 3, 1, 77, 3) + b"abc" + b"body"
    header = parse_header(frame, flexible=False)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (3, 1, 77, "abc")
    assert frame[header.body_offset :] == b"body"
    flexible = struct.pack(">hhih", 3, 9, 5, -1) + b"\x01\x00\x02zz" + b"B"
    header = parse_header(flexible, flexible=True)
    assert header.client_id is None
    assert flexible[header.body_offset :] == b"B"


@pytest.mark.parametrize(
    "frame",
    [
        b"\x00\x03\x00\x01",
        struct.pack(">hhih", 3, 1, 1, 50) + b"short",
        struct.pack(">hhih", 3, 1, 1, -7),
        struct.pack(">hhih", 3, 9, 1, -1) + b"\x01\x00\x7f",
        struct.pack(">hhih", 3, 9, 1, -1) + b"\xff\xff\xff\xff\xff\xff",
    ],
)
def test_parse_header_rejects_bad_frames(frame: bytes) -> None:
    with pytest.raises(ProtocolError):
        parse_header(frame, flexible=True)

"""Produce requests written directly (the client's hot request), byte for byte what kio writes.

A Produce request (v3-v10) is ``transactional_id`` (nullable string),
``acks`` int16, ``timeout_ms`` int32, then its topics, each a name and its
partitions, each an ``index`` int32 and a ``records`` nullable bytes; v9+ is
flexible (compact lengths, an empty tag section after each struct). The
record sets are most of the bytes: they are not copied here but handed back
as chunks between the small encoded parts, for ``sendmsg`` (or one join).
Tested against kio for every version (tests/protocol/test_produce_encode.py).
"""

from __future__ import annotations

import datetime
import struct
from collections.abc import Mapping
from typing import Any

from logstore.protocol.primitives import EMPTY_TAGS, SIZE, wire_count, wire_string, wire_uvarint

_ACKS_TIMEOUT = struct.Struct(">hi")
_INDEX = struct.Struct(">i")
MIN_VERSION = 3
MAX_VERSION = 10
FLEXIBLE_FROM = 9

Chunk = bytes | bytearray | memoryview


def encode_produce_request(version: int, fields: Mapping[str, Any]) -> list[Chunk]:
    """The body of a Produce request as chunks: small encoded parts and the record sets as given.

    ``fields``: ``transactional_id``, ``acks``, ``timeout`` (ms or a timedelta), and
    ``topic_data = [{"name", "partition_data": [{"index", "records"}]}]`` (kio's names).
    O(topics + partitions); the record sets are not copied.
    """
    if not MIN_VERSION <= version <= MAX_VERSION:
        raise ValueError(f"Produce v{version} is not written directly (v{MIN_VERSION}-v{MAX_VERSION} are)")
    flexible = version >= FLEXIBLE_FROM
    timeout = fields["timeout"]
    if isinstance(timeout, datetime.timedelta):
        timeout = int(timeout.total_seconds() * 1000)
    chunks: list[Chunk] = []
    head = bytearray(wire_string(fields["transactional_id"], flexible, True))
    head += _ACKS_TIMEOUT.pack(fields["acks"], timeout)
    topics = fields["topic_data"]
    head += wire_count(len(topics), flexible)
    for topic in topics:
        head += wire_string(topic["name"], flexible, False)
        partitions = topic["partition_data"]
        head += wire_count(len(partitions), flexible)
        for partition in partitions:
            head += _INDEX.pack(partition["index"])
            records = partition["records"]
            if records is None:
                head += b"\x00" if flexible else b"\xff\xff\xff\xff"
            else:
                head += wire_uvarint(len(records) + 1) if flexible else SIZE.pack(len(records))
                chunks.append(head)
                chunks.append(records)
                head = bytearray()
            if flexible:
                head += EMPTY_TAGS
        if flexible:
            head += EMPTY_TAGS
    if flexible:
        head += EMPTY_TAGS
    chunks.append(head)
    return chunks

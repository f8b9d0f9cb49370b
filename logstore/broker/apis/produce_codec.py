"""Produce requests decoded without copying their records, responses encoded directly.

The broker's hot path. kio's generic writer spends ~60 µs on a one-partition
ProduceResponse; :func:`encode_body` writes the same bytes (checked against
kio's writer byte for byte) in a few.

kio would hand each partition's records over as a fresh ``bytes`` copy; on a
1 MiB request that is a copy and 256 first-touch page faults, then another
copy to make the batch writable for offset assignment. This decoder walks the
same fields (Produce v3-v10, flexible from v9) and returns kio's own request
classes whose ``records`` are memoryviews into the request frame; when the
frame is writable (a large frame, see framing.py) the log assigns offsets in
place. Every length is checked against the frame; a bad one raises
ProtocolError. ``tests/broker/apis/test_produce_codec.py`` checks both against kio.
"""

from __future__ import annotations

import datetime
import functools
import struct
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from logstore.protocol import EMPTY_TAGS, SIZE, ProtocolError, WireCursor, wire_count, wire_string

_FLEXIBLE_FROM = 9


@functools.cache
def _module(version: int) -> Any:
    return load_payload_module(0, version, EntityType.request)


def decode(frame: bytes | memoryview, at: int, version: int) -> tuple[Any, int]:
    """The ProduceRequest at ``frame[at:]`` as kio's classes, records as views of the frame."""
    module = _module(version)
    cursor = WireCursor(frame, at, version >= _FLEXIBLE_FROM, "produce request")
    transactional_id = cursor.string(True, "transactional_id")
    acks = cursor.int16()
    timeout = cursor.int32()
    topics = []
    for _ in range(cursor.array_count("topics")):
        name = cursor.string(False, "topic name")
        partitions = []
        for _ in range(cursor.array_count("partitions")):
            index = cursor.int32()
            size = cursor.length(SIZE)
            if size < -1:
                raise ProtocolError(f"produce request: records length {size}")
            records = None if size == -1 else cursor.take(size, "records")
            cursor.skip_tags()
            partitions.append(module.PartitionProduceData(index=index, records=records))
        cursor.skip_tags()
        topics.append(module.TopicProduceData(name=name, partition_data=tuple(partitions)))
    cursor.skip_tags()
    request = module.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout),
        topic_data=tuple(topics),
    )
    return request, cursor.at - at


_I64 = struct.Struct(">q")
_PARTITION_V3 = struct.Struct(">ihqq")  # index, error, base offset, log append time
_PARTITION_V5 = struct.Struct(">ihqqq")  # and the log start offset
# From v8, a partition without record errors or message ends with an empty record_errors
# array and a null error_message (then its empty tags when flexible).
_NO_RECORD_ERRORS = {False: SIZE.pack(0) + b"\xff\xff", True: b"\x01\x00" + EMPTY_TAGS}


PartitionAnswer = tuple[int, int, int, int, int, str | None, tuple[tuple[int, str | None], ...]]
"""(index, error, base offset, log append time, log start offset, error message, record errors)."""


def encode_body(version: int, topics: list[tuple[str, list[PartitionAnswer]]]) -> bytes:
    """A ProduceResponse body (v3-v10): topics of (name, [:data:`PartitionAnswer`]), no throttle.
    Record errors (KIP-467: batch index, message) from v8."""
    flexible = version >= _FLEXIBLE_FROM
    out = bytearray(wire_count(len(topics), flexible))
    for name, partitions in topics:
        out += wire_string(name, flexible, False)
        out += wire_count(len(partitions), flexible)
        for index, error, base_offset, append_time, log_start, message, record_errors in partitions:
            if version >= 8 and message is None and not record_errors:  # nearly every answer
                out += _PARTITION_V5.pack(index, error, base_offset, append_time, log_start)
                out += _NO_RECORD_ERRORS[flexible]
                continue
            out += _PARTITION_V3.pack(index, error, base_offset, append_time)
            if version >= 5:
                out += _I64.pack(log_start)
            if version >= 8:
                out += wire_count(len(record_errors), flexible)
                for batch_index, why in record_errors:
                    out += SIZE.pack(batch_index)
                    out += wire_string(why, flexible, True)
                    if flexible:
                        out += EMPTY_TAGS
                out += wire_string(message, flexible, True)
            if flexible:
                out += EMPTY_TAGS
        if flexible:
            out += EMPTY_TAGS
    out += SIZE.pack(0)  # throttle_time_ms
    if flexible:
        out += EMPTY_TAGS
    return bytes(out)

"""Hand-made record batches for the decoders' tests (tests/records/test_fetch_decode.py, tests/records/test_arrow.py)."""

from __future__ import annotations

import struct

from logstore._native import crc32c
from logstore.records import build_batch

POS_CRC, POS_ATTRIBUTES, POS_MAX_TIMESTAMP, POS_RECORD_COUNT = 17, 21, 35, 57


def reseal(batch: bytes, *, attributes_or: int = 0, max_timestamp: int | None = None,
           record_count: int | None = None) -> bytes:  # fmt: skip
    """The batch with header fields changed and its CRC recomputed."""
    b = bytearray(batch)
    (attributes,) = struct.unpack_from(">h", b, POS_ATTRIBUTES)
    struct.pack_into(">h", b, POS_ATTRIBUTES, attributes | attributes_or)
    if max_timestamp is not None:
        struct.pack_into(">q", b, POS_MAX_TIMESTAMP, max_timestamp)
    if record_count is not None:
        struct.pack_into(">i", b, POS_RECORD_COUNT, record_count)
    struct.pack_into(">I", b, POS_CRC, crc32c(bytes(b[POS_ATTRIBUTES:])))
    return bytes(b)


def control_batch(offset: int) -> bytes:
    """A transaction marker (COMMIT): transactional + control."""
    batch = build_batch([(struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 5))], base_offset=offset,
                        producer_id=7, producer_epoch=0, timestamp=1, transactional=True)  # fmt: skip
    return reseal(batch, attributes_or=0x20)

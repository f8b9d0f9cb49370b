"""Compression codecs of Kafka's record batches, through cramjam.

Codec ids are the low three bits of a batch's attributes: 0 none, 1 gzip,
2 snappy, 3 lz4, 4 zstd. Output formats are the ones Kafka's Java client
writes, so every client reads them:

- snappy: xerial framing (magic ``\\x82SNAPPY\\x00``, then length-prefixed raw
  blocks); raw snappy (librdkafka's output) is read as well.
- lz4: the LZ4 frame format with independent blocks (Java's
  KafkaLZ4BlockInputStream reads no linked blocks).
"""

from __future__ import annotations

import struct

import cramjam

from logstore.errors import CorruptRecordError, InvalidArgumentError

CODECS: dict[str, int] = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODEC_NAMES: dict[int, str] = {v: k for k, v in CODECS.items()}

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def codec_id(name: str) -> int:
    """The codec id of a compression name (none, gzip, snappy, lz4, zstd)."""
    try:
        return CODECS[name]
    except KeyError:
        raise InvalidArgumentError(f"unknown compression {name!r}: use one of {', '.join(CODECS)}") from None


def _snappy_compress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    parts = [_XERIAL_HEADER]
    for start in range(0, len(view), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | memoryview) -> bytes:
    view = memoryview(data)
    if bytes(view[:8]) != _XERIAL_MAGIC:
        return bytes(cramjam.snappy.decompress_raw(view))
    parts = []
    position = 16
    while position < len(view):
        if position + 4 > len(view):
            raise CorruptRecordError("snappy: truncated xerial block header")
        (size,) = struct.unpack_from(">i", view, position)
        position += 4
        if size < 0 or position + size > len(view):
            raise CorruptRecordError("snappy: xerial block runs past the batch")
        parts.append(bytes(cramjam.snappy.decompress_raw(view[position : position + size])))
        position += size
    return b"".join(parts)


def _lz4_compress(data: bytes | memoryview) -> bytes:
    compressor = cramjam.lz4.Compressor(content_checksum=False, block_linked=False)
    compressor.compress(bytes(data))
    return bytes(compressor.finish())


def compress(codec: int, data: bytes | memoryview) -> bytes:
    """Compress a records section with codec id ``codec``."""
    if codec == 1:
        return bytes(cramjam.gzip.compress(data))
    if codec == 2:
        return _snappy_compress(data)
    if codec == 3:
        return _lz4_compress(data)
    if codec == 4:
        return bytes(cramjam.zstd.compress(data))
    raise InvalidArgumentError(f"no compressor for codec id {codec}")


def decompress(codec: int, data: bytes | memoryview) -> bytes:
    """Decompress a records section; damaged input raises CorruptRecordError."""
    try:
        if codec == 1:
            return bytes(cramjam.gzip.decompress(data))
        if codec == 2:
            return _snappy_decompress(data)
        if codec == 3:
            return bytes(cramjam.lz4.decompress(data))
        if codec == 4:
            return bytes(cramjam.zstd.decompress(data))
    except cramjam.DecompressionError as exc:
        raise CorruptRecordError(
            f"{CODEC_NAMES[codec]}: compressed records cannot be decompressed ({exc}); the batch is damaged"
        ) from exc
    raise CorruptRecordError(f"unknown compression codec id {codec} in batch attributes")

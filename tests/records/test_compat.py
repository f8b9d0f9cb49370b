"""Byte compatibility of v2 record batches with two independent implementations.

Oracles:

- kafka-python (``kafka.record.default_records``): reads and writes every codec.
- kio (``kio.records``): a second, independent codec-less implementation. kio
  supports NO compression (its reader walks the records section as is and its
  writer never compresses), so it is used for uncompressed batches only.

Both directions are checked: batches we build parse in the oracle to the same
offsets, timestamps, keys, values and headers, and the oracle's batches parse
with ``parse_batches`` to the same. Where both sides encode the same inputs
without compression, the bytes must be identical.
"""

from __future__ import annotations

import datetime
import io
import struct
from collections.abc import Sequence

import crc32c
import pytest
from kafka import codec as kafka_codec
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kio.records import schema as kio_schema
from kio.records.readers import read_batch as kio_read_batch
from kio.records.writers import write_batch as kio_write_batch
from kio.records.writers import write_new_batch as kio_write_new_batch
from kio.static.primitive import TZAwareMicros, i8, i16, i32, i64

from logstore.records import Record, build_batch, parse_batches
from logstore.records.codecs import decompress

pytestmark = pytest.mark.unit

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
COMPRESSED = [name for name in CODECS if name != "none"]
HEADER_SIZE = 61
_BASE_OFFSET = struct.Struct(">q")
_KAFKA_DECODERS = {
    1: kafka_codec.gzip_decode,
    2: kafka_codec.snappy_decode,
    3: kafka_codec.lz4_decode,
    4: kafka_codec.zstd_decode,
}

# ---------------------------------------------------------------------------
# Record sets shared by the tests. Every record carries an explicit timestamp
# that is a multiple of 1000 ms, because kio truncates timestamps to whole
# seconds on read.

T0 = 1_700_000_000_000
# kafka-python sends a batch uncompressed when compressing does not shrink it,
# so every small set ends with a compressible record.
PAD = Record(key=b"pad", value=b"compressible " * 64, timestamp=T0)


def _simple() -> list[Record]:
    return [Record(key=b"k%d" % i, value=b"value-%d" % i, timestamp=T0 + 1000 * i) for i in range(5)] + [PAD]


def _nulls() -> list[Record]:
    return [
        Record(key=None, value=b"null key", timestamp=T0),
        Record(key=b"null value", value=None, timestamp=T0),
        Record(key=None, value=None, timestamp=T0 + 1000),
        # Empty is not null: length 0, not -1.
        Record(key=b"", value=b"", timestamp=T0 + 2000),
        Record(key=b"k", value=b"v", headers=(("null-header", None),), timestamp=T0 + 3000),
        Record(key=None, value=None, headers=(("a", None), ("b", b"")), timestamp=T0 + 4000),
        PAD,
    ]


def _headers() -> list[Record]:
    return [
        Record(
            key=b"k",
            value=b"v",
            headers=(("trace-id", b"abc123"), ("caf\u00e9", b"\x00\xff"), ("\u65e5\u672c\u8a9e", b"nihongo")),
            timestamp=T0,
        ),
        Record(value=b"emoji", headers=(("\U0001f680-launch", b"go"),), timestamp=T0 + 1000),
        # Duplicate header keys are legal and keep their order.
        Record(value=b"dups", headers=(("x", b"1"), ("x", b"2"), ("x", None)), timestamp=T0 + 2000),
        Record(value=b"empty key", headers=(("", b"empty"),), timestamp=T0 + 3000),
        Record(
            value=b"long", headers=tuple((f"h{i}", bytes([i]) * i) for i in range(40)), timestamp=T0 + 4000
        ),
        PAD,
    ]


def _negative_deltas() -> list[Record]:
    # The first record sets the batch's base timestamp; the later ones are
    # older, so their deltas are negative (zigzag varlongs).
    stamps = [T0, T0 - 1000, T0 + 5000, T0 - 86_400_000, T0 - 3_600_000_000, T0 + 1000]
    return [Record(key=b"%d" % i, value=b"ts", timestamp=t) for i, t in enumerate(stamps)] + [PAD]


def _large() -> list[Record]:
    # 1 MiB that compresses (so kafka-python keeps its compressed form) but
    # is not trivially repetitive: many xerial snappy blocks, many lz4 blocks.
    lines = b"".join(
        b"line %08d of a large record, %06x\n" % (i, (i * 2654435761) & 0xFFFFFF) for i in range(30_000)
    )
    mib = lines[: 1 << 20]
    assert len(mib) == 1 << 20
    return [
        Record(key=b"big", value=mib, timestamp=T0),
        Record(key=b"small", value=b"after the big one", timestamp=T0 + 1000),
        Record(key=mib[:70_000], value=None, headers=(("big-header", mib[:200_000]),), timestamp=T0 + 2000),
    ]


def _many() -> list[Record]:
    return [
        Record(
            key=None if i % 7 == 0 else b"key-%d" % (i % 97),
            value=b"value-%06d" % i,
            headers=(("n", b"%d" % i),) if i % 50 == 0 else (),
            timestamp=T0 + 1000 * (i % 13),
        )
        for i in range(10_000)
    ]


RECORD_SETS = {
    "simple": _simple,
    "nulls": _nulls,
    "headers": _headers,
    "negative_deltas": _negative_deltas,
    "large": _large,
    "many": _many,
}


def _expected(records: Sequence[Record], base_offset: int) -> list[Record]:
    return [Record(r.key, r.value, r.headers, r.timestamp, base_offset + i) for i, r in enumerate(records)]


# ---------------------------------------------------------------------------
# kafka-python adapters


def kp_build(records: Sequence[Record], codec: int = 0, *, base_offset: int = 0, **producer: int) -> bytes:
    """One batch built by kafka-python's builder (base offset patched in)."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=codec,
        is_transactional=bool(producer.get("is_transactional", False)),
        producer_id=producer.get("producer_id", -1),
        producer_epoch=producer.get("producer_epoch", -1),
        base_sequence=producer.get("base_sequence", -1),
        batch_size=1 << 30,
    )
    for i, r in enumerate(records):
        assert builder.append(i, r.timestamp, r.key, r.value, list(r.headers)) is not None
    out = bytearray(builder.build())
    # kafka-python's producer always writes base offset 0 (the broker assigns
    # offsets); the base offset is not covered by the CRC, so patching it in
    # leaves a valid batch.
    _BASE_OFFSET.pack_into(out, 0, base_offset)
    return bytes(out)


def _split(buf: bytes) -> list[bytes]:
    """Cut a buffer of concatenated batches at their length fields."""
    out = []
    position = 0
    while position < len(buf):
        (length,) = struct.unpack_from(">i", buf, position + 8)
        out.append(buf[position : position + 12 + length])
        position += 12 + length
    assert position == len(buf)
    return out


def kp_read(buf: bytes) -> list[Record]:
    """Records of every batch in buf, as kafka-python reads them (CRC checked)."""
    out: list[Record] = []
    for raw in _split(buf):
        batch = DefaultRecordBatch(raw)
        assert batch.validate_crc()
        out.extend(Record(r.key, r.value, tuple(r.headers), r.timestamp, r.offset) for r in batch)
    return out


def ours_read(buf: bytes) -> list[Record]:
    return [r for batch in parse_batches(buf) for r in batch.records]


# ---------------------------------------------------------------------------
# kio adapters


def _kio_time(ms: int | None) -> TZAwareMicros:
    assert ms is not None and ms % 1000 == 0, "kio keeps whole seconds only"
    return TZAwareMicros.parse(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))


def kio_build(
    records: Sequence[Record],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
) -> bytes:
    batch = kio_schema.NewRecordBatch(
        producer_id=i64(producer_id),
        producer_epoch=i16(producer_epoch),
        partition_leader_epoch=i32(partition_leader_epoch),
        base_sequence=i32(base_sequence),
        attributes=i16(attributes),
        records=tuple(
            kio_schema.Record(
                attributes=i8(0),
                timestamp=_kio_time(r.timestamp),
                offset=i64(base_offset + i),
                key=r.key,
                value=r.value,
                headers=tuple(kio_schema.RecordHeader(key=k.encode(), value=v) for k, v in r.headers),
            )
            for i, r in enumerate(records)
        ),
    )
    out = io.BytesIO()
    kio_write_new_batch(out, batch)
    return out.getvalue()


def kio_read(buf: bytes) -> list[kio_schema.RecordBatch]:
    """Every batch in buf, read by kio (which verifies the CRC)."""
    batches = []
    position = 0
    while position < len(buf):
        batch, size = kio_read_batch(buf, position)
        batches.append(batch)
        position += size
    assert position == len(buf)
    return batches


def kio_records(batches: Sequence[kio_schema.RecordBatch]) -> list[Record]:
    return [
        Record(
            r.key,
            r.value,
            tuple((h.key.decode(), h.value) for h in r.headers),  # type: ignore[union-attr]
            round(r.timestamp.timestamp() * 1000),
            r.offset,
        )
        for b in batches
        for r in b.records
    ]


# ---------------------------------------------------------------------------
# Ours -> kafka-python


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("name", list(RECORD_SETS))
def test_ours_read_by_kafka_python(name: str, codec: str) -> None:
    records = RECORD_SETS[name]()
    base_offset = 1_000_003
    batch = build_batch(records, base_offset=base_offset, compression=codec)
    parsed = DefaultRecordBatch(batch)
    assert parsed.validate_crc()
    assert parsed.compression_type == CODECS[codec]
    assert parsed.base_offset == base_offset
    assert parsed.last_offset == base_offset + len(records) - 1
    assert parsed.records_count == len(records)
    assert parsed.first_timestamp == records[0].timestamp
    assert parsed.max_timestamp == max(r.timestamp for r in records)  # type: ignore[type-var]
    assert kp_read(batch) == _expected(records, base_offset)


@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("name", list(RECORD_SETS))
def test_kafka_python_read_by_ours(name: str, codec: str) -> None:
    records = RECORD_SETS[name]()
    base_offset = 77
    batch = kp_build(records, CODECS[codec], base_offset=base_offset)
    (parsed,) = parse_batches(batch)
    # Our record sets compress, so kafka-python keeps the compressed form.
    assert parsed.compression == codec
    assert parsed.base_offset == base_offset
    assert parsed.record_count == len(records)
    assert parsed.last_offset == base_offset + len(records) - 1
    assert parsed.next_offset == parsed.last_offset + 1
    assert parsed.base_timestamp == records[0].timestamp
    assert parsed.max_timestamp == max(r.timestamp for r in records)  # type: ignore[type-var]
    assert parsed.size == len(batch)
    assert parsed.crc == crc32c.crc32c(batch[21:])
    assert parsed.timestamp_type == "CreateTime"
    assert not parsed.is_transactional
    assert not parsed.is_control
    assert bytes(parsed.raw) == batch
    assert parsed.records == _expected(records, base_offset)


@pytest.mark.parametrize("name", list(RECORD_SETS))
@pytest.mark.parametrize("base_offset", [0, 1, 5_000_000_000])
def test_uncompressed_bytes_identical_to_kafka_python(name: str, base_offset: int) -> None:
    records = RECORD_SETS[name]()
    theirs = kp_build(records, base_offset=base_offset)
    # kafka-python's producer writes partition leader epoch 0 (ours defaults
    # to -1, "no epoch", as Java's producer does); with the same epoch and the
    # same inputs every byte must agree: attributes, both timestamps, the
    # producer fields, the records and the CRC.
    assert build_batch(records, base_offset=base_offset, partition_leader_epoch=0) == theirs
    # With our default epoch, only the 4 epoch bytes (not CRC-covered) differ.
    default = build_batch(records, base_offset=base_offset)
    assert default[:12] == theirs[:12]
    assert default[12:16] == b"\xff\xff\xff\xff"
    assert default[16:] == theirs[16:]


@pytest.mark.parametrize("codec", COMPRESSED)
@pytest.mark.parametrize("name", ["simple", "nulls", "headers", "negative_deltas", "large"])
def test_compressed_same_section_and_header_as_kafka_python(name: str, codec: str) -> None:
    # Compressed bytes cannot be compared: the compressors differ (cramjam vs
    # python-snappy / zlib / lz4 / zstandard, levels and frame flags), so the
    # compressed sections, batch lengths and CRCs legitimately differ. What
    # must agree is everything else: the header fields and the records
    # section once decompressed.
    records = RECORD_SETS[name]()
    ours = build_batch(records, base_offset=9, compression=codec, partition_leader_epoch=0)
    theirs = kp_build(records, CODECS[codec], base_offset=9)
    fields_ours = struct.unpack_from(">qiibIhiqqqhii", ours)
    fields_theirs = struct.unpack_from(">qiibIhiqqqhii", theirs)
    skip = {1, 4}  # batch length and CRC depend on the compressed bytes
    assert [f for i, f in enumerate(fields_ours) if i not in skip] == [
        f for i, f in enumerate(fields_theirs) if i not in skip
    ]
    section_ours = _KAFKA_DECODERS[CODECS[codec]](ours[HEADER_SIZE:])
    section_theirs = decompress(CODECS[codec], theirs[HEADER_SIZE:])
    assert section_ours == section_theirs
    assert section_ours == build_batch(records, base_offset=9)[HEADER_SIZE:]


@pytest.mark.parametrize("codec", list(CODECS))
def test_plain_fast_path_matches_kafka_python(codec: str) -> None:
    values = [b"a", b"", b"bb" * 100, bytes(range(256)) * 300]
    stamp = T0 + 123
    fast = build_batch(values, timestamp=stamp, compression=codec, partition_leader_epoch=0)
    records = [Record(value=v, timestamp=stamp) for v in values]
    if codec == "none":
        assert fast == kp_build(records)
    else:
        section = _KAFKA_DECODERS[CODECS[codec]](fast[HEADER_SIZE:])
        assert section == kp_build(records)[HEADER_SIZE:]
    assert kp_read(fast) == _expected(records, 0)


@pytest.mark.parametrize("codec", list(CODECS))
def test_fast_and_general_paths_byte_identical(codec: str) -> None:
    values = [b"a", b"b", b"", b"x" * 300, bytes(range(256)) * 64]
    stamp = T0 + 7
    plain = build_batch(values, timestamp=stamp, compression=codec, base_offset=42)
    as_records = build_batch(
        [Record(value=v) for v in values], timestamp=stamp, compression=codec, base_offset=42
    )
    stamped = build_batch(
        [Record(value=v, timestamp=stamp) for v in values], timestamp=1, compression=codec, base_offset=42
    )
    pairs = build_batch([(None, v) for v in values], timestamp=stamp, compression=codec, base_offset=42)
    assert plain == as_records == stamped == pairs
    assert build_batch([b"a", b"b"], timestamp=stamp) == build_batch(
        [Record(value=b"a"), Record(value=b"b")], timestamp=stamp
    )


@pytest.mark.parametrize("transactional", [False, True])
def test_producer_fields_identical_to_kafka_python(transactional: bool) -> None:
    records = _simple()
    theirs = kp_build(
        records,
        producer_id=123_456_789_012,
        producer_epoch=7,
        base_sequence=1000,
        is_transactional=transactional,
    )
    ours = build_batch(
        records,
        producer_id=123_456_789_012,
        producer_epoch=7,
        base_sequence=1000,
        transactional=transactional,
        partition_leader_epoch=0,
    )
    assert ours == theirs
    parsed = DefaultRecordBatch(ours)
    assert parsed.producer_id == 123_456_789_012
    assert parsed.producer_epoch == 7
    assert parsed.base_sequence == 1000
    assert parsed.is_transactional == transactional
    (batch,) = parse_batches(theirs)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (123_456_789_012, 7, 1000)
    assert batch.is_transactional == transactional
    assert batch.attributes == (0x10 if transactional else 0)


def test_kafka_python_multi_batch_buffer() -> None:
    # Batches of every codec back to back, as a segment or fetch response holds them.
    pieces = []
    expected = []
    offset = 0
    for codec in CODECS.values():
        records = _simple() + _nulls()
        pieces.append(kp_build(records, codec, base_offset=offset))
        expected += _expected(records, offset)
        offset += len(records)
    buf = b"".join(pieces)
    batches = list(parse_batches(buf))
    assert [b.compression for b in batches] == list(CODECS)
    assert [b.size for b in batches] == [len(p) for p in pieces]
    assert [r for b in batches for r in b.records] == expected
    # And our own multi-batch buffer reads back in kafka-python.
    ours = b"".join(
        build_batch(_simple(), base_offset=5 * i, compression=codec) for i, codec in enumerate(CODECS)
    )
    assert kp_read(ours) == [r for i in range(len(CODECS)) for r in _expected(_simple(), 5 * i)]


def _reseal(batch: bytearray) -> bytes:
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def test_raw_snappy_from_kafka_python_codec_is_read() -> None:
    # librdkafka writes raw (unframed) snappy; kafka-python can too.
    records = _headers() + _large()
    plain = build_batch(records, base_offset=3)
    raw = kafka_codec.snappy_encode(plain[HEADER_SIZE:], xerial_compatible=False)
    assert not raw.startswith(b"\x82SNAPPY\x00")
    batch = bytearray(plain[:HEADER_SIZE]) + raw
    batch[22] = (batch[22] & ~0x07) | 2  # low byte of the attributes: snappy
    resealed = _reseal(batch)
    (parsed,) = parse_batches(resealed)
    assert parsed.compression == "snappy"
    assert parsed.records == _expected(records, 3)
    assert kp_read(resealed) == _expected(records, 3)


def test_snappy_is_xerial_framed_like_java() -> None:
    # Java's producer (and kafka-python's) write xerial framing: the magic,
    # version 1, compatible version 1, then length-prefixed raw blocks of at
    # most 32 KiB of input each.
    records = _large()
    batch = build_batch(records, compression="snappy")
    section = batch[HEADER_SIZE:]
    reference = kafka_codec.snappy_encode(b"x")
    assert section[:16] == reference[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    position, total = 16, 0
    plain = build_batch(records)[HEADER_SIZE:]
    while position < len(section):
        (size,) = struct.unpack_from(">i", section, position)
        block = kafka_codec.snappy_decode(section[position + 4 : position + 4 + size])
        assert 0 < len(block) <= 32 * 1024
        assert block == plain[total : total + len(block)]
        total += len(block)
        position += 4 + size
    assert position == len(section)
    assert total == len(plain)


def test_lz4_is_a_frame_with_independent_blocks() -> None:
    # Java's KafkaLZ4BlockInputStream reads only independent blocks: the
    # frame's FLG byte must have the block-independence bit (0x20) set.
    batch = build_batch(_large(), compression="lz4")
    section = batch[HEADER_SIZE:]
    assert section[:4] == struct.pack("<I", 0x184D2204)
    flg = section[4]
    assert flg >> 6 == 0b01  # frame format version 01
    assert flg & 0x20
    assert kafka_codec.lz4_decode(section) == build_batch(_large())[HEADER_SIZE:]


@pytest.mark.parametrize("append_time", [T0 + 999_000, 0, -1])
def test_log_append_time_read_like_kafka_python(append_time: int) -> None:
    # With LogAppendTime every record's timestamp is the batch's max
    # timestamp, whatever its value (Java's DefaultRecordBatch and
    # kafka-python alike; -1 is Kafka's NO_TIMESTAMP).
    records = _negative_deltas()
    batch = bytearray(build_batch(records, base_offset=10))
    batch[22] |= 0x08
    struct.pack_into(">q", batch, 35, append_time)
    resealed = _reseal(batch)
    (parsed,) = parse_batches(resealed)
    assert parsed.timestamp_type == "LogAppendTime"
    theirs = kp_read(resealed)
    assert [r.timestamp for r in theirs] == [append_time] * len(records)
    assert parsed.records == theirs
    assert parsed.columns().timestamps.tolist() == [append_time] * len(records)


# ---------------------------------------------------------------------------
# kio (uncompressed only: kio implements no codec at all)


@pytest.mark.parametrize("name", list(RECORD_SETS))
@pytest.mark.parametrize("base_offset", [0, 12_345])
def test_ours_read_by_kio(name: str, base_offset: int) -> None:
    records = RECORD_SETS[name]()
    batch = build_batch(records, base_offset=base_offset)
    (kio_batch,) = kio_read(batch)  # raises on a CRC or length mismatch
    assert kio_batch.base_offset == base_offset
    assert kio_batch.partition_leader_epoch == -1
    assert kio_batch.attributes == 0
    assert kio_batch.last_offset_delta == len(records) - 1
    assert kio_batch.base_timestamp == records[0].timestamp
    assert kio_batch.max_timestamp == max(r.timestamp for r in records)  # type: ignore[type-var]
    assert kio_batch.crc == struct.unpack_from(">I", batch, 17)[0]
    assert kio_batch.batch_length == len(batch) - 12
    assert kio_records([kio_batch]) == _expected(records, base_offset)


@pytest.mark.parametrize("name", list(RECORD_SETS))
@pytest.mark.parametrize("base_offset", [0, 12_345])
def test_kio_bytes_identical_and_read_by_ours(name: str, base_offset: int) -> None:
    records = RECORD_SETS[name]()
    theirs = kio_build(records, base_offset=base_offset, partition_leader_epoch=-1)
    assert build_batch(records, base_offset=base_offset) == theirs
    (parsed,) = parse_batches(theirs)
    assert parsed.records == _expected(records, base_offset)
    assert parsed.base_timestamp == records[0].timestamp


def test_kio_producer_fields_and_epoch() -> None:
    records = _nulls()
    theirs = kio_build(
        records,
        base_offset=500,
        partition_leader_epoch=17,
        producer_id=99,
        producer_epoch=3,
        base_sequence=41,
        attributes=0x10,
    )
    ours = build_batch(
        records,
        base_offset=500,
        partition_leader_epoch=17,
        producer_id=99,
        producer_epoch=3,
        base_sequence=41,
        transactional=True,
    )
    assert ours == theirs
    (batch,) = parse_batches(theirs)
    assert batch.partition_leader_epoch == 17
    assert batch.is_transactional


def test_kio_multi_batch_both_ways() -> None:
    sets = [_simple(), _nulls(), _headers(), _negative_deltas()]
    ours = b""
    theirs = b""
    expected: list[Record] = []
    offset = 0
    for records in sets:
        ours += build_batch(records, base_offset=offset)
        theirs += kio_build(records, base_offset=offset)
        expected += _expected(records, offset)
        offset += len(records) + 10  # gaps between batches, as after compaction
    assert ours == theirs
    assert kio_records(kio_read(ours)) == expected
    assert ours_read(theirs) == expected
    # kio's write_batch re-serializes a batch it read; the result must still be ours.
    rewritten = io.BytesIO()
    for kio_batch in kio_read(ours):
        kio_write_batch(rewritten, kio_batch)
    assert rewritten.getvalue() == ours

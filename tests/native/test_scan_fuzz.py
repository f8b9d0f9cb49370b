"""Fuzzing the native batch scanner (ls_scan_batches) and record decoder.

Every case checks invariants that must hold whatever the input:

- the scan never crashes (an abort or a fault kills the test run);
- what it accepts is a run of whole batches from byte 0, each with magic 2
  and (with LS_SCAN_CRC) a CRC-32C that really matches, recomputed here with
  the ``crc32c`` package over bytes [21, size) against the big-endian u32 at
  [17, 21);
- its verdict and outputs equal those of ``reference_scan``, a plain-Python
  model of the format's rules written from ls_api.h and the v2 spec.

Inputs: random buffers of many sizes, random batches with valid and invalid
headers and records (CRC fixed so the record walker is reached), every
single-byte mutation of a small multi-batch buffer, random mutations of
larger ones, and every truncation. A seeded ``random.Random`` keeps it
reproducible; two hypothesis tests add shrinking searches.
"""

from __future__ import annotations

import contextlib
import random
import struct
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore._native import lib
from logstore.errors import CorruptRecordError
from logstore.records import Record, RecordBatch, build_batch, parse_batches
from logstore.records.batch import scan

pytestmark = pytest.mark.unit

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = 61
CRC, RECORDS, MONOTONIC = lib.LS_SCAN_CRC, lib.LS_SCAN_RECORDS, lib.LS_SCAN_MONOTONIC
ALL_FLAGS = [0, CRC, RECORDS, CRC | RECORDS, CRC | RECORDS | MONOTONIC, RECORDS | MONOTONIC]
DEFAULT_FLAGS = CRC | RECORDS
OK, INCOMPLETE, CORRUPT, CRC_ERR, OFFSET_ERR = (
    lib.LS_OK,
    lib.LS_ERR_INCOMPLETE,
    lib.LS_ERR_CORRUPT,
    lib.LS_ERR_CRC,
    lib.LS_ERR_OFFSET,
)
T = 1_700_000_000_000


# ---------------------------------------------------------------------------
# The reference model


class Bad(Exception):
    """The reference decoder rejects the records section."""


def _varint(buf: bytes, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint (max_bytes 5) or varlong (10) from buf[pos:end)."""
    value = 0
    for i in range(max_bytes):
        if pos >= end:
            raise Bad("varint runs past its field")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            value &= (1 << 64) - 1  # a varlong is 64 bits; higher bits are dropped
            decoded = (value >> 1) ^ -(value & 1)
            if max_bytes == 5 and not -(2**31) <= decoded < 2**31:
                raise Bad("varint beyond int32")
            return decoded, pos
    raise Bad("varint too long")


def _bytes_field(buf: bytes, pos: int, end: int, nullable: bool) -> tuple[bytes | None, int]:
    n, pos = _varint(buf, pos, end, 5)
    if n < (-1 if nullable else 0):
        raise Bad("negative length")
    if n == -1:
        return None, pos
    if n > end - pos:
        raise Bad("field runs past its record")
    return buf[pos : pos + n], pos + n


@dataclass
class RefRecord:
    timestamp_delta: int
    offset_delta: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[bytes, bytes | None]]


def reference_records(section: bytes, count: int, offset_delta_max: int) -> list[RefRecord]:
    """Decode a records section by the v2 record layout, or raise Bad.

    Rules: length varint then exactly that many bytes of body; key and value
    lengths -1 (null) or >= 0; header keys >= 0, header values -1 or >= 0;
    header count >= 0; offset delta in [0, the batch's last offset delta];
    no bytes left over after ``count`` records. Varints are at most 5 bytes
    and must fit int32; varlongs at most 10 bytes.
    """
    pos, end = 0, len(section)
    out = []
    for _ in range(count):
        length, pos = _varint(section, pos, end, 5)
        if length < 0 or length > end - pos:
            raise Bad("record length")
        record_end = pos + length
        if pos >= record_end:
            raise Bad("no attributes byte")
        pos += 1
        timestamp_delta, pos = _varint(section, pos, record_end, 10)
        offset_delta, pos = _varint(section, pos, record_end, 5)
        if not 0 <= offset_delta <= offset_delta_max:
            raise Bad("offset delta outside the batch")
        key, pos = _bytes_field(section, pos, record_end, True)
        value, pos = _bytes_field(section, pos, record_end, True)
        header_count, pos = _varint(section, pos, record_end, 5)
        if header_count < 0:
            raise Bad("negative header count")
        headers = []
        for _ in range(header_count):
            name, pos = _bytes_field(section, pos, record_end, False)
            data, pos = _bytes_field(section, pos, record_end, True)
            assert name is not None
            headers.append((name, data))
        if pos != record_end:
            raise Bad("record length disagrees with its fields")
        out.append(RefRecord(timestamp_delta, offset_delta, key, value, headers))
    if pos != end:
        raise Bad("bytes after the last record")
    return out


@dataclass
class RefScan:
    bytes_valid: int = 0
    batch_count: int = 0
    record_count: int = 0
    offset_first: int = -1
    offset_last: int = -1
    timestamp_max: int = -1
    timestamp_max_offset: int = -1
    stop: int = OK


def _check_header(buf: bytes, pos: int) -> tuple[int, tuple[Any, ...]]:
    """(stop, fields) for the batch at pos: OK, INCOMPLETE or CORRUPT."""
    remaining = len(buf) - pos
    if remaining < 12:
        return INCOMPLETE, ()
    (length,) = struct.unpack_from(">i", buf, pos + 8)
    if length < HEADER_SIZE - 12:
        return CORRUPT, ()  # shorter than a header: garbage, not a torn write
    size = 12 + length
    if size > 0x7FFFFFFF:
        return CORRUPT, ()  # no batch is larger than 2 GiB - 1
    if remaining < HEADER_SIZE:
        return INCOMPLETE, ()
    fields = HEADER.unpack_from(buf, pos)
    base, _, _, magic, _, attributes, last_delta, _, _, _, _, _, count = fields
    codec = attributes & 0x07
    if magic != 2 or base < 0 or last_delta < 0 or count < 0 or codec > 4:
        return CORRUPT, fields
    if base > 2**63 - 1 - last_delta:
        return CORRUPT, fields
    # Every record takes at least 7 bytes, so a larger count cannot be true.
    if codec == 0 and count * 7 > size - HEADER_SIZE:
        return CORRUPT, fields
    if remaining < size:
        return INCOMPLETE, fields
    return OK, fields


def reference_scan(buf: bytes, flags: int) -> RefScan:
    out = RefScan()
    pos = 0
    offset_prev = -1
    while pos < len(buf):
        stop, fields = _check_header(buf, pos)
        if stop != OK:
            out.stop = stop
            return out
        base, length, _, _, crc, attributes, last_delta, _, max_ts, _, _, _, count = fields
        size = 12 + length
        last = base + last_delta
        if flags & MONOTONIC and base <= offset_prev:
            out.stop = OFFSET_ERR
            return out
        if flags & CRC and crc32c.crc32c(buf[pos + 21 : pos + size]) != crc:
            out.stop = CRC_ERR
            return out
        if flags & RECORDS and attributes & 0x07 == 0:
            try:
                reference_records(buf[pos + HEADER_SIZE : pos + size], count, last_delta)
            except Bad:
                out.stop = CORRUPT
                return out
        if max_ts > out.timestamp_max:
            out.timestamp_max, out.timestamp_max_offset = max_ts, last
        if out.offset_first < 0:
            out.offset_first = base
        out.offset_last = offset_prev = last
        out.batch_count += 1
        out.record_count += count
        pos += size
        out.bytes_valid = pos
    return out


# ---------------------------------------------------------------------------
# Checks on the native scan


def batches_of(buf: bytes, end: int) -> Iterator[tuple[int, int]]:
    """(position, size) of the batches in buf[:end), by their length fields."""
    pos = 0
    while pos < end:
        size = 12 + struct.unpack_from(">i", buf, pos + 8)[0]
        yield pos, size
        pos += size


def check_scan(buf: bytes, flags: int) -> Any:
    """Scan buf natively; check the invariants and the reference model."""
    state = scan(buf, flags)
    valid = state.bytes_valid
    assert 0 <= valid <= len(buf)
    count = 0
    for pos, size in batches_of(buf, valid):
        count += 1
        assert size >= HEADER_SIZE and pos + size <= valid
        assert buf[pos + 16] == 2
        if flags & CRC:
            (stored,) = struct.unpack_from(">I", buf, pos + 17)
            assert crc32c.crc32c(buf[pos + 21 : pos + size]) == stored, f"accepted a bad CRC at {pos}"
    assert count == state.batch_count
    if valid < len(buf):
        assert state.stop != OK
    else:
        assert state.stop == OK
    ref = reference_scan(buf, flags)
    got = RefScan(
        state.bytes_valid,
        state.batch_count,
        state.record_count,
        state.offset_first,
        state.offset_last,
        state.timestamp_max,
        state.timestamp_max_offset,
        state.stop,
    )
    assert got == ref
    return state


# ---------------------------------------------------------------------------
# Generators of interesting batches


def _zigzag(value: int, max_bytes: int = 10) -> bytes:
    z = ((value << 1) ^ (value >> 63)) & ((1 << 64) - 1)
    out = bytearray()
    while z >= 0x80:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


def seal(
    header: bytes | bytearray, section: bytes, crc_ok: bool = True, rng: random.Random | None = None
) -> bytes:
    """A batch from a 61-byte header and a section: length and CRC filled in."""
    batch = bytearray(header[:HEADER_SIZE]) + section
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    crc = crc32c.crc32c(bytes(batch[21:]))
    if not crc_ok:
        assert rng is not None
        crc ^= rng.randrange(1, 1 << 32)
    struct.pack_into(">I", batch, 17, crc)
    return bytes(batch)


def random_record(rng: random.Random, index: int) -> bytes:
    """One record body, usually valid, sometimes broken in one field."""
    flaw = rng.randrange(14) if rng.random() < 0.12 else -1

    def field(data: bytes | None, nullable: bool = True) -> bytes:
        if data is None:
            return _zigzag(-1)
        return _zigzag(len(data)) + data

    key = None if rng.random() < 0.3 else rng.randbytes(rng.randrange(8))
    value = None if rng.random() < 0.2 else rng.randbytes(rng.randrange(20))
    body = bytearray(b"\x00")
    body += _zigzag(rng.choice([0, 1, -1, rng.randrange(-(2**40), 2**40), 2**62, -(2**63)]))
    body += _zigzag(-1 if flaw == 0 else index)
    body += field(key) if flaw != 1 else _zigzag(-2)
    body += field(value) if flaw != 2 else _zigzag(rng.randrange(100, 1000))
    headers = rng.randrange(3)
    body += _zigzag(-1 if flaw == 3 else headers + (1 if flaw == 4 else 0))
    for _ in range(headers):
        name = rng.randbytes(rng.randrange(4))
        body += _zigzag(-1) if flaw == 5 else field(name)
        body += field(None if rng.random() < 0.3 else rng.randbytes(rng.randrange(6)))
    if flaw == 6:
        body += b"\x00"  # a stray byte inside the record
    if flaw == 7:
        body = body[: rng.randrange(len(body))]
    if flaw == 8:
        body[1:1] = b"\x80" * 10  # an over-long varlong
    if flaw == 9:
        body += _zigzag(0)
    length = len(body) + (rng.choice([-2, -1, 1, 2]) if flaw == 10 else 0)
    if flaw == 11:
        return b"\xff\xff\xff\xff\x0f" + bytes(body)  # a length varint beyond int32
    if flaw == 12:
        return b"\x80\x80\x80\x80\x80\x01" + bytes(body)  # a 6-byte varint
    if flaw == 13:
        return _zigzag(-5) + bytes(body)
    return _zigzag(length) + bytes(body)


def random_batch(rng: random.Random) -> bytes:
    """A batch with random fields: usually valid structure, often a valid CRC.

    Each header field is odd (negative, huge, inconsistent) now and then, so
    that a good share of batches passes every header check and the record
    walk decides.
    """

    def odd(p: float = 0.04) -> bool:
        return rng.random() < p

    count = rng.choice([1, 1, 2, 3, 5, rng.randrange(0, 12)])
    if odd(0.08):
        section = rng.randbytes(rng.randrange(0, 120))
    else:
        section = b"".join(random_record(rng, i) for i in range(count))
    if odd():
        section += rng.randbytes(rng.randrange(1, 4))
    attributes = 0
    if odd(0.15):
        attributes = rng.choice([1, 2, 3, 4, 5, 6, 7, 0x08, 0x10, 0x20, rng.randrange(-(2**15), 2**15)])
    header = HEADER.pack(
        rng.choice([-1, -(2**63), 2**63 - 1, 2**63 - 2])
        if odd()
        else rng.choice([0, 1, rng.randrange(2**40)]),
        0,
        rng.randrange(-(2**31), 2**31),
        rng.randrange(-128, 128) if odd() else 2,
        0,
        attributes,
        rng.choice([count, 0, -1, 2**31 - 1]) if odd() else max(count - 1, 0),
        rng.randrange(-(2**63), 2**63) if odd(0.2) else T,
        rng.randrange(-(2**63), 2**63) if odd(0.2) else T + 10,
        -1,
        -1,
        -1,
        rng.choice([count + 1, count - 1, -1, 2**31 - 1, 2**24]) if odd(0.08) else count,
    )
    batch = seal(header, section, crc_ok=not odd(0.1), rng=rng)
    if odd():
        broken = bytearray(batch)
        struct.pack_into(">i", broken, 8, rng.choice([0, 48, 49, -1, 2**31 - 1, len(batch) - 12 + 1]))
        return bytes(broken)
    return batch


def small_buffer() -> tuple[bytes, list[list[Record]]]:
    """Three valid batches (uncompressed with headers, gzip, plain), ~250 bytes."""
    sets = [
        [
            Record(key=b"k1", value=b"v1", headers=(("h", b"x"), ("n", None)), timestamp=T),
            Record(value=None, timestamp=T - 5),
        ],
        [Record(value=b"a", timestamp=T), Record(value=b"bc", timestamp=T + 1)],
        [Record(key=b"key", value=b"", timestamp=T + 2)],
    ]
    batches = [
        build_batch(sets[0], base_offset=0),
        build_batch(sets[1], base_offset=2, compression="gzip"),
        build_batch(sets[2], base_offset=10),
    ]
    return b"".join(batches), sets


def larger_buffer(rng: random.Random, batches: int, value_max: int = 200) -> bytes:
    """Valid batches of every codec, 1-29 random records each."""
    out = []
    offset = 0
    for i in range(batches):
        n = rng.randrange(1, 30)
        records = [
            Record(
                key=None if rng.random() < 0.3 else rng.randbytes(rng.randrange(10)),
                value=rng.randbytes(rng.randrange(value_max)),
                headers=(("h", rng.randbytes(3)),) if rng.random() < 0.3 else (),
                timestamp=T + rng.randrange(-1000, 1000),
            )
            for _ in range(n)
        ]
        codec = ["none", "none", "gzip", "snappy", "lz4", "zstd"][i % 6]
        out.append(build_batch(records, base_offset=offset, compression=codec))
        offset += n + rng.randrange(3)
    return b"".join(out)


# ---------------------------------------------------------------------------
# (a) random buffers


def test_random_buffers_of_every_small_size() -> None:
    rng = random.Random(0xA11)
    for size in range(0, 101):
        for _ in range(30):
            check_scan(rng.randbytes(size), rng.choice(ALL_FLAGS))
    for _ in range(300):
        check_scan(rng.randbytes(rng.randrange(100, 8192)), rng.choice(ALL_FLAGS))


def test_random_buffers_with_plausible_headers() -> None:
    # Random bytes rarely get past the length field; give them a plausible
    # length and magic byte so the later checks are reached too.
    rng = random.Random(0xA12)
    for _ in range(2000):
        size = rng.randrange(HEADER_SIZE - 5, 400)
        buf = bytearray(rng.randbytes(size))
        if size >= 12:
            struct.pack_into(">i", buf, 8, rng.choice([size - 12, size - 12 + 1, size - 13, 49]))
        if size > 16:
            buf[16] = 2
        if size > 22 and rng.random() < 0.7:
            buf[21:23] = b"\x00\x00"
        if size > 0 and rng.random() < 0.5:
            buf[0] = 0  # non-negative base offset
        if size >= HEADER_SIZE and rng.random() < 0.5:
            struct.pack_into(">I", buf, 17, crc32c.crc32c(bytes(buf[21 : 12 + (size - 12)])))
        for flags in (CRC | RECORDS, RECORDS):
            check_scan(bytes(buf), flags)


def test_random_batches_against_the_reference() -> None:
    # Random headers and records (valid or flawed), mostly with a correct CRC,
    # 1-4 per buffer, sometimes with a random tail: the native verdict must
    # equal the reference model's in every case.
    rng = random.Random(0xA13)
    accepted = rejected_records = 0
    for _ in range(3000):
        buf = b"".join(random_batch(rng) for _ in range(rng.choice([1, 1, 2, 4])))
        if rng.random() < 0.1:
            buf += rng.randbytes(rng.randrange(1, 80))
        for flags in (DEFAULT_FLAGS, rng.choice(ALL_FLAGS)):
            state = check_scan(buf, flags)
            accepted += state.batch_count
            rejected_records += state.stop == CORRUPT
    # The generator must reach both verdicts often, or this test is weak.
    assert accepted > 1000
    assert rejected_records > 500


def test_accepted_random_batches_decode_like_the_reference() -> None:
    # Whatever the scan accepts, parse_batches yields and decodes to the
    # reference decoder's records (uncompressed batches: the record walker
    # and the decoder share rules, so acceptance must imply decodability).
    rng = random.Random(0xA14)
    decoded = 0
    for _ in range(3000):
        batch = random_batch(rng)
        state = scan(batch, DEFAULT_FLAGS)
        if state.batch_count != 1:
            with pytest.raises(CorruptRecordError):
                list(parse_batches(batch))
            continue
        (parsed,) = parse_batches(batch)
        fields = HEADER.unpack_from(batch)
        if fields[5] & 0x07:
            # A compressed section of random bytes: decoding may fail, but
            # only with CorruptRecordError.
            with contextlib.suppress(CorruptRecordError):
                parsed.records  # noqa: B018
            continue
        ref = reference_records(batch[HEADER_SIZE:], fields[12], fields[6])
        cols = parsed.columns()
        base_ts = fields[7]
        log_append = bool(fields[5] & 0x08)
        # Timestamp sums wrap around in int64 (numpy's and Java's long
        # arithmetic alike).
        assert cols.offsets.tolist() == [parsed.base_offset + r.offset_delta for r in ref]
        expected_ts = [fields[8] if log_append else _i64(base_ts + r.timestamp_delta) for r in ref]
        assert cols.timestamps.tolist() == expected_ts
        data = bytes(cols.buffer)
        for i, r in enumerate(ref):
            key_len, value_len = int(cols.key_lengths[i]), int(cols.value_lengths[i])
            assert (None if key_len < 0 else data[cols.key_positions[i] :][:key_len]) == r.key
            assert (None if value_len < 0 else data[cols.value_positions[i] :][:value_len]) == r.value
            assert int(cols.header_counts[i]) == len(r.headers)
        if all(_utf8(name) for r in ref for name, _ in r.headers):
            records = parsed.records
            assert [(x.key, x.value) for x in records] == [(r.key, r.value) for r in ref]
            assert [x.headers for x in records] == [
                tuple((name.decode(), data) for name, data in r.headers) for r in ref
            ]
            # Offsets cannot overflow (deltas are bounded by the batch); a
            # timestamp sum wraps around in int64, as Java's long does.
            assert [x.offset for x in records] == cols.offsets.tolist()
            assert [x.timestamp for x in records] == expected_ts
        else:
            with pytest.raises(CorruptRecordError):
                parsed.records  # noqa: B018
        decoded += 1
    assert decoded > 500


def _i64(value: int) -> int:
    return ((value + 2**63) % 2**64) - 2**63


def _raw_records(*offset_deltas: int) -> bytes:
    out = b""
    for delta in offset_deltas:
        body = b"\x00" + _zigzag(0) + _zigzag(delta) + _zigzag(-1) + _zigzag(1) + b"v" + _zigzag(0)
        out += _zigzag(len(body)) + body
    return out


@pytest.mark.parametrize(
    ("base_offset", "last_offset_delta", "offset_deltas"),
    [
        (2**63 - 3, 2, (0, 1, 5)),  # base + 5 = 2**63 + 2: would wrap negative
        (2**63 - 2, 1, (0, 2**31 - 1)),
        (100, 2, (0, 1, 7)),  # offset 107, beyond the batch's last offset 102
        (100, 2, (0, 2, 1)),  # out of order but inside the batch: accepted
        (100, 5, (0, 3, 5)),  # gaps, as after compaction: accepted
    ],
)
def test_record_offsets_stay_within_the_batch(
    base_offset: int, last_offset_delta: int, offset_deltas: tuple[int, ...]
) -> None:
    # The header check guards base_offset + last_offset_delta against int64
    # overflow; each record's offset delta must lie in [0, last_offset_delta]
    # (ls_api.h: a larger one is corrupt), so no record offset can leave the
    # batch's range or wrap to a negative number. A batch breaking this is
    # rejected by the scan and by both decoders.
    header = HEADER.pack(base_offset, 0, -1, 2, 0, 0, last_offset_delta, T, T, -1, -1, -1, len(offset_deltas))
    batch = seal(header, _raw_records(*offset_deltas))
    state = check_scan(batch, DEFAULT_FLAGS)
    inside = all(d <= last_offset_delta for d in offset_deltas)
    assert state.stop == (OK if inside else CORRUPT)
    # The decoders check the same on their own (compressed batches are not
    # walked by the scan): bypass the scan by decoding the batch view directly.
    (view,) = parse_batches(batch) if inside else (RecordBatch(memoryview(batch)),)
    if inside:
        expected = [base_offset + d for d in offset_deltas]
        assert view.columns().offsets.tolist() == expected
        assert [r.offset for r in view.records] == expected
    else:
        with pytest.raises(CorruptRecordError):
            view.columns()
        with pytest.raises(CorruptRecordError):
            view.records  # noqa: B018


def _utf8(data: bytes) -> bool:
    try:
        data.decode()
    except UnicodeDecodeError:
        return False
    return True


# ---------------------------------------------------------------------------
# (b) mutations of valid buffers


def _expect_mutation(buf: bytes, original: bytes, position: int, state: Any, flags: int) -> None:
    """The verdict rules for one mutated byte at ``position``."""
    for start, size in batches_of(original, len(original)):
        if start <= position < start + size:
            break
    rel = position - start
    if rel < 8 or 12 <= rel < 16:
        # Base offset and partition leader epoch are outside the CRC: the
        # batch is still good, unless the base offset turned negative (or
        # with LS_SCAN_MONOTONIC no longer increases).
        if state.stop == OK:
            assert state.bytes_valid == len(buf)
        else:
            assert state.bytes_valid in (start, start + size)
            assert state.stop in (CORRUPT, OFFSET_ERR)
        if 12 <= rel < 16:
            assert state.stop == OK
        return
    if not flags & CRC:
        return  # without the CRC check, a changed length or field may pass (see the reference)
    # Everything else is covered by the CRC or checked structurally: the scan
    # stops at this very batch, keeping every batch before it.
    assert state.bytes_valid == start
    if rel < 12:  # the length field: the batch may now run past the buffer
        assert state.stop in (CRC_ERR, CORRUPT, INCOMPLETE)
    else:
        # The magic byte, the CRC itself or a CRC-covered byte: CRC-32C
        # catches every single-byte error, unless a header check fired first.
        assert state.stop in (CRC_ERR, CORRUPT)


def test_every_single_byte_mutation_of_a_small_buffer() -> None:
    # Exhaustive: every position, every one of the 255 other byte values.
    original, _ = small_buffer()
    assert 200 < len(original) < 320
    buf = bytearray(original)
    for position in range(len(original)):
        for delta in range(1, 256):
            buf[position] = original[position] ^ delta
            mutated = bytes(buf)
            state = scan(mutated, DEFAULT_FLAGS)
            valid = state.bytes_valid
            # Accepted batches: CRCs that check out, bytes as originally
            # written outside the base offset and leader epoch.
            for start, size in batches_of(mutated, valid):
                assert (
                    crc32c.crc32c(mutated[start + 21 : start + size])
                    == struct.unpack_from(">I", mutated, start + 17)[0]
                )
                assert mutated[start + 16 : start + size] == original[start + 16 : start + size]
                assert mutated[start + 8 : start + 12] == original[start + 8 : start + 12]
            _expect_mutation(mutated, original, position, state, DEFAULT_FLAGS)
        buf[position] = original[position]


def test_single_byte_mutations_against_the_reference() -> None:
    # A sample of the exhaustive set, under every flag combination, against
    # the reference model (which also walks mutated records when the CRC
    # check is off).
    original, _ = small_buffer()
    rng = random.Random(0xB01)
    for _ in range(4000):
        buf = bytearray(original)
        position = rng.randrange(len(buf))
        buf[position] ^= rng.randrange(1, 256)
        flags = rng.choice(ALL_FLAGS)
        state = check_scan(bytes(buf), flags)
        _expect_mutation(bytes(buf), original, position, state, flags)


def test_random_mutations_of_larger_buffers() -> None:
    rng = random.Random(0xB02)
    for round_ in range(6):
        original = larger_buffer(rng, 12)
        assert scan(original, DEFAULT_FLAGS | MONOTONIC).bytes_valid == len(original)
        for _ in range(600):
            buf = bytearray(original)
            position = rng.randrange(len(buf))
            buf[position] ^= rng.randrange(1, 256)
            flags = DEFAULT_FLAGS if round_ % 2 == 0 else rng.choice(ALL_FLAGS)
            state = check_scan(bytes(buf), flags)
            _expect_mutation(bytes(buf), original, position, state, flags)
        # Bursts: several bytes in one batch, and whole-word overwrites.
        for _ in range(200):
            buf = bytearray(original)
            position = rng.randrange(len(buf) - 8)
            buf[position : position + 8] = rng.randbytes(8)
            check_scan(bytes(buf), DEFAULT_FLAGS)


# ---------------------------------------------------------------------------
# (c) truncations


@pytest.mark.parametrize("flags", [CRC | RECORDS, CRC | RECORDS | MONOTONIC, 0])
def test_every_truncation(flags: int) -> None:
    rng = random.Random(0xC01)
    small, _ = small_buffer()
    for original in (small, larger_buffer(rng, 6, value_max=20)):
        bounds = [start + size for start, size in batches_of(original, len(original))]
        for cut in range(len(original) + 1):
            state = check_scan(original[:cut], flags)
            whole = max([0, *(b for b in bounds if b <= cut)])
            assert state.bytes_valid == whole
            assert state.batch_count == sum(1 for b in bounds if b <= cut)
            assert state.stop == (OK if cut == whole else INCOMPLETE)


def test_truncation_in_parse_batches() -> None:
    original, sets = small_buffer()
    bounds = [start + size for start, size in batches_of(original, len(original))]
    for cut in range(len(original) + 1):
        whole = sum(1 for b in bounds if b <= cut)
        partial = list(parse_batches(original[:cut], allow_partial=True))
        assert len(partial) == whole
        assert [r.value for b in partial for r in b.records] == [r.value for s in sets[:whole] for r in s]
        seen = []
        if cut in (0, *bounds):
            seen = list(parse_batches(original[:cut]))
        else:
            with pytest.raises(CorruptRecordError):
                for batch in parse_batches(original[:cut]):
                    seen.append(batch)
        # The whole batches before the cut still come out before the error.
        assert len(seen) == whole


# ---------------------------------------------------------------------------
# (d) parse_batches on mutated buffers


def _parse_all(buf: bytes) -> tuple[list[Any], bool]:
    seen: list[Any] = []
    try:
        for batch in parse_batches(buf):
            seen.append(batch)
    except CorruptRecordError:
        return seen, True
    return seen, False


def test_parse_batches_on_mutated_buffers() -> None:
    rng = random.Random(0xD01)
    original = larger_buffer(rng, 8)
    good = list(parse_batches(original))
    good_records = [b.records for b in good]
    raised = 0
    for _ in range(2500):
        buf = bytearray(original)
        for _ in range(rng.choice([1, 1, 1, 2, 5])):
            buf[rng.randrange(len(buf))] ^= rng.randrange(1, 256)
        seen, failed = _parse_all(bytes(buf))
        raised += failed
        assert len(seen) <= len(good)
        for i, batch in enumerate(seen):
            raw = bytes(batch.raw)
            assert crc32c.crc32c(raw[21:]) == batch.crc
            # Only the base offset and leader epoch can differ from what was written.
            assert raw[16:] == bytes(good[i].raw)[16:]
            shift = batch.base_offset - good[i].base_offset
            assert [(r.offset - shift, r.key, r.value, r.headers) for r in batch.records] == [
                (r.offset, r.key, r.value, r.headers) for r in good_records[i]
            ]
        if not failed:
            assert sum(b.size for b in seen) == len(buf)
    assert raised > 2000


def test_resealed_mutations_decode_or_raise_corrupt() -> None:
    # A buggy producer: damaged records under a correct CRC. Uncompressed
    # batches must be rejected by the scan when the record walk fails;
    # compressed ones (not walked by the scan) must fail on decoding with
    # CorruptRecordError, never with another exception.
    rng = random.Random(0xD02)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        records = [
            Record(key=b"k%d" % i, value=b"value %d" % i * 3, headers=(("h", b"v"),), timestamp=T + i)
            for i in range(12)
        ]
        original = build_batch(records, compression=codec)
        for _ in range(500):
            buf = bytearray(original)
            position = rng.randrange(HEADER_SIZE, len(buf))
            buf[position] ^= rng.randrange(1, 256)
            resealed = seal(buf[:HEADER_SIZE], bytes(buf[HEADER_SIZE:]))
            state = check_scan(resealed, DEFAULT_FLAGS)
            try:
                (batch,) = parse_batches(resealed)
                batch.columns()
                decoded = batch.records
            except CorruptRecordError:
                continue
            assert state.stop == OK
            assert len(decoded) == len(records)


@pytest.mark.parametrize("count", [13, 2**24, 2**31 - 1])
def test_compressed_batch_with_lying_record_count_raises_corrupt(count: int) -> None:
    # The scan cannot bound the record count of a compressed batch by its
    # size, so the decoder must: a CRC-valid header claiming more records than
    # the decompressed section can hold (7 bytes at least each) is corrupt,
    # and must say so without allocating arrays for the claimed count.
    for codec in ("gzip", "snappy", "lz4", "zstd"):
        original = build_batch([b"x" * 50] * 12, compression=codec, timestamp=T)
        header = bytearray(original[:HEADER_SIZE])
        struct.pack_into(">i", header, 57, count)
        resealed = seal(header, original[HEADER_SIZE:])
        (batch,) = parse_batches(resealed)
        tracemalloc.start()
        try:
            with pytest.raises(CorruptRecordError):
                batch.columns()
            with pytest.raises(CorruptRecordError):
                batch.records  # noqa: B018
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        # The section decompresses to under 1 KiB; its arrays need far less.
        assert peak < 1 << 20, f"{codec}: {peak} bytes allocated for a {count}-record claim"


# ---------------------------------------------------------------------------
# hypothesis


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(buf=st.binary(max_size=600), flags=st.sampled_from(ALL_FLAGS))
def test_hypothesis_random_bytes(buf: bytes, flags: int) -> None:
    check_scan(buf, flags)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    values=st.lists(st.binary(max_size=40), min_size=1, max_size=6),
    codec=st.sampled_from(["none", "none", "gzip", "lz4"]),
    data=st.data(),
    reseal=st.booleans(),
)
def test_hypothesis_mutated_batches(
    values: list[bytes], codec: str, data: st.DataObject, reseal: bool
) -> None:
    keys = data.draw(st.lists(st.none() | st.binary(max_size=8), min_size=len(values), max_size=len(values)))
    first = build_batch(list(zip(keys, values, strict=True)), base_offset=5, compression=codec, timestamp=T)
    second = build_batch([b"tail"], base_offset=100, timestamp=T)
    original = first + second
    position = data.draw(st.integers(min_value=0, max_value=len(first) - 1))
    value = data.draw(st.integers(min_value=0, max_value=255).filter(lambda v: v != original[position]))
    buf = bytearray(original)
    buf[position] = value
    if reseal and position >= 21:
        buf[: len(first)] = seal(buf[:HEADER_SIZE], bytes(buf[HEADER_SIZE : len(first)]))
    mutated = bytes(buf)
    flags = data.draw(st.sampled_from(ALL_FLAGS))
    state = check_scan(mutated, flags)
    if not reseal or position < 21:
        _expect_mutation(mutated, original, position, state, flags)
    seen, _ = _parse_all(mutated)
    for batch in seen:
        assert crc32c.crc32c(bytes(batch.raw)[21:]) == batch.crc

"""Kafka record batches <-> Arrow (logstore.records.arrow, native/arrow.c).

decode_arrow is checked against the oracle: parse_batches' Record objects
(RecordBatch.records), row by row and column by column, for every codec,
headers, LogAppendTime, control batches, sparse (compacted) offsets, offset
ranges, truncated tails, corruption, max_rows and the 2 GiB column split.
encode_arrow is checked by decoding its batches, by their sizes, and by
appending them to a Log and reading them back; partitions_for_keys against
logstore._speedups.partition_for_key.
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from logstore._native import ffi, lib
from logstore._speedups import partition_for_key
from logstore.errors import CorruptRecordError, InvalidArgumentError, NativeCapacityError
from logstore.records import CODECS, Record, build_batch, parse_batches
from logstore.records import arrow as arrow_mod
from logstore.records.arrow import (
    ArrowDecoder,
    CorruptArrowError,
    decode_arrow,
    encode_arrow,
    kafka_schema,
    partitions_for_keys,
)
from logstore.records.fetch import CorruptFetchError
from logstore.records.varint import varint_bytes
from logstore.storage.log import Log
from tests.kit.batchkit import control_batch, reseal

pytestmark = pytest.mark.unit

TOPIC = "orders"
CODEC_NAMES = list(CODECS)
OFFSET_MAX = 2**63 - 1
HEADER_SIZE = 61


# --- the oracle --------------------------------------------------------------


def oracle(
    buf: bytes, start: int = 0, end: int | None = None, headers: bool = False, partition: int = 3
) -> tuple[list[dict[str, Any]], int]:
    """decode_arrow's answer from parse_batches' Record objects, in Python."""
    stop = OFFSET_MAX if end is None else end
    rows: list[dict[str, Any]] = []
    next_offset = start
    for batch in parse_batches(buf, allow_partial=True):
        if batch.base_offset >= stop:
            next_offset = stop
            break
        next_offset = max(next_offset, min(stop, batch.next_offset))
        if batch.is_control:
            continue
        kind = 1 if batch.timestamp_type == "LogAppendTime" else 0
        for r in batch.records:
            if not start <= r.offset < stop:
                continue
            assert r.timestamp is not None
            row: dict[str, Any] = {"key": r.key, "value": r.value, "topic": TOPIC, "partition": partition,
                   "offset": r.offset, "timestamp": r.timestamp * 1000, "timestampType": kind}  # fmt: skip
            if headers:
                row["headers"] = [{"key": k, "value": v} for k, v in r.headers] or None
            rows.append(row)
    return rows, next_offset


def observed(rows: pa.RecordBatch) -> list[dict[str, Any]]:
    """The rows as dicts; timestamps as int microseconds."""
    rows.validate(full=True)
    ints = rows.set_column(5, "timestamp", rows.column("timestamp").cast(pa.int64()))
    return ints.to_pylist()


def check(
    buf: bytes, start: int = 0, end: int | None = None, headers: bool = False, **kw: Any
) -> pa.RecordBatch:
    rows, next_offset = decode_arrow(buf, TOPIC, 3, start, end, include_headers=headers, **kw)
    assert rows.schema == kafka_schema(headers)
    assert (observed(rows), next_offset) == oracle(buf, start, end, headers)
    return rows


# --- batch helpers -------------------------------------------------------------


def sparse_batch(base_offset: int, deltas: list[int], last_offset_delta: int) -> bytes:
    """A batch as compaction leaves it: offset deltas with gaps (values b"v<delta>")."""
    records = bytearray()
    for delta in deltas:
        value = b"v%d" % delta
        body = (
            b"\x00"
            + varint_bytes(delta)
            + varint_bytes(delta)
            + varint_bytes(-1)
            + varint_bytes(len(value))
            + value
            + varint_bytes(0)
        )
        records += varint_bytes(len(body)) + body
    out = ffi.new("uint8_t[]", HEADER_SIZE + len(records))
    ffi.memmove(out + HEADER_SIZE, bytes(records), len(records))
    rc = lib.ls_batch_seal(out, len(out), base_offset, -1, 0, last_offset_delta, 1000, 1000 + max(deltas),
                           -1, -1, -1, len(deltas))  # fmt: skip
    assert rc == 0
    return bytes(ffi.buffer(out))


MIXED_RECORDS = [
    Record(key=None, value=b"no key", timestamp=1_000),
    Record(key=b"", value=b"empty key", timestamp=1_005),
    Record(key=b"k1", value=None, timestamp=999),
    Record(key=b"k2", value=b"", headers=[("trace", b"abc"), ("null", None), ("", b"")], timestamp=1_002),
    Record(key=b"k3", value=b"x" * 300, headers=[(f"h{i}", bytes([i])) for i in range(40)]),
    Record(key="ключ".encode(), value=b"\x00\xff", headers=[("ключ", "значение".encode())], timestamp=-5),
]


def three_batches(codec: str = "none") -> bytes:
    """Offsets 0-5 (mixed records), 6-8, 9-14."""
    return b"".join(
        [
            build_batch(MIXED_RECORDS, base_offset=0, compression=codec, timestamp=1_000),
            build_batch(
                [b"v1", (b"k", b"v2"), (None, None)], base_offset=6, compression=codec, timestamp=2_000
            ),
            build_batch(MIXED_RECORDS, base_offset=9, compression=codec, timestamp=3_000),
        ]
    )


# --- decode ----------------------------------------------------------------------


def test_schema_is_sparks_kafka_source() -> None:
    schema = kafka_schema(include_headers=True)
    assert schema.names == [
        "key",
        "value",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "timestampType",
        "headers",
    ]
    assert [str(t) for t in schema.types] == [
        "binary", "binary", "string", "int32", "int64", "timestamp[us, tz=UTC]", "int32",
        "list<item: struct<key: string, value: binary>>",
    ]  # fmt: skip
    assert kafka_schema().names == schema.names[:-1]


@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_every_codec_every_field_equals_the_oracle(codec: str, headers: bool) -> None:
    rows = check(three_batches(codec), headers=headers)
    assert rows.num_rows == 15
    assert rows.column("key").null_count == 4 and rows.column("value").null_count == 3
    if headers:
        assert rows.column("headers").null_count == 9  # records without headers: null, as Spark


def test_mixed_codecs_grow_the_columns() -> None:
    # Compressed sections are not in the header pass's estimate: each one grows the columns.
    big = [Record(key=b"k%d" % i, value=bytes(2000), headers=[("h", b"%d" % i)]) for i in range(50)]
    parts, offset = [], 0
    for codec in ["none", "zstd", "lz4", "none", "gzip", "snappy", "zstd", "none"]:
        parts.append(build_batch(big, base_offset=offset, compression=codec, timestamp=5))
        offset += len(big)
    buf = b"".join(parts)
    assert check(buf, headers=True).num_rows == 400
    assert check(buf, start=120, end=330).num_rows == 210


def test_log_append_time_gives_every_record_the_batch_max() -> None:
    buf = bytearray(three_batches())
    last = ffi.new("int64_t *")
    assert lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), 100, -1, 1_800_000_000_000, last) == 0
    rows = check(bytes(buf))
    assert set(rows.column("timestampType").to_pylist()) == {1}
    assert set(rows.column("timestamp").cast(pa.int64()).to_pylist()) == {1_800_000_000_000_000}
    assert rows.column("offset").to_pylist() == list(range(100, 115))


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_control_batches_are_skipped_but_consumed(codec: str) -> None:
    first = build_batch([b"a", b"b"], base_offset=0, compression=codec, timestamp=1)
    last = build_batch([b"c"], base_offset=3, compression=codec, timestamp=1)
    assert check(first + control_batch(2) + last).column("offset").to_pylist() == [0, 1, 3]
    rows, next_offset = decode_arrow(control_batch(2), TOPIC, 0, 2)
    assert (rows.num_rows, next_offset) == (0, 3)


def test_offset_ranges_inside_batches() -> None:
    buf = three_batches("lz4") + three_batches()[:0]
    for start in range(0, 17):
        for end in [None, *range(start, 17)]:
            check(buf, start, end, headers=True)
    # The walk stopped at a batch at `end`: the next offset is end, not the batch's.
    assert decode_arrow(buf, TOPIC, 0, 2, 6)[1] == 6
    assert decode_arrow(buf, TOPIC, 0, 2, 7)[1] == 7
    # Past everything: no rows, and never below start.
    assert decode_arrow(buf, TOPIC, 0, 40)[1] == 40


def test_sparse_offsets_of_a_compacted_batch() -> None:
    buf = sparse_batch(10, [0, 3, 7], 9) + sparse_batch(20, [1, 2], 5)
    rows = check(buf)
    assert rows.column("offset").to_pylist() == [10, 13, 17, 21, 22]
    assert decode_arrow(buf, TOPIC, 0)[1] == 26  # last offset delta, not the last record
    check(buf, 14, 21)
    assert decode_arrow(buf, TOPIC, 0, 14, 21)[1] == 21
    assert decode_arrow(buf, TOPIC, 0, 18, 19) == (decode_arrow(b"", TOPIC, 0)[0], 19)


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_a_truncated_tail_ends_the_walk_quietly(codec: str) -> None:
    buf = three_batches(codec)
    first_two = len(buf) - len(build_batch(MIXED_RECORDS, base_offset=9, compression=codec, timestamp=3_000))
    for cut in sorted({first_two, first_two + 1, first_two + 11, first_two + 12, first_two + 60,
                       first_two + 61, len(buf) - 1}):  # fmt: skip
        rows = check(buf[:cut], headers=True)
        assert rows.num_rows == 9
        assert decode_arrow(buf[:cut], TOPIC, 0)[1] == 9
    assert decode_arrow(buf[:30], TOPIC, 0, 4) == (decode_arrow(None, TOPIC, 0)[0], 4)


def test_empty_input() -> None:
    for records in [None, b"", bytearray(), memoryview(b"")]:
        rows, next_offset = decode_arrow(records, TOPIC, 1, 5, include_headers=True)
        assert (rows.num_rows, next_offset, rows.schema) == (0, 5, kafka_schema(True))


def test_a_bad_crc_names_the_batch_and_keeps_the_rows_before_it() -> None:
    buf = bytearray(three_batches())
    second = len(build_batch(MIXED_RECORDS, base_offset=0, timestamp=1_000))
    buf[buf.index(b"v1", second) + 1] ^= 0x40  # b"v1", the batch's first value, becomes b"vq"
    with pytest.raises(
        CorruptArrowError, match=r"orders \[3\]: the record batch at offset 6 .* CRC-32C"
    ) as info:
        decode_arrow(bytes(buf), TOPIC, 3, include_headers=True)
    err = info.value
    assert isinstance(err, CorruptFetchError) and isinstance(err, CorruptRecordError)
    assert (err.offset, err.next_offset, err.rows.num_rows) == (6, 6, 6)
    assert observed(err.rows) == oracle(bytes(buf[:second]), headers=True)[0]
    # Without the CRC check the flipped byte is just data.
    rows = decode_arrow(bytes(buf), TOPIC, 3, check_crc=False)[0]
    assert rows.num_rows == 15 and rows.column("value")[6].as_py() == b"vq"


def test_structural_corruption_raises_without_the_crc_check() -> None:
    good = build_batch([b"a", b"b"], base_offset=0, timestamp=1)
    # A record count the section does not hold: caught by the record walk.
    bad = reseal(build_batch([b"c", b"d"], base_offset=2, timestamp=1), record_count=3)
    with pytest.raises(CorruptArrowError, match=r"offset 2 .* malformed") as info:
        decode_arrow(good + bad, TOPIC, 0, check_crc=False)
    assert (info.value.offset, info.value.next_offset, info.value.rows.num_rows) == (2, 2, 2)
    # Garbage where a header should be (a length below the header size).
    with pytest.raises(CorruptArrowError, match="malformed"):
        decode_arrow(good + bytes(8) + struct.pack(">i", 3) + bytes(60), TOPIC, 0)


def test_a_compressed_section_that_does_not_decompress() -> None:
    batch = bytearray(build_batch([b"a" * 100, b"b" * 100], base_offset=4, compression="zstd", timestamp=1))
    batch[HEADER_SIZE + 2 :] = bytes(len(batch) - HEADER_SIZE - 2)
    with pytest.raises(CorruptArrowError, match=r"offset 4 .* does not decompress") as info:
        decode_arrow(reseal(bytes(batch)), TOPIC, 0)
    assert info.value.offset == 4


def test_max_rows_stops_after_the_batch_that_reaches_it() -> None:
    for codec in ["none", "gzip"]:
        buf = three_batches(codec)
        for max_rows, count, nxt in [(1, 6, 6), (6, 6, 6), (7, 9, 9), (9, 9, 9), (10, 15, 15), (100, 15, 15)]:
            rows, next_offset = decode_arrow(buf, TOPIC, 0, max_rows=max_rows)
            assert (rows.num_rows, next_offset) == (count, nxt)
        # Rows below start do not count.
        rows, next_offset = decode_arrow(buf, TOPIC, 0, 5, max_rows=2)
        assert (rows.num_rows, next_offset) == (4, 9)


def test_columns_split_before_2_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow_mod, "_DATA_LIMIT", 1500)
    batches = [build_batch([bytes(300)] * 2, base_offset=2 * i, timestamp=1) for i in range(5)]
    buf = b"".join(batches)
    # Capacity is checked per batch against its section size (< 700 bytes each).
    rows, next_offset = decode_arrow(buf, TOPIC, 0)
    assert (rows.num_rows, next_offset) == (4, 4)
    rows, next_offset = decode_arrow(buf, TOPIC, 0, next_offset)
    assert (rows.num_rows, next_offset) == (4, 8)
    monkeypatch.setattr(arrow_mod, "_DATA_LIMIT", 100)
    with pytest.raises(NativeCapacityError, match="more than an Arrow binary column takes"):
        decode_arrow(buf, TOPIC, 0)


def test_invalid_utf8_header_keys_are_replaced_as_java_does() -> None:
    batch = build_batch([Record(value=b"v", headers=[("ok", b"1"), ("bad?", b"2")])], timestamp=1)
    bad = reseal(batch.replace(b"bad?", b"ba\xff\xfe"))
    rows, _ = decode_arrow(bad, TOPIC, 0, include_headers=True)
    rows.validate(full=True)
    assert rows.column("headers").to_pylist() == [
        [{"key": "ok", "value": b"1"}, {"key": "ba\ufffd\ufffd", "value": b"2"}]
    ]


def test_timestamps_beyond_the_microsecond_range_saturate() -> None:
    buf = build_batch([Record(value=b"a", timestamp=2**62), Record(value=b"b", timestamp=-(2**62)),
                       Record(value=b"c", timestamp=-1)], timestamp=0)  # fmt: skip
    us = decode_arrow(buf, TOPIC, 0)[0].column("timestamp").cast(pa.int64()).to_pylist()
    assert us == [2**63 - 1, -(2**63), -1000]


def test_bad_arguments_say_what_to_pass() -> None:
    with pytest.raises(InvalidArgumentError, match="offsets are >= 0"):
        decode_arrow(b"", TOPIC, 0, -1)
    with pytest.raises(InvalidArgumentError, match="end >= start"):
        decode_arrow(b"", TOPIC, 0, 5, 4)
    with pytest.raises(InvalidArgumentError, match="max_rows"):
        decode_arrow(b"", TOPIC, 0, max_rows=0)


def test_rows_are_views_of_one_allocation_not_copies() -> None:
    buf = three_batches()
    rows, _ = decode_arrow(buf, TOPIC, 0)
    # The result owns its buffers: the input can go away.
    del buf
    assert rows.column("value").to_pylist()[6] == b"v1"


# --- ArrowDecoder: many record sets into one set of columns ------------------------

ARENA_CHOICES = [None, lib.LS_ARENA_SMALL, lib.LS_ARENA_HUGE]


def batch_bounds(buf: bytes) -> list[int]:
    """Where each batch of ``buf`` starts, and its end."""
    bounds = [0]
    for batch in parse_batches(buf):
        bounds.append(bounds[-1] + batch.size)
    return bounds


def fetch_like_sets(buf: bytes, per_set: int, partial: int) -> list[bytes]:
    """``buf`` cut as Fetch answers are: ``per_set`` whole batches, then ``partial`` bytes of
    the next one (which the next set starts with again)."""
    bounds = batch_bounds(buf)
    sets = []
    for i in range(0, len(bounds) - 1, per_set):
        end = bounds[min(i + per_set, len(bounds) - 1)]
        sets.append(buf[bounds[i] : min(end + partial, len(buf))])
    return sets


def decoder_rows(decoder: ArrowDecoder, sets: list[bytes]) -> list[dict[str, Any]]:
    for records in sets:
        decoder.add(records)
    chunks = decoder.finish()
    assert all(chunk.schema == kafka_schema(decoder.headers) and chunk.num_rows for chunk in chunks)
    return [row for chunk in chunks for row in observed(chunk)]


def many_batches(codec: str = "none") -> bytes:
    return b"".join(
        build_batch(MIXED_RECORDS, base_offset=6 * i, compression=codec, timestamp=1_000 * i)
        for i in range(9)
    )


@pytest.mark.parametrize("arena", ARENA_CHOICES)
@pytest.mark.parametrize("headers", [False, True])
@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_decoder_of_fetch_like_sets_equals_the_oracle(
    monkeypatch: pytest.MonkeyPatch, codec: str, headers: bool, arena: int | None
) -> None:
    monkeypatch.setattr(arrow_mod, "ARENA_FLAGS", arena)
    monkeypatch.setattr(arrow_mod, "_ARENA_MIN", 64)  # every column an arena, when asked for
    buf = many_batches(codec) + control_batch(54) + build_batch([b"last"], base_offset=55, timestamp=9)
    for per_set, partial in [(1, 0), (2, 30), (3, 61), (100, 0)]:
        sets = fetch_like_sets(buf, per_set, partial)
        for start, end in [(0, None), (0, 56), (4, 50), (13, 14), (55, 56), (56, None)]:
            for rows, data in [(None, None), (56, len(buf)), (1, 1)]:
                decoder = ArrowDecoder(TOPIC, 3, start, end, rows=rows, data=data, include_headers=headers)
                assert decoder_rows(decoder, sets) == oracle(buf, start, end, headers)[0], (per_set, rows)


def test_decoder_next_offsets_and_sets_read_again() -> None:
    buf = many_batches()
    bounds = batch_bounds(buf)
    decoder = ArrowDecoder(TOPIC, 3, 2, 40, rows=38)
    assert decoder.add(buf[: bounds[2]]) == 12
    assert decoder.add(buf[bounds[1] : bounds[3]]) == 18  # batch 6-11 again: its rows are not added twice
    assert decoder.add(buf[bounds[3] : bounds[3] + 20]) == 18  # no whole batch
    assert decoder.add(b"") == 18 and decoder.num_rows == 16
    assert decoder.add(buf[bounds[3] :], offset=21) == 40  # a reader that skipped ahead (data loss)
    rows = [row for chunk in decoder.finish() for row in observed(chunk)]
    expected = oracle(buf, 2, 40)[0]
    assert rows == [r for r in expected if r["offset"] < 18 or r["offset"] >= 21]
    with pytest.raises(InvalidArgumentError, match="finished"):
        decoder.add(buf)


def test_decoder_without_rows_finishes_empty() -> None:
    decoder = ArrowDecoder(TOPIC, 0, 5, 9, rows=4, data=100)
    assert decoder.finish() == []
    decoder = ArrowDecoder(TOPIC, 0, 5)
    assert decoder.add(control_batch(5)) == 6
    assert decoder.add(None) == 6
    assert decoder.finish() == []


def test_decoder_starts_a_chunk_before_2_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow_mod, "_DATA_LIMIT", 1500)
    buf = b"".join(build_batch([bytes(300)] * 2, base_offset=2 * i, timestamp=1) for i in range(5))
    for sets in [[buf], fetch_like_sets(buf, 2, 10)]:
        decoder = ArrowDecoder(TOPIC, 3, rows=10, data=len(buf))
        for records in sets:
            decoder.add(records)
        chunks = decoder.finish()
        assert [chunk.num_rows for chunk in chunks] == [4, 4, 2]
        assert [row for chunk in chunks for row in observed(chunk)] == oracle(buf)[0]
    monkeypatch.setattr(arrow_mod, "_DATA_LIMIT", 100)
    with pytest.raises(NativeCapacityError, match="more than an Arrow binary column takes"):
        ArrowDecoder(TOPIC, 3).add(buf)


def test_decoder_corruption_names_the_batch_and_keeps_the_chunks_rows() -> None:
    buf = bytearray(many_batches())
    bounds = batch_bounds(bytes(buf))
    buf[bounds[4] + 70] ^= 0x40  # inside batch 24-29
    decoder = ArrowDecoder(TOPIC, 3, 2)
    decoder.add(bytes(buf[: bounds[3]]))
    why = r"orders \[3\]: the record batch at offset 24 .* CRC-32C"
    with pytest.raises(CorruptArrowError, match=why) as info:
        decoder.add(bytes(buf[bounds[3] :]))
    assert (info.value.offset, info.value.next_offset) == (24, 24)
    assert observed(info.value.rows) == oracle(bytes(buf[: bounds[4]]), 2)[0]
    with pytest.raises(InvalidArgumentError, match="finished"):
        decoder.add(b"")


def test_decoder_bad_arguments_say_what_to_pass() -> None:
    with pytest.raises(InvalidArgumentError, match="end >= start"):
        ArrowDecoder(TOPIC, 0, 5, 4)
    with pytest.raises(InvalidArgumentError, match="counts >= 0"):
        ArrowDecoder(TOPIC, 0, rows=-1)


def test_arena_columns_are_cut_to_their_length_and_outlive_everything(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(arrow_mod, "_ARENA_MIN", 64)
    buf = many_batches()
    decoder = ArrowDecoder(TOPIC, 3, rows=10**6, data=10**8)  # reserved far past what is written
    decoder.add(buf)
    [rows] = decoder.finish()
    del decoder, buf
    for column in rows.columns:
        for buffer in column.buffers():
            assert buffer is None or buffer.size < 1 << 16  # the table keeps no reservation's size
    assert observed(rows) == oracle(many_batches())[0]
    arena = arrow_mod._Arena(10**8, np.int32, lib.LS_ARENA_SMALL)
    arena.array[:1000] = np.arange(1000)
    kept = arena.trim(1000)
    assert arena._mapped[0] == mmap.PAGESIZE and kept.tolist() == list(range(1000))


def test_arenas_map_trim_and_refuse() -> None:
    assert lib.ls_arena_map(0, 0) == ffi.NULL
    assert lib.ls_arena_trim(ffi.NULL, 10, 0) == lib.LS_ERR_ARGUMENT
    size = 5 << 20
    base = lib.ls_arena_map(size, lib.LS_ARENA_HUGE)
    assert int(ffi.cast("uintptr_t", base)) % 64 == 0
    assert lib.ls_arena_trim(base, size, size + 1) == lib.LS_ERR_ARGUMENT
    assert lib.ls_arena_trim(base, size, size) == size
    page = mmap.PAGESIZE
    ffi.buffer(base, page + 1)[:] = bytes(page + 1)
    kept = lib.ls_arena_trim(base, size, page + 1)
    assert kept == 2 * page
    assert lib.ls_arena_trim(base, kept, 0) > 0  # one page stays mapped
    lib.ls_arena_unmap(base, lib.ls_arena_trim(base, kept, 0))
    lib.ls_arena_unmap(ffi.NULL, 10)  # nothing to do


def test_released_arenas_are_kept_within_bounds_and_reused() -> None:
    lib.ls_arena_drop_cache()
    page, flags = mmap.PAGESIZE, lib.LS_ARENA_SMALL
    base = lib.ls_arena_map(10 * page, flags)
    ffi.buffer(base, 10 * page)[:] = b"x" * (10 * page)
    lib.ls_arena_release(base, 10 * page - 1, flags)  # sizes round up to pages, as mmap's do
    again = lib.ls_arena_map(10 * page, flags)
    assert again == base  # the same pages: no fresh faults
    lib.ls_arena_release(again, 10 * page, 0)  # flags 0: unmapped, not kept
    assert lib.ls_arena_drop_cache() == 0
    # Bounded: 100 MiB arenas, three released, at most 256 MiB kept.
    arenas = [lib.ls_arena_map(100 << 20, flags) for _ in range(3)]
    for arena in arenas:
        lib.ls_arena_release(arena, 100 << 20, flags)
    assert lib.ls_arena_drop_cache() == 200 << 20
    # A bigger request grows a kept arena; a smaller one takes the closest that holds it.
    small, large = lib.ls_arena_map(4 * page, flags), lib.ls_arena_map(64 * page, flags)
    lib.ls_arena_release(small, 4 * page, flags)
    lib.ls_arena_release(large, 64 * page, flags)
    assert lib.ls_arena_map(3 * page, flags) == small
    grown = lib.ls_arena_map(128 * page, flags)
    ffi.buffer(grown, 128 * page)[:] = bytes(128 * page)
    lib.ls_arena_unmap(grown, 128 * page)
    assert lib.ls_arena_drop_cache() == 0


def test_arena_bytes_are_writable_and_their_pages_come_back() -> None:
    from logstore._native import arena_bytes

    lib.ls_arena_drop_cache()
    view = arena_bytes(1 << 20)
    assert len(view) == 1 << 20 and not view.readonly
    view[:5] = b"hello"
    address = ffi.cast("uintptr_t", ffi.from_buffer(view))
    del view  # the last view: the mapping goes back to the cache
    again = arena_bytes(1 << 20)
    assert ffi.cast("uintptr_t", ffi.from_buffer(again)) == address  # the same pages, not fresh ones
    del again
    assert lib.ls_arena_drop_cache() == 1 << 20


def test_decodes_into_reused_arenas_match_fresh_ones() -> None:
    """Arenas come back dirty: every byte a column exposes must be written by its decode."""
    lib.ls_arena_drop_cache()
    first = [Record(key=b"k%d" % i, value=b"v" * 300, headers=[("h", b"x" * 100)]) for i in range(3000)]
    second = [
        Record(key=None if i % 3 else b"k", value=None if i % 5 == 0 else b"w" * (i % 7)) for i in range(3000)
    ]
    for records in (first, second, first):
        decoder = ArrowDecoder("t", 0, include_headers=True)
        for at in range(0, len(records), 500):
            decoder.add(build_batch(records[at : at + 500], base_offset=at))
        (batch,) = decoder.finish()
        assert batch.column("key").to_pylist() == [r.key for r in records]
        assert batch.column("value").to_pylist() == [r.value for r in records]
        assert batch.column("headers").to_pylist() == [
            [{"key": k, "value": v} for k, v in r.headers] or None for r in records
        ]
        del batch, decoder


def test_topic_and_partition_columns() -> None:
    for topic, n in [("", 3), ("ключ", 2), ("t", 0), ("orders", 5)]:
        topics, partitions = arrow_mod._constants(topic, 7, n)
        topics.validate(full=True)
        assert (topics.to_pylist(), partitions.to_pylist()) == ([topic] * n, [7] * n)


# --- encode ------------------------------------------------------------------------


def table_rows(
    keys: Sequence[bytes | None], values: Sequence[bytes | None], headers: Sequence[Any] | None = None
) -> list[Any]:
    return [
        (k, v, None if headers is None else headers[i])
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]


def decoded(batches: list[bytes], headers: bool = True) -> list[Any]:
    """(key, value, headers) of every row; encode_arrow's batches all start at offset 0."""
    rows, _ = decode_arrow(b"".join(batches), TOPIC, 0, include_headers=headers)
    return [(r["key"], r["value"], r.get("headers")) for r in rows.to_pylist()]


HEADERS_TYPE = kafka_schema(True).field("headers").type


def test_encode_then_decode_gives_the_rows_back() -> None:
    keys = [b"k", None, b"", "ключ".encode()]
    values = [b"v", b"", None, b"x" * 1000]
    headers = [
        None,
        [{"key": "a", "value": b"1"}, {"key": "", "value": None}],
        [],
        [{"key": "ключ", "value": b""}],
    ]
    [batch] = encode_arrow(
        pa.array(keys), pa.array(values), headers=pa.array(headers, HEADERS_TYPE), timestamps_ms=7
    )
    expected = table_rows(keys, values, [None, headers[1], None, headers[3]])  # an empty list decodes as null
    assert decoded([batch]) == expected
    [parsed] = parse_batches(batch)
    assert (parsed.base_offset, parsed.producer_id, parsed.record_count, parsed.compression) == (
        0,
        -1,
        4,
        "none",
    )
    assert [r.timestamp for r in parsed.records] == [7] * 4


def test_encode_accepts_strings_large_types_chunks_and_slices() -> None:
    values = ["a", None, "ccc", "dd", "e"]
    as_bytes = [None if v is None else v.encode() for v in values]
    for array in [pa.array(values), pa.array(values, pa.large_string()), pa.array(as_bytes, pa.large_binary()),
                  pa.chunked_array([pa.array(as_bytes[:2]), pa.array(as_bytes[2:])])]:  # fmt: skip
        assert decoded(encode_arrow(None, array)) == table_rows([None] * 5, as_bytes)
    sliced = pa.array(as_bytes).slice(1, 3)
    keys = pa.array([b"x", None, b"y", b"z"]).slice(1, 3)
    headers = pa.array(
        [None, [{"key": "h", "value": b"1"}], None, [{"key": "i", "value": None}]], HEADERS_TYPE
    )
    got = decoded(encode_arrow(keys, sliced, headers=headers.slice(1, 3)))
    assert got == [
        (None, None, [{"key": "h", "value": b"1"}]),
        (b"y", b"ccc", None),
        (b"z", b"dd", [{"key": "i", "value": None}]),
    ]


def test_encode_splits_batches_at_max_batch_bytes() -> None:
    values = [bytes([i % 256]) * (i * 7 % 300) for i in range(500)]
    batches = encode_arrow(pa.array([b"key"] * 500), pa.array(values), max_batch_bytes=4096, timestamps_ms=1)
    assert len(batches) > 10 and all(len(b) <= 4096 for b in batches)
    assert decoded(batches, headers=False) == table_rows([b"key"] * 500, values)
    first = [next(iter(parse_batches(b))) for b in batches]
    assert sum(b.record_count for b in first) == 500
    # A record larger than the limit gets a batch of its own.
    big = encode_arrow(None, pa.array([b"a", bytes(10_000), b"b"]), max_batch_bytes=1000)
    assert [next(iter(parse_batches(b))).record_count for b in big] == [1, 1, 1]
    assert len(big[1]) > 10_000


def test_encode_chunks_and_grows_its_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(arrow_mod, "_ENCODE_CHUNK", 256)
    values = [bytes(i % 50) for i in range(300)] + [bytes(5000)]
    batches = encode_arrow(None, pa.array(values), max_batch_bytes=100)
    assert decoded(batches, headers=False) == table_rows([None] * 301, values)


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_encode_compresses(codec: str) -> None:
    values = [b"value %d " % i * 20 for i in range(200)]
    stamps = np.arange(200, dtype=np.int64) * 3 - 50
    batches = encode_arrow(pa.array([b"k%d" % i for i in range(200)]), pa.array(values),
                           timestamps_ms=stamps, compression=codec, max_batch_bytes=8000)  # fmt: skip
    assert {b.compression for raw in batches for b in parse_batches(raw)} == {codec}
    rows, _ = decode_arrow(b"".join(batches), TOPIC, 0)
    assert rows.column("value").to_pylist() == values
    assert rows.column("timestamp").cast(pa.int64()).to_pylist() == (stamps * 1000).tolist()


def test_encoded_batches_append_to_a_log_and_read_back(segment_dir: str) -> None:
    keys = [b"k%d" % i if i % 3 else None for i in range(1000)]
    values = [b"v" * (i % 97) for i in range(1000)]
    headers = pa.array(
        [[{"key": "n", "value": b"%d" % i}] if i % 5 == 0 else None for i in range(1000)], HEADERS_TYPE
    )
    batches = encode_arrow(
        pa.array(keys), pa.array(values), headers=headers, max_batch_bytes=5000, timestamps_ms=9
    )
    with Log.open(segment_dir, {"segment.bytes": 20_000}) as log:
        for batch in batches:
            log.append_batch(batch)
        assert log.log_end_offset == 1000
        assert len(log.segments) > 1
        got, offset = [], 0
        for _ in range(100):
            if offset >= 1000:
                break
            rows, offset = decode_arrow(log.read(offset, 30_000).view, TOPIC, 0, offset, include_headers=True)
            got += rows.to_pylist()
    assert [r["offset"] for r in got] == list(range(1000))
    assert [(r["key"], r["value"], r["headers"]) for r in got] == table_rows(
        keys, values, headers.to_pylist()
    )


def test_encode_timestamps() -> None:
    before = decode_arrow(encode_arrow(None, pa.array([b"a"]))[0], TOPIC, 0)[0]
    assert before.column("timestamp").cast(pa.int64())[0].as_py() > 1_600_000_000_000_000  # now
    stamps = np.array([5, 2**40, -7], np.int64)
    rows = decode_arrow(encode_arrow(None, pa.array([b"a", b"b", b"c"]), timestamps_ms=stamps)[0], TOPIC, 0)[
        0
    ]
    assert rows.column("timestamp").cast(pa.int64()).to_pylist() == (stamps * 1000).tolist()
    [parsed] = parse_batches(encode_arrow(None, pa.array([b"a", b"b", b"c"]), timestamps_ms=stamps)[0])
    assert (parsed.base_timestamp, parsed.max_timestamp) == (5, 2**40)


def test_encode_nothing() -> None:
    assert encode_arrow(None, pa.array([], pa.binary())) == []


def test_encode_refuses_what_kafka_cannot_hold() -> None:
    null_key = pa.array([[{"key": None, "value": b"1"}]], HEADERS_TYPE)
    with pytest.raises(InvalidArgumentError, match=r"row 0 .* null header"):
        encode_arrow(None, pa.array([b"a"]), headers=null_key)
    null_entry = pa.array([None, [None]], HEADERS_TYPE)
    with pytest.raises(InvalidArgumentError, match="row 1"):
        encode_arrow(None, pa.array([b"a", b"b"]), headers=null_entry)
    with pytest.raises(InvalidArgumentError, match="type int64: pass binary"):
        encode_arrow(None, pa.array([1]))
    with pytest.raises(InvalidArgumentError, match="keys has 1 rows, values 2"):
        encode_arrow(pa.array([b"k"]), pa.array([b"a", b"b"]))
    with pytest.raises(InvalidArgumentError, match="headers must be"):
        encode_arrow(None, pa.array([b"a"]), headers=pa.array([b"x"]))
    with pytest.raises(InvalidArgumentError, match="timestamps_ms has shape"):
        encode_arrow(None, pa.array([b"a"]), timestamps_ms=np.zeros(2, np.int64))
    with pytest.raises(InvalidArgumentError, match="max_batch_bytes"):
        encode_arrow(None, pa.array([b"a"]), max_batch_bytes=10)
    with pytest.raises(InvalidArgumentError, match="unknown compression"):
        encode_arrow(None, pa.array([b"a"]), compression="brotli")


# --- partitions ----------------------------------------------------------------------


def test_partitions_equal_the_producers_partitioner() -> None:
    rng = np.random.default_rng(7)
    keys: list[bytes | None] = [rng.bytes(int(n)) for n in rng.integers(0, 40, 2000)]
    keys += [b"", b"a", b"ab", b"abc", b"abcd", None, "ключ".encode()]
    array = pa.array(keys, pa.binary())
    for n in [1, 2, 3, 12, 1000, 2**31 - 1]:
        expected = [-1 if k is None else partition_for_key(k, n) for k in keys]
        assert partitions_for_keys(array, n).tolist() == expected
        assert partitions_for_keys(array.slice(5, 100), n).tolist() == expected[5:105]
    assert partitions_for_keys(pa.array(["a", None]), 3).dtype == np.int32
    with pytest.raises(InvalidArgumentError, match="num_partitions=0"):
        partitions_for_keys(array, 0)
    with pytest.raises(InvalidArgumentError, match="must be an int"):
        partitions_for_keys(array, True)

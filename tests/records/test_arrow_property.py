"""Property tests of the Arrow path (logstore.records.arrow).

- decode(encode(table)) == table for random tables: null and empty keys and
  values, large values, unicode header keys, null header values, random
  timestamps, batch limits and codecs, sliced inputs.
- decode_arrow equals the oracle (parse_batches' Record objects) on random
  record sets built by build_batch, for random offset ranges and max_rows.
- Damaged record sets (a flipped byte, a cut, garbage appended) never crash
  the C walk: the answer is the oracle's rows before the damage, or
  CorruptArrowError carrying a prefix of them.
- ArrowDecoder, fed the record set cut anywhere (as Fetch answers and file
  reads cut it: whole batches, a partial one that the next piece repeats),
  with any size hints, equals the oracle over the whole set.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.records import CODECS, Record, build_batch, parse_batches
from logstore.records import arrow as arrow_mod
from logstore.records.arrow import ArrowDecoder, CorruptArrowError, decode_arrow, encode_arrow, kafka_schema

pytestmark = pytest.mark.property

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
CODEC_NAMES = list(CODECS)
HEADERS_TYPE = kafka_schema(True).field("headers").type
TOPIC = "events"

nullable_bytes = st.none() | st.binary(max_size=40) | st.binary(min_size=200, max_size=5000)
header_entry = st.fixed_dictionaries(
    {"key": st.text(max_size=10), "value": st.none() | st.binary(max_size=30)}
)
row = st.tuples(
    nullable_bytes,
    nullable_bytes,
    st.none() | st.lists(header_entry, max_size=4),
    st.integers(min_value=-(2**50), max_value=2**50),
)


def decoded_rows(batches: list[bytes]) -> list[tuple[Any, ...]]:
    rows, _ = decode_arrow(b"".join(batches), TOPIC, 0, include_headers=True)
    rows.validate(full=True)
    stamps = rows.column("timestamp").cast(pa.int64()).to_pylist()
    plain = rows.drop_columns(["timestamp"]).to_pylist()  # datetime cannot hold every int64
    return [(r["key"], r["value"], r["headers"], ts // 1000) for r, ts in zip(plain, stamps, strict=True)]


@SETTINGS
@given(
    rows=st.lists(row, max_size=60),
    max_batch_bytes=st.sampled_from([100, 1000, 1 << 20]),
    codec=st.sampled_from(CODEC_NAMES),
    skip=st.integers(min_value=0, max_value=3),
)
def test_decode_of_encode_is_the_table(
    rows: list[tuple[Any, ...]], max_batch_bytes: int, codec: str, skip: int
) -> None:
    # A leading row that is sliced away: the encoder must honour array offsets.
    padded = [(b"pad", b"pad", [{"key": "p", "value": None}], 0)] * skip + rows
    keys = pa.array([r[0] for r in padded], pa.binary()).slice(skip)
    values = pa.array([r[1] for r in padded], pa.binary()).slice(skip)
    headers = pa.array([r[2] for r in padded], HEADERS_TYPE).slice(skip)
    stamps = np.array([r[3] for r in rows], np.int64)
    batches = encode_arrow(keys, values, timestamps_ms=stamps, headers=headers,
                           max_batch_bytes=max_batch_bytes, compression=codec)  # fmt: skip
    assert all(len(list(parse_batches(b))) == 1 for b in batches)
    if codec == "none":
        assert all(
            len(b) <= max_batch_bytes or next(iter(parse_batches(b))).record_count == 1 for b in batches
        )
    # An empty header list is no headers: it decodes as null, as Spark reads it.
    expected = [(k, v, h or None, ts) for k, v, h, ts in rows]
    assert decoded_rows(batches) == expected


record = st.builds(
    Record,
    key=nullable_bytes,
    value=nullable_bytes,
    headers=st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=20)), max_size=3),
    timestamp=st.none() | st.integers(min_value=0, max_value=2**41),
)


@st.composite
def record_sets(draw: st.DrawFn) -> bytes:
    parts, offset = [], draw(st.integers(min_value=0, max_value=2**40))
    for _ in range(draw(st.integers(min_value=1, max_value=6))):
        records = draw(st.lists(record, min_size=1, max_size=8))
        codec = draw(st.sampled_from(CODEC_NAMES))
        parts.append(build_batch(records, base_offset=offset, compression=codec, timestamp=1_000))
        offset += len(records) + draw(st.integers(min_value=0, max_value=3))  # gaps, as after compaction
    return b"".join(parts)


def oracle(buf: bytes, start: int, end: int | None, headers: bool) -> tuple[list[dict[str, Any]], int]:
    stop = 2**63 - 1 if end is None else end
    rows: list[dict[str, Any]] = []
    next_offset = start
    for batch in parse_batches(buf, allow_partial=True):
        if batch.base_offset >= stop:
            next_offset = stop
            break
        next_offset = max(next_offset, min(stop, batch.next_offset))
        kind = 1 if batch.timestamp_type == "LogAppendTime" else 0
        for r in batch.records:
            if start <= r.offset < stop:
                assert r.timestamp is not None
                row: dict[str, Any] = {"key": r.key, "value": r.value, "topic": TOPIC, "partition": 2, "offset": r.offset,
                       "timestamp": r.timestamp * 1000, "timestampType": kind}  # fmt: skip
                if headers:
                    row["headers"] = [{"key": k, "value": v} for k, v in r.headers] or None
                rows.append(row)
    return rows, next_offset


def observed(rows: pa.RecordBatch) -> list[dict[str, Any]]:
    rows.validate(full=True)
    return rows.set_column(5, "timestamp", rows.column("timestamp").cast(pa.int64())).to_pylist()


@SETTINGS
@given(buf=record_sets(), data=st.data(), headers=st.booleans())
def test_decode_equals_the_oracle_for_any_range(buf: bytes, data: st.DataObject, headers: bool) -> None:
    batches = list(parse_batches(buf))
    first, last = batches[0].base_offset, batches[-1].last_offset
    start = data.draw(st.integers(min_value=max(first - 2, 0), max_value=last + 2))
    end = data.draw(st.none() | st.integers(min_value=start, max_value=last + 3))
    rows, next_offset = decode_arrow(buf, TOPIC, 2, start, end, include_headers=headers)
    assert (observed(rows), next_offset) == oracle(buf, start, end, headers)


@SETTINGS
@given(buf=record_sets(), max_rows=st.integers(min_value=1, max_value=30))
def test_max_rows_takes_whole_batches_up_to_the_one_reaching_it(buf: bytes, max_rows: int) -> None:
    rows, next_offset = decode_arrow(buf, TOPIC, 2, max_rows=max_rows)
    everything, _ = oracle(buf, 0, None, False)
    assert observed(rows) == everything[: rows.num_rows]
    taken = 0
    for batch in parse_batches(buf):
        if taken >= max_rows:
            break
        taken += batch.record_count
        expected_next = batch.next_offset
    assert (rows.num_rows, next_offset) == (taken, expected_next)


@SETTINGS
@given(buf=record_sets(), data=st.data(), check_crc=st.booleans(), headers=st.booleans())
def test_damage_never_crashes_and_never_invents_rows(
    buf: bytes, data: st.DataObject, check_crc: bool, headers: bool
) -> None:
    damaged = bytearray(buf)
    how = data.draw(st.sampled_from(["flip", "cut", "garbage"]))
    strict = True  # undamaged whole batches come out as they were, in order, and nothing else
    if how == "flip":
        at = data.draw(st.integers(min_value=0, max_value=len(buf) - 1))
        damaged[at] ^= data.draw(st.integers(min_value=1, max_value=255))
        # The CRC covers a batch from its attributes (byte 21) on, not the fields before.
        position, starts = 0, []
        for batch in parse_batches(buf):
            starts.append(position)
            position += batch.size
        strict = check_crc and not any(s <= at < s + 21 for s in starts)
    elif how == "cut":
        damaged = damaged[: data.draw(st.integers(min_value=0, max_value=len(buf) - 1))]
    else:
        damaged += data.draw(st.binary(min_size=1, max_size=200))
        strict = check_crc  # unchecked garbage may parse as a batch
    everything, _ = oracle(buf, 0, None, headers)
    try:
        rows, _ = decode_arrow(bytes(damaged), TOPIC, 2, include_headers=headers, check_crc=check_crc)
    except CorruptArrowError as exc:
        rows = exc.rows
    got = observed(rows)
    if strict:
        assert got == everything[: len(got)]
    else:
        assert rows.num_rows <= len(damaged) // 7  # a record takes 7 bytes at least


@SETTINGS
@given(buf=record_sets(), data=st.data(), headers=st.booleans())
def test_decoder_over_any_cuts_equals_the_oracle(buf: bytes, data: st.DataObject, headers: bool) -> None:
    batches = list(parse_batches(buf))
    first, last = batches[0].base_offset, batches[-1].last_offset
    start = data.draw(st.integers(min_value=max(first - 2, 0), max_value=last + 2))
    end = data.draw(st.none() | st.integers(min_value=start, max_value=last + 3))
    rows = data.draw(st.none() | st.integers(min_value=0, max_value=60))
    size = data.draw(st.none() | st.integers(min_value=0, max_value=len(buf) + 10))
    arena = data.draw(st.sampled_from([None, 2]))  # Arrow's pool, or base-page arenas (LS_ARENA_SMALL)
    minimum = data.draw(st.sampled_from([1, 1 << 18]))  # every column an arena, or the real threshold
    decoder = ArrowDecoder(TOPIC, 2, start, end, rows=rows, data=size, include_headers=headers)
    position, at = 0, 0
    saved = arrow_mod.ARENA_FLAGS, arrow_mod._ARENA_MIN
    arrow_mod.ARENA_FLAGS, arrow_mod._ARENA_MIN = arena, minimum
    try:
        # Each piece ends anywhere; the next starts at the first batch not wholly in it.
        for _ in range(len(batches) + 1):
            if position >= len(buf):
                break
            cut = data.draw(st.integers(min_value=position + 1, max_value=len(buf)))
            decoder.add(buf[position:cut])
            while at < len(batches) and sum(b.size for b in batches[: at + 1]) <= cut:
                at += 1
            position = sum(b.size for b in batches[:at])
        decoder.add(buf[position:])  # the rest, whole
        chunks = decoder.finish()
    finally:
        arrow_mod.ARENA_FLAGS, arrow_mod._ARENA_MIN = saved
    got = [row for chunk in chunks for row in observed(chunk)]
    assert got == oracle(buf, start, end, headers)[0]

"""Property tests: build_batch then parse_batches gives the records back.

Arbitrary mixes of Records, plain byte values and (key, value) pairs, under
every codec and many base offsets; the numpy columns must agree with the
Record objects decoded from the same batch.
"""

from __future__ import annotations

import struct
from typing import Any

import crc32c
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.errors import InvalidArgumentError
from logstore.records import CODECS, Record, RecordBatch, build_batch, parse_batches

pytestmark = pytest.mark.property

CODEC_NAMES = list(CODECS)
MAX_TS = 2**40

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])

nullable_bytes = st.none() | st.binary(max_size=64) | st.binary(min_size=100, max_size=3000)
header = st.tuples(st.text(max_size=12), st.none() | st.binary(max_size=80))
timestamps = st.integers(min_value=0, max_value=MAX_TS)
base_offsets = st.integers(min_value=0, max_value=2**40) | st.sampled_from(
    [0, 1, 2**31 - 1, 2**31, 2**32, 2**62]
)

records_st = st.builds(
    Record,
    key=nullable_bytes,
    value=nullable_bytes,
    headers=st.lists(header, max_size=3),
    timestamp=st.none() | timestamps,
)
plain_st = st.binary(max_size=300) | st.binary(max_size=300).map(bytearray)
pair_st = st.tuples(nullable_bytes, nullable_bytes)
record_like = st.one_of(records_st, plain_st, pair_st)


def expected_records(items: list[Any], base_offset: int, batch_timestamp: int) -> list[Record]:
    """What reading back must give: offsets assigned, missing timestamps filled."""
    out = []
    for i, item in enumerate(items):
        if isinstance(item, Record):
            key, value, headers, ts = item.key, item.value, item.headers, item.timestamp
        elif isinstance(item, tuple):
            (key, value), headers, ts = item, (), None
        else:
            key, value, headers, ts = None, item, (), None
        out.append(
            Record(
                key=None if key is None else bytes(key),
                value=None if value is None else bytes(value),
                headers=headers,
                timestamp=batch_timestamp if ts is None else ts,
                offset=base_offset + i,
            )
        )
    return out


def check_batch(batch: RecordBatch, expected: list[Record], codec: str) -> None:
    assert batch.compression == codec
    assert batch.record_count == len(expected)
    assert batch.base_offset == expected[0].offset
    assert batch.last_offset == expected[-1].offset
    assert batch.next_offset == expected[-1].offset + 1
    assert batch.base_timestamp == expected[0].timestamp
    assert batch.max_timestamp == max(r.timestamp for r in expected)  # type: ignore[type-var]
    assert batch.timestamp_type == "CreateTime"
    raw = bytes(batch.raw)
    assert len(raw) == batch.size
    assert struct.unpack_from(">I", raw, 17)[0] == batch.crc == crc32c.crc32c(raw[21:])
    records = batch.records
    assert records == expected
    check_columns(batch, records)


def _slice(buffer: bytes, position: int, length: int) -> bytes | None:
    return None if length < 0 else buffer[position : position + length]


def check_columns(batch: RecordBatch, records: list[Record]) -> None:
    """columns() must describe exactly the records .records returns."""
    cols = batch.columns()
    assert len(cols) == len(records) == batch.record_count
    assert cols.offsets.dtype == np.int64 and cols.timestamps.dtype == np.int64
    for array in (cols.key_positions, cols.key_lengths, cols.value_positions, cols.value_lengths):
        assert array.dtype == np.int32
    assert cols.offsets.tolist() == [r.offset for r in records]
    assert cols.timestamps.tolist() == [r.timestamp for r in records]
    data = bytes(cols.buffer)
    assert data == bytes(batch.records_section())
    assert cols.key_lengths.tolist() == [-1 if r.key is None else len(r.key) for r in records]
    assert cols.value_lengths.tolist() == [-1 if r.value is None else len(r.value) for r in records]
    assert cols.header_counts.tolist() == [len(r.headers) for r in records]
    first = 0
    for i, record in enumerate(records):
        assert _slice(data, int(cols.key_positions[i]), int(cols.key_lengths[i])) == record.key
        assert _slice(data, int(cols.value_positions[i]), int(cols.value_lengths[i])) == record.value
        if record.headers:
            assert int(cols.header_first[i]) == first
        for h, (name, value) in enumerate(record.headers):
            slot = first + h
            key_bytes = _slice(data, int(cols.header_key_positions[slot]), int(cols.header_key_lengths[slot]))
            assert key_bytes == name.encode()
            value_bytes = _slice(
                data, int(cols.header_value_positions[slot]), int(cols.header_value_lengths[slot])
            )
            assert value_bytes == value
        first += len(record.headers)


@SETTINGS
@given(
    items=st.lists(record_like, min_size=1, max_size=20),
    codec=st.sampled_from(CODEC_NAMES),
    base_offset=base_offsets,
    batch_timestamp=timestamps,
)
def test_mixed_records_round_trip(
    items: list[Any], codec: str, base_offset: int, batch_timestamp: int
) -> None:
    batch = build_batch(items, base_offset=base_offset, compression=codec, timestamp=batch_timestamp)
    (parsed,) = parse_batches(batch)
    assert parsed.size == len(batch)
    check_batch(parsed, expected_records(items, base_offset, batch_timestamp), codec)


@SETTINGS
@given(
    values=st.lists(st.binary(max_size=200), min_size=1, max_size=200),
    codec=st.sampled_from(CODEC_NAMES),
    base_offset=base_offsets,
    batch_timestamp=timestamps,
)
def test_plain_values_fast_path_round_trip(
    values: list[bytes], codec: str, base_offset: int, batch_timestamp: int
) -> None:
    fast = build_batch(values, base_offset=base_offset, compression=codec, timestamp=batch_timestamp)
    # The same values through the general path must give the very same bytes.
    general = build_batch(
        [Record(value=v) for v in values],
        base_offset=base_offset,
        compression=codec,
        timestamp=batch_timestamp,
    )
    assert fast == general
    assert fast == build_batch(
        tuple(values), base_offset=base_offset, compression=codec, timestamp=batch_timestamp
    )
    (parsed,) = parse_batches(fast)
    check_batch(parsed, expected_records(list(values), base_offset, batch_timestamp), codec)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(
        st.tuples(
            st.lists(record_like, min_size=1, max_size=8),
            st.sampled_from(CODEC_NAMES),
            st.integers(min_value=0, max_value=1000),
        ),
        min_size=1,
        max_size=6,
    ),
    start=st.integers(min_value=0, max_value=2**40),
    batch_timestamp=timestamps,
)
def test_concatenated_batches_round_trip(
    batches: list[tuple[list[Any], str, int]], start: int, batch_timestamp: int
) -> None:
    buf = b""
    expected: list[tuple[list[Record], str]] = []
    offset = start
    for items, codec, gap in batches:
        buf += build_batch(items, base_offset=offset, compression=codec, timestamp=batch_timestamp)
        expected.append((expected_records(items, offset, batch_timestamp), codec))
        offset += len(items) + gap
    parsed = list(parse_batches(buf))
    assert len(parsed) == len(expected)
    assert sum(b.size for b in parsed) == len(buf)
    for batch, (records, codec) in zip(parsed, expected, strict=True):
        check_batch(batch, records, codec)
    # A torn tail: allow_partial stops quietly after the whole batches.
    cut = buf[: len(buf) - 1]
    assert [b.base_offset for b in parse_batches(cut, allow_partial=True)] == [
        b.base_offset for b in parsed[:-1]
    ]


@SETTINGS
@given(
    items=st.lists(records_st, min_size=1, max_size=10),
    codec=st.sampled_from(CODEC_NAMES),
    producer_id=st.integers(min_value=-1, max_value=2**63 - 1),
    producer_epoch=st.integers(min_value=-1, max_value=2**15 - 1),
    base_sequence=st.integers(min_value=-1, max_value=2**31 - 1),
    partition_leader_epoch=st.integers(min_value=-1, max_value=2**31 - 1),
    transactional=st.booleans(),
)
def test_header_fields_round_trip(
    items: list[Record],
    codec: str,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    transactional: bool,
) -> None:
    batch = build_batch(
        items,
        compression=codec,
        timestamp=1_000,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        partition_leader_epoch=partition_leader_epoch,
        transactional=transactional,
    )
    (parsed,) = parse_batches(batch)
    assert parsed.producer_id == producer_id
    assert parsed.producer_epoch == producer_epoch
    assert parsed.base_sequence == base_sequence
    assert parsed.partition_leader_epoch == partition_leader_epoch
    assert parsed.is_transactional == transactional
    assert not parsed.is_control
    assert parsed.attributes == CODECS[codec] | (0x10 if transactional else 0)
    check_batch(parsed, expected_records(items, 0, 1_000), codec)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    header_lists=st.lists(st.lists(header, min_size=28, max_size=40), min_size=1, max_size=4),
    codec=st.sampled_from(CODEC_NAMES),
)
def test_many_headers_round_trip(header_lists: list[list[tuple[str, bytes | None]]], codec: str) -> None:
    # Around 32 headers per record: decoders may keep a fixed number of
    # header slots and take another path beyond it.
    items = [Record(value=b"v%d" % i, headers=h, timestamp=5) for i, h in enumerate(header_lists)]
    (parsed,) = parse_batches(build_batch(items, base_offset=3, compression=codec))
    check_batch(parsed, expected_records(items, 3, 5), codec)


# ---------------------------------------------------------------------------
# Arguments: both paths (plain bytes in C, Records through cffi) must agree on
# what they reject, as they agree on the bytes of what they accept.

PATHS: dict[str, list[Any]] = {"fast": [b"x", b"y"], "general": [Record(value=b"x"), Record(value=b"y")]}


@pytest.mark.parametrize("path", list(PATHS))
def test_empty_and_unknown_codec_rejected(path: str) -> None:
    with pytest.raises(InvalidArgumentError):
        build_batch([], timestamp=1)
    with pytest.raises(InvalidArgumentError):
        build_batch((), timestamp=1, compression="gzip")
    for name in ("LZ4", "brotli", "", "gzip "):
        with pytest.raises(InvalidArgumentError):
            build_batch(PATHS[path], timestamp=1, compression=name)


@pytest.mark.parametrize(
    "field",
    [
        {"producer_epoch": 2**15},
        {"producer_epoch": -(2**15) - 1},
        {"producer_epoch": 40_000},
        {"base_sequence": 2**31},
        {"partition_leader_epoch": 2**31},
        {"base_offset": 2**63},
        {"producer_id": 2**63},
    ],
)
@pytest.mark.parametrize("path", list(PATHS))
def test_out_of_range_header_fields_rejected_not_truncated(path: str, field: dict[str, int]) -> None:
    # A value that does not fit its header field must raise InvalidArgumentError
    # naming the field; silently writing a truncated value (40000 as producer
    # epoch -25536) would produce a batch that says something else than asked.
    (name, _) = next(iter(field.items()))
    with pytest.raises(InvalidArgumentError, match=name):
        build_batch(PATHS[path], timestamp=1, **field)  # type: ignore[arg-type]


@pytest.mark.parametrize("path", list(PATHS))
def test_negative_base_offset_is_invalid_argument(path: str) -> None:
    # errors.py: every error of logstore derives from LogstoreError; an
    # argument out of range is InvalidArgumentError, on either path.
    with pytest.raises(InvalidArgumentError):
        build_batch(PATHS[path], timestamp=1, base_offset=-1)

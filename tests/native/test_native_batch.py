"""The native batch functions: offset assignment, searches, spans, argument checks."""

from __future__ import annotations

import crc32c
import pytest

from logstore._native import check, ffi, lib
from logstore.errors import CorruptRecordError, InvalidArgumentError, OffsetOutOfRangeError
from logstore.records import build_batch, parse_batches
from logstore.records.batch import scan

pytestmark = pytest.mark.unit


def three_batches() -> bytearray:
    return bytearray(
        build_batch([b"a", b"b"], timestamp=100)
        + build_batch([b"c"], timestamp=300, compression="gzip")
        + build_batch([(b"k", b"d"), (b"k", b"e"), (None, b"f")], timestamp=200)
    )


def test_assign_offsets_in_place_keeps_crc_valid() -> None:
    buf = three_batches()
    last = ffi.new("int64_t *")
    check(lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), 1000, 7, -1, last))
    assert last[0] == 1005
    batches = list(parse_batches(buf))
    assert [(b.base_offset, b.last_offset) for b in batches] == [(1000, 1001), (1002, 1002), (1003, 1005)]
    assert {b.partition_leader_epoch for b in batches} == {7}
    assert [r.offset for b in batches for r in b.records] == list(range(1000, 1006))


def test_assign_offsets_with_log_append_time_restamps_and_recomputes_crc() -> None:
    buf = three_batches()
    last = ffi.new("int64_t *")
    check(lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), 0, 0, 99_999, last))
    for b in parse_batches(buf):  # parse_batches checks every CRC
        assert b.timestamp_type == "LogAppendTime" and b.max_timestamp == 99_999
        assert {r.timestamp for r in b.records} == {99_999}
        raw = bytes(b.raw)
        assert int.from_bytes(raw[17:21], "big") == crc32c.crc32c(raw[21:])


def test_assign_offsets_rejects_a_partial_buffer() -> None:
    buf = three_batches()[:-1]
    last = ffi.new("int64_t *")
    assert lib.ls_assign_offsets(ffi.from_buffer(buf), len(buf), 0, 0, -1, last) == lib.LS_ERR_INCOMPLETE


def test_search_by_offset_and_timestamp() -> None:
    buf = bytes(three_batches())
    last = ffi.new("int64_t *")
    work = bytearray(buf)
    check(lib.ls_assign_offsets(ffi.from_buffer(work), len(work), 10, 0, -1, last))
    sizes = [b.size for b in parse_batches(work)]
    out = ffi.new("int64_t[2]")
    ptr = ffi.from_buffer(work)
    expectations = {0: 0, 10: 0, 11: 0, 12: sizes[0], 13: sizes[0] + sizes[1], 15: sizes[0] + sizes[1]}
    for offset, position in expectations.items():
        check(lib.ls_search_offset(ptr, len(work), 0, offset, out, out + 1))
        assert out[0] == position
    assert lib.ls_search_offset(ptr, len(work), 0, 16, out, out + 1) == lib.LS_ERR_NOT_FOUND
    # Max timestamps are 100, 300, 200: the first batch reaching 250 is the second.
    check(lib.ls_search_timestamp(ptr, len(work), 0, 250, out, out + 1))
    assert out[0] == sizes[0] and out[1] == sizes[1]
    assert lib.ls_search_timestamp(ptr, len(work), 0, 301, out, out + 1) == lib.LS_ERR_NOT_FOUND


def test_span_batches_takes_at_least_one_and_only_whole_ones() -> None:
    buf = bytes(three_batches())
    sizes = [b.size for b in parse_batches(buf)]
    out = ffi.new("int64_t[2]")
    ptr = ffi.from_buffer(buf)
    check(lib.ls_span_batches(ptr, len(buf), 0, 1, out, out + 1))
    assert (out[0], out[1]) == (sizes[0], 1)
    check(lib.ls_span_batches(ptr, len(buf), 0, sizes[0] + sizes[1] + 5, out, out + 1))
    assert (out[0], out[1]) == (sizes[0] + sizes[1], 2)
    check(lib.ls_span_batches(ptr, len(buf), sizes[0], 1 << 30, out, out + 1))
    assert out[0] == len(buf) - sizes[0]


def test_scan_reports_what_it_saw() -> None:
    buf = bytes(three_batches())
    state = scan(buf)
    assert state.stop == 0 and state.bytes_valid == len(buf)
    assert state.batch_count == 3 and state.record_count == 6
    assert state.timestamp_max == 300
    # Offsets all start at 0 in unassigned batches: monotonic scanning refuses them.
    strict = scan(buf, lib.LS_SCAN_CRC | lib.LS_SCAN_MONOTONIC)
    assert strict.batch_count == 1 and strict.stop == lib.LS_ERR_OFFSET


def test_bad_arguments_are_errors_not_crashes() -> None:
    out = ffi.new("int64_t[2]")
    assert lib.ls_search_offset(ffi.NULL, 10, 0, 0, out, out + 1) == lib.LS_ERR_ARGUMENT
    assert lib.ls_span_batches(ffi.from_buffer(b"x" * 10), 10, 11, 1, out, out + 1) == lib.LS_ERR_ARGUMENT
    buf = bytearray(100)
    assert lib.ls_batch_seal(ffi.from_buffer(buf), 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1) == lib.LS_ERR_ARGUMENT
    assert lib.ls_batch_seal(ffi.from_buffer(buf), 100, 0, 0, 7, 0, 0, 0, 0, 0, 0, 1) == lib.LS_ERR_ARGUMENT


@pytest.mark.parametrize(
    ("rc", "exc"),
    [
        (lib.LS_ERR_CRC, CorruptRecordError),
        (lib.LS_ERR_INCOMPLETE, CorruptRecordError),
        (lib.LS_ERR_ARGUMENT, InvalidArgumentError),
        (lib.LS_ERR_NOT_FOUND, OffsetOutOfRangeError),
    ],
)
def test_return_codes_map_to_exceptions_with_hints(rc: int, exc: type[Exception]) -> None:
    with pytest.raises(exc) as info:
        check(rc, "reading segment 7")
    assert "reading segment 7" in str(info.value)

"""OffsetIndex and TimeIndex: lookups in C against numpy.searchsorted, files, closing."""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore._native import ffi, lib
from logstore.errors import ClosedError, CorruptIndexError, InvalidArgumentError
from logstore.storage.index import IndexFullError, OffsetIndex, TimeIndex

pytestmark = pytest.mark.unit


def oracle_slot(keys: np.ndarray, target: int) -> int:
    """The last slot whose key <= target, or -1: the definition of a lookup."""
    return int(np.searchsorted(keys, target, side="right")) - 1


def offset_entries(relative: np.ndarray, positions: np.ndarray) -> bytes:
    dtype = OffsetIndex.DTYPE
    arr = np.empty(len(relative), dtype)
    arr["offset"], arr["position"] = relative, positions
    return arr.tobytes()


def time_entries(stamps: np.ndarray, offsets: np.ndarray) -> bytes:
    arr = np.empty(len(stamps), TimeIndex.DTYPE)
    arr["timestamp"], arr["offset"] = stamps, offsets
    return arr.tobytes()


@pytest.mark.parametrize("count", [0, 1, 2, 3, 1023, 1024, 1025, 3000])
def test_offset_lookup_exhaustive_against_searchsorted(count: int) -> None:
    rng = np.random.default_rng(count)
    relative = np.cumsum(rng.integers(1, 5, count)).astype(np.uint32)
    raw = offset_entries(relative, np.arange(1, count + 1, dtype=np.uint32) * 100)
    ptr = ffi.from_buffer(raw)
    top = int(relative[-1]) + 3 if count else 5
    for target in range(top):  # every offset, between and around the entries
        got = lib.ls_offset_index_lookup(ptr, count, target)
        assert got == oracle_slot(relative, target), target


@pytest.mark.parametrize("count", [0, 1, 682, 683, 684, 2500])
def test_time_lookup_exhaustive_against_searchsorted(count: int) -> None:
    rng = np.random.default_rng(count)
    stamps = (np.cumsum(rng.integers(1, 4, count)) - 50).astype(np.int64)
    raw = time_entries(stamps, np.arange(count, dtype=np.uint32))
    ptr = ffi.from_buffer(raw)
    lo = int(stamps[0]) - 3 if count else -3
    hi = int(stamps[-1]) + 3 if count else 3
    for target in range(lo, hi):
        assert lib.ls_time_index_lookup(ptr, count, target) == oracle_slot(stamps, target), target


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 2**20), min_size=0, max_size=3000),
    targets=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=50),
)
def test_offset_lookup_property(gaps: list[int], targets: list[int]) -> None:
    relative = np.cumsum(np.array(gaps, dtype=np.int64))
    relative = relative[relative <= 2**32 - 1].astype(np.uint32)
    raw = offset_entries(relative, np.arange(1, len(relative) + 1, dtype=np.uint32))
    ptr = ffi.from_buffer(raw) if len(raw) else ffi.NULL
    for target in targets + [int(x) for x in relative[:5]]:
        assert lib.ls_offset_index_lookup(ptr, len(relative), target) == oracle_slot(relative, target)


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(st.integers(1, 2**40), min_size=0, max_size=2000),
    start=st.integers(-(2**50), 2**50),
    targets=st.lists(st.integers(-(2**52), 2**52), min_size=1, max_size=50),
)
def test_time_lookup_property(gaps: list[int], start: int, targets: list[int]) -> None:
    stamps = start + np.cumsum(np.array(gaps, dtype=np.int64))
    raw = time_entries(stamps, np.zeros(len(stamps), np.uint32))
    ptr = ffi.from_buffer(raw) if len(raw) else ffi.NULL
    for target in targets + [int(x) for x in stamps[-3:]]:
        assert lib.ls_time_index_lookup(ptr, len(stamps), target) == oracle_slot(stamps, target)


def test_offset_index_file_format_and_trim(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "00000000000000000100.index")
    idx = OffsetIndex(path, base_offset=100, max_index_size=1000, writable=True)
    assert os.path.getsize(path) == 1000 - 1000 % 8  # preallocated
    idx.append(110, 4200)
    idx.append(130, 9000)
    assert idx.lookup(129) == (110, 4200)
    assert idx.lookup(99) == (100, 0)
    idx.close()
    # Trimmed to its entries, Kafka's big-endian (relative offset, position).
    with open(path, "rb") as f:
        assert f.read() == bytes.fromhex("0000000a000010680000001e00002328")
    reopened = OffsetIndex(path, base_offset=100, max_index_size=1000, writable=False)
    assert reopened.entries == 2 and reopened.lookup(10**6) == (130, 9000)
    reopened.close()


def test_preallocated_index_reopened_after_crash_counts_live_entries(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "0.index")
    idx = OffsetIndex(path, base_offset=0, max_index_size=800, writable=True)
    for i in range(1, 6):
        idx.append(i * 10, i * 5000)
    idx.flush()
    del idx  # no close: the file stays preallocated, as after kill -9
    assert os.path.getsize(path) == 800
    again = OffsetIndex(path, base_offset=0, max_index_size=800, writable=True)
    assert again.entries == 5
    assert again.lookup(35) == (30, 15000)
    again.close()


def test_offset_index_rejects_disorder_and_fills(tmp_path: os.PathLike[str]) -> None:
    idx = OffsetIndex(os.path.join(tmp_path, "0.index"), base_offset=0, max_index_size=16, writable=True)
    idx.append(5, 100)
    with pytest.raises(InvalidArgumentError):
        idx.append(5, 200)
    with pytest.raises(InvalidArgumentError):
        idx.append(6, 100)
    idx.append(6, 200)
    assert idx.is_full
    with pytest.raises(IndexFullError):
        idx.append(7, 300)
    idx.close()


def test_truncate_to_like_kafka(tmp_path: os.PathLike[str]) -> None:
    idx = OffsetIndex(os.path.join(tmp_path, "0.index"), base_offset=0, max_index_size=800, writable=True)
    for i in range(1, 11):
        idx.append(i * 10, i * 1000)
    idx.truncate_to(50)  # removes the entry for 50 and above
    assert idx.entries == 4 and idx.last_entry() == (40, 4000)
    idx.truncate_to(35)
    assert idx.entries == 3
    idx.append(45, 5000)  # room again after truncation
    assert idx.lookup(47) == (45, 5000)
    idx.close()

    tidx = TimeIndex(os.path.join(tmp_path, "0.timeindex"), base_offset=0, max_index_size=240, writable=True)
    for i in range(1, 8):
        tidx.maybe_append(i * 100, i * 10)
    tidx.truncate_to(40)
    assert tidx.entries == 3 and tidx.last_entry() == (300, 30)
    tidx.close()


def test_time_index_only_appends_larger_timestamps(tmp_path: os.PathLike[str]) -> None:
    tidx = TimeIndex(os.path.join(tmp_path, "0.timeindex"), base_offset=10, max_index_size=120, writable=True)
    tidx.maybe_append(500, 20)
    tidx.maybe_append(400, 30)
    tidx.maybe_append(500, 40)
    tidx.maybe_append(600, 50)
    assert tidx.entries == 2
    assert tidx.lookup(599) == (500, 20) and tidx.lookup(10**12) == (600, 50)
    assert tidx.lookup(0) == (-1, 10)
    tidx.close()


def test_closed_index_raises_instead_of_touching_the_map(tmp_path: os.PathLike[str]) -> None:
    idx = OffsetIndex(os.path.join(tmp_path, "0.index"), base_offset=0, max_index_size=80, writable=True)
    idx.append(1, 100)
    idx.close()
    idx.close()  # idempotent
    for call in (lambda: idx.lookup(1), lambda: idx.append(2, 200), idx.flush, lambda: idx.entry(0)):
        with pytest.raises(ClosedError):
            call()


def test_damaged_index_size_is_detected(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "0.index")
    with open(path, "wb") as f:
        f.write(b"\x00" * 13)  # not a multiple of 8
    with pytest.raises(CorruptIndexError):
        OffsetIndex(path, base_offset=0, max_index_size=80, writable=False)


def test_time_index_verify_catches_disorder(tmp_path: os.PathLike[str]) -> None:
    path = os.path.join(tmp_path, "0.timeindex")
    with open(path, "wb") as f:
        f.write(time_entries(np.array([5, 9, 7], np.int64), np.array([1, 2, 3], np.uint32)))
    tidx = TimeIndex(path, base_offset=0, max_index_size=120, writable=False)
    with pytest.raises(CorruptIndexError):
        tidx.verify(offset_max=100)
    tidx.close()

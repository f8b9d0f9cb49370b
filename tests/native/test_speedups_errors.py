"""The failures logstore._speedups reports: one table, one class and hint per code.

``_speedups.ERRORS`` (code -> name, class, hint) is native/speedups_errors.c's table.
Every code has inputs here that raise it, each checked for the table's class
and a message ending in the table's hint; a code without a case fails
:func:`test_every_code_has_a_case`. Then the callers in logstore.records that
used to re-wrap bare ValueErrors, and the conventions that stay Python's own
(TypeError for a wrong type, OverflowError for an int outside its C type).
"""

from __future__ import annotations

import mmap
import struct
import tempfile
from collections.abc import Callable

import pytest

from logstore import _speedups
from logstore._native import crc32c, lib
from logstore.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    LogstoreError,
    MappedReadError,
    RecordDecodeError,
)
from logstore.records import Record, RecordBatch, build_batch
from logstore.records.fetch import CorruptFetchError, decode_fetch

pytestmark = pytest.mark.unit

TOPIC = "orders"
_POS_CRC, _POS_ATTRIBUTES, _POS_RECORD_COUNT = 17, 21, 57
HEADER = lib.LS_BATCH_HEADER_SIZE


def resealed(batch: bytes, *, record_count: int | None = None, at: int | None = None) -> bytes:
    """The batch with its record count changed, or byte ``at`` flipped, and its CRC redone."""
    b = bytearray(batch)
    if record_count is not None:
        struct.pack_into(">i", b, _POS_RECORD_COUNT, record_count)
    if at is not None:
        b[at] ^= 0xFF
    struct.pack_into(">I", b, _POS_CRC, crc32c(bytes(b[_POS_ATTRIBUTES:])))
    return bytes(b)


PLAIN = build_batch([b"a" * 10, b"b" * 10], base_offset=5, timestamp=1)
SECTION = memoryview(PLAIN)[HEADER:]
# CRC-valid batches whose records are wrong: one record more than there are,
# and a header name that is not UTF-8 (the builder takes bytes names as they are).
COUNT_TOO_HIGH = resealed(PLAIN, record_count=3)
BAD_HEADER_NAME = build_batch(
    [Record(value=b"v", headers=[(b"\xff\xfe", b"x")])],  # type: ignore[list-item]
    base_offset=9,
    timestamp=1,
)
CRC_FAILS = bytes(PLAIN[:-1]) + bytes([PLAIN[-1] ^ 1])  # a value byte; the header scan still passes


def decode_records(section: bytes | memoryview, count: int, delta_max: int, base_offset: int = 5) -> object:
    return _speedups.decode_records(section, count, delta_max, base_offset, 1, False, 1)


def decode_messages(section: bytes | memoryview, count: int, delta_max: int, base_offset: int = 5) -> object:
    return _speedups.decode_messages(section, count, delta_max, base_offset, 1, False, 1, 1, TOPIC, 0, 0)


def record_at(log: bytes, offset: int, index: bytes = b"", index_count: int = 0) -> object:
    base = struct.unpack_from(">q", log, 0)[0]
    return _speedups.record_at(log, index, index_count, base, offset, {})


def record_at_cut_map(offset: int) -> object:
    """record_at over the map of a file cut to nothing under it: its pages raise SIGBUS, which the
    guard (native/guard.c) turns into the MAPPED_READ error."""
    with tempfile.TemporaryFile() as f:
        f.write(PLAIN * (8192 // len(PLAIN) + 1))
        f.flush()
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as log:
            f.truncate(0)
            return _speedups.record_at(log, b"", 0, 5, offset, {})


Case = tuple[str, Callable[[], object], str]

# (code name, the call that fails, what the message says before the hint)
CASES: list[Case] = [
    ("BATCH_CORRUPT", lambda: record_at(CRC_FAILS, 5), r"the batch at byte 0 \(offsets 5 to 6\) failed its CRC-32C"),
    ("RECORD_MALFORMED", lambda: decode_records(SECTION, 3, 2), "record 2 of the batch at offset 5 is malformed: the records section ends before it"),
    ("RECORD_MALFORMED", lambda: decode_records(SECTION, 2, 0), "record 1 of the batch at offset 5 is malformed: its offset delta is past"),
    ("RECORD_MALFORMED", lambda: decode_messages(SECTION, 3, 2), "record 2 of the batch at offset 5 is malformed"),
    ("RECORD_MALFORMED", lambda: decode_records(b"\x7f" * 20, 1, 0), "record 0 .* malformed: its length, varints or field sizes do not parse"),
    ("RECORD_MALFORMED", lambda: record_at(COUNT_TOO_HIGH, 5), "record 2 of the batch at offset 5 is malformed"),
    ("RECORD_COUNT", lambda: decode_records(SECTION, 10**6, 1), r"record count 1000000 does not fit the batch at offset 5 \(34 bytes"),
    ("RECORD_COUNT", lambda: decode_messages(SECTION, -1, 1), "record count -1 does not fit"),
    ("TRAILING_BYTES", lambda: decode_records(SECTION, 1, 1), "17 bytes left over after record 0, the last of the batch at offset 5"),
    ("TRAILING_BYTES", lambda: decode_messages(SECTION, 1, 1), "bytes left over"),
    ("HEADER_NAME", lambda: decode_records(memoryview(BAD_HEADER_NAME)[HEADER:], 1, 0, 9), r"record 0 of the batch at offset 9 has a header name that is not UTF-8 \('utf-8' codec"),
    ("HEADER_NAME", lambda: decode_messages(memoryview(BAD_HEADER_NAME)[HEADER:], 1, 0, 9), "not UTF-8"),
    ("HEADER_NAME", lambda: record_at(BAD_HEADER_NAME, 9), "record 0 of the batch at offset 9 has a header name"),
    ("NUM_PARTITIONS", lambda: _speedups.partition_for_key(b"k", 0), "num_partitions must be between 1 and 2147483647, got 0"),
    ("NUM_PARTITIONS", lambda: _speedups.partition_for_keys([b"k"], 2**31), "got 2147483648"),
    ("NUM_PARTITIONS", lambda: _speedups.partition_for_keys([None], -(2**70)), "num_partitions"),
    ("POSITION", lambda: _speedups.decode_fetch_batches(b"abc", 4, TOPIC, 0, 0), r"position 4 is outside the buffer \(3 bytes\)"),
    ("POSITION", lambda: _speedups.decode_fetch_batches(PLAIN, -1, TOPIC, 0, 0), "position -1 is outside"),
    ("INDEX_COUNT", lambda: _speedups.locate(PLAIN, b"\0" * 8, 2, 5, 5), r"index_count 2 does not fit the index buffer \(8 bytes, 8 an entry\)"),
    ("INDEX_COUNT", lambda: _speedups.locate(PLAIN, b"", 2**62, 5, 5), "index_count 4611686018427387904"),
    ("INDEX_COUNT", lambda: record_at(PLAIN, 5, b"", -1), "index_count -1"),
    ("BATCH_FIELDS", lambda: _speedups.encode_plain([b"a"], -1, 0, -1, -1, -1, -1, 0), "base_offset must be at least 0, got -1"),
    ("BATCH_FIELDS", lambda: _speedups.encode_plain([b"a"], 0, 0, -1, -1, -1, -1, 3), "attributes 0x3 name a codec"),
    ("MAPPED_READ", lambda: record_at_cut_map(5), "reading the batch of offset 5"),
]  # fmt: skip


def test_the_table() -> None:
    names = [name for name, _, _ in _speedups.ERRORS.values()]
    assert len(set(names)) == len(names)
    for code, (name, cls, hint) in _speedups.ERRORS.items():
        assert getattr(_speedups, f"ERR_{name}") == code > 0
        # "message; hint": a hint is one clause, without a semicolon or a final period.
        assert issubclass(cls, LogstoreError) and hint and ";" not in hint and not hint.endswith(".")
        # Existing `except ValueError` callers keep working for every code but an I/O error's.
        assert issubclass(cls, OSError if name == "MAPPED_READ" else ValueError)
    assert len({hint for _, _, hint in _speedups.ERRORS.values()}) == len(names)


def test_every_code_has_a_case() -> None:
    missing = {name for name, _, _ in _speedups.ERRORS.values()} - {name for name, _, _ in CASES}
    assert not missing, f"codes of _speedups.ERRORS with no case in CASES: {sorted(missing)}"


@pytest.mark.parametrize(("name", "call", "match"), CASES, ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_each_code_raises_its_class_with_its_hint(name: str, call: Callable[[], object], match: str) -> None:
    code = getattr(_speedups, f"ERR_{name}")
    _, cls, hint = _speedups.ERRORS[code]
    with pytest.raises(LogstoreError, match=match) as info:
        call()
    assert type(info.value) is cls
    message = str(info.value)
    assert message.endswith(f"; {hint}") and message.count(hint) == 1


def test_classes_by_kind() -> None:
    for name, cls, _ in _speedups.ERRORS.values():
        argument = name in {"NUM_PARTITIONS", "POSITION", "INDEX_COUNT", "BATCH_FIELDS"}
        expected = MappedReadError if name == "MAPPED_READ" else InvalidArgumentError if argument else RecordDecodeError
        assert cls is expected, name
    assert issubclass(RecordDecodeError, CorruptRecordError) and issubclass(RecordDecodeError, ValueError)


# --- the callers in logstore.records ---------------------------------------------


def test_record_batch_records_raise_from_c_with_the_batch_offset() -> None:
    with pytest.raises(RecordDecodeError, match="record 2 of the batch at offset 5 is malformed") as info:
        _ = RecordBatch(memoryview(COUNT_TOO_HIGH)).records
    assert info.value.__cause__ is None  # not re-wrapped
    with pytest.raises(RecordDecodeError, match="batch at offset 9 has a header name"):
        _ = RecordBatch(memoryview(BAD_HEADER_NAME)).records


def test_a_compressed_batch_with_bad_records_is_a_corrupt_fetch() -> None:
    good = build_batch([b"a"], base_offset=0, timestamp=1)
    records = [Record(value=b"v", headers=[(b"\xff", b"x")])]  # type: ignore[list-item]
    bad = build_batch(records, base_offset=1, compression="zstd", timestamp=1)
    match = r"orders \[0\]: record 0 of the batch at offset 1 has a header name"
    with pytest.raises(CorruptFetchError, match=match) as info:
        decode_fetch(good + bad, TOPIC, 0, 0)
    assert [m.value() for m in info.value.messages] == [b"a"] and info.value.next_offset == 1
    assert isinstance(info.value.__cause__, RecordDecodeError)


def test_fetch_walk_reports_bad_records_as_a_stop_not_a_raise() -> None:
    good = build_batch([b"a"], base_offset=0, timestamp=1)
    for bad in (COUNT_TOO_HIGH, BAD_HEADER_NAME):
        messages, position, next_offset, stop = _speedups.decode_fetch_batches(good + bad, 0, TOPIC, 0, 0)
        assert [m.value() for m in messages] == [b"a"]
        assert (position, next_offset, stop) == (len(good), 1, lib.LS_ERR_CORRUPT)


# --- Python's own conventions stay -------------------------------------------------


def test_wrong_types_stay_type_errors_and_c_ranges_overflow_errors() -> None:
    with pytest.raises(TypeError, match="num_partitions must be an int"):
        _speedups.partition_for_key(b"k", 1.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="key must be a contiguous bytes-like object"):
        _speedups.murmur2("k")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="must be a bytes-like object"):
        _speedups.locate("log", b"", 0, 0, 0)
    with pytest.raises(TypeError, match="Record key must be bytes-like"):
        Record(key="k")  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        _speedups.encode_plain([b"a"], 0, 0, -1, 2**15, -1, -1, 0)
    with pytest.raises(OverflowError):
        decode_records(SECTION, 2**31, 1)

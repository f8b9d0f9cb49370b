"""Kafka record batches <-> Apache Arrow, in C, with no per-record Python.

:func:`decode_arrow` turns a record set (bytes of whole v2 batches: a Fetch
answer's ``records``, a slice of a segment file) into a ``pyarrow.RecordBatch``
with Spark's Kafka source schema (:func:`kafka_schema`). Two C walks do the
work (``native/arrow.c``): a header-only pass sizes the columns, then a pass
checks each batch's CRC-32C and copies keys, values and headers straight into
Arrow buffers: uninitialized, 64-byte aligned allocations from Arrow's memory
pool, written through numpy views (pages are touched only as they are
written, and the pool recycles those of freed batches). pyarrow wraps them
without copying.

:class:`ArrowDecoder` decodes many record sets of one partition (a whole
range, read a window or a Fetch answer at a time) into one set of columns,
sized once for the range: what ``logstore.arrow.read_table`` uses.

:func:`encode_arrow` goes the other way: Arrow binary columns into sealed v2
record batches, ready for ``Log.append`` or a Produce request;
:func:`partitions_for_keys` is Kafka's murmur2 partitioner over a column.

Arrow layouts (columnar format 1.0): a validity bitmap has bit ``i`` (least
significant first) of byte ``i // 8`` set when row ``i`` is not null; binary
and string columns are int32 ``offsets[n + 1]`` into one data buffer.

>>> from logstore.records import build_batch
>>> rows, next_offset = decode_arrow(build_batch([b"a", (b"k", b"b")], base_offset=7, timestamp=1000), "t", 0)
>>> rows.column("offset").to_pylist(), rows.column("key").to_pylist(), next_offset
([7, 8], [None, b'k'], 9)
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import pyarrow as pa

from logstore._native import check, ffi, lib, raise_for
from logstore.errors import CorruptRecordError, InvalidArgumentError, NativeCapacityError
from logstore.records.batch import HEADER_SIZE
from logstore.records.batch import RecordBatch as KafkaBatch
from logstore.records.codecs import codec_id, compress
from logstore.records.fetch import CorruptFetchError

__all__ = [
    "ArrowDecoder",
    "CorruptArrowError",
    "decode_arrow",
    "encode_arrow",
    "kafka_schema",
    "partitions_for_keys",
]

_OFFSET_MAX = 2**63 - 1
# One Arrow binary column holds < 2 GiB (int32 offsets); tests lower it.
_DATA_LIMIT = 2**31 - 1
# Encoding: worst-case bytes of a record besides its fields (length, attributes,
# timestamp delta, offset delta, key and value lengths, header count) and of a
# header besides its bytes (two lengths).
_RECORD_OVERHEAD_MAX = 5 + 1 + 10 + 5 + 5 + 5 + 5
_HEADER_OVERHEAD_MAX = 10
# Encoding output is produced in chunks of at most this many bytes.
_ENCODE_CHUNK = 64 << 20

_HEADERS_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_TIMESTAMP_TYPE = pa.timestamp("us", tz="UTC")
_WHY = {
    lib.LS_ERR_CORRUPT: "is malformed (sizes, magic, varints or records)",
    lib.LS_ERR_CRC: "failed its CRC-32C check",
    lib.LS_ERR_OFFSET: "has offsets out of order",
}
# Stops after which the rows so far are the answer.
_NORMAL_STOPS = (
    lib.LS_OK,
    lib.LS_ERR_INCOMPLETE,  # a truncated last batch: normal in Fetch answers and at a live tail
    lib.LS_ARROW_STOP_END,
    lib.LS_ARROW_STOP_ROWS,
    lib.LS_ARROW_STOP_FULL,
)


def kafka_schema(include_headers: bool = False) -> pa.Schema:
    """The Arrow schema of Spark's Kafka source rows (field names and order as Spark's).

    key, value binary; topic string; partition int32; offset int64; timestamp
    ``timestamp[us, tz=UTC]``; timestampType int32 (0 CreateTime, 1
    LogAppendTime); with ``include_headers``, headers
    ``list<struct<key: string, value: binary>>`` (null for a record without
    headers, as Spark has it).

    >>> kafka_schema().names
    ['key', 'value', 'topic', 'partition', 'offset', 'timestamp', 'timestampType']
    """
    fields = [
        pa.field("key", pa.binary()),
        pa.field("value", pa.binary()),
        pa.field("topic", pa.string()),
        pa.field("partition", pa.int32()),
        pa.field("offset", pa.int64()),
        pa.field("timestamp", _TIMESTAMP_TYPE),
        pa.field("timestampType", pa.int32()),
    ]
    if include_headers:
        fields.append(pa.field("headers", _HEADERS_TYPE))
    return pa.schema(fields)


class CorruptArrowError(CorruptFetchError):
    """A batch of the record set failed its checks (CRC-32C, sizes, varints, decompression).

    ``offset`` is the bad batch's base offset (-1 when even its header is
    unreadable); ``rows`` the ``pyarrow.RecordBatch`` of the whole batches before
    it and ``next_offset`` the offset after them: a reader hands those rows out,
    then reports the error (or skips past ``offset``, its choice, e.g. Spark's
    failOnDataLoss). ``messages`` (of :class:`CorruptFetchError`) is empty.
    """

    def __init__(self, reason: str, rows: pa.RecordBatch, next_offset: int, offset: int) -> None:
        super().__init__(reason, [], next_offset)
        self.rows = rows
        self.offset = offset


# ---------------------------------------------------------------------------
# Decoding


def _empty(count: int, dtype: Any) -> np.ndarray:
    """An uninitialized array in Arrow's memory pool (64-byte aligned). The pool
    recycles freed batches' pages, where fresh np.empty pages are cleared by the
    kernel on first touch (a third of a decode's time)."""
    width = np.dtype(dtype).itemsize
    return np.frombuffer(pa.allocate_buffer(count * width), dtype)


def _size(count: int) -> int:
    """Elements to allocate: never 0, so every buffer has an address for C."""
    return max(int(count), 1)


class _Arena:
    """One private anonymous mapping (``ls_arena_map``) seen as a numpy array.

    Given back when the last view of it goes (the array, a pa.Buffer over a
    slice of it): the cdata pointer's destructor hands what :meth:`trim`
    left mapped to ``ls_arena_release``, which keeps a few released arenas
    (256 MiB at most, reclaimable by the kernel) for the next read: a
    repeated read reuses pages instead of faulting in fresh ones.
    """

    __slots__ = ("_mapped", "array", "pointer")

    def __init__(self, count: int, dtype: Any, flags: int) -> None:
        size = _size(count) * np.dtype(dtype).itemsize
        raw = lib.ls_arena_map(size, flags)
        if raw == ffi.NULL:
            raise MemoryError(
                f"mapping {size} bytes for Arrow columns failed; read fewer offsets at a time "
                "(logstore.arrow.read_batches, or start and end)"
            )
        mapped = [size]  # what the destructor gives back: trim lowers it
        self._mapped = mapped
        self.pointer = ffi.gc(raw, lambda p: lib.ls_arena_release(p, mapped[0], flags))
        self.array = np.frombuffer(ffi.buffer(self.pointer, size), dtype)

    def trim(self, count: int) -> np.ndarray:
        """Unmaps the whole pages past the first ``count`` elements and 64 bytes of padding
        (Arrow's); returns the array cut to ``count``: nothing may read past it any more."""
        keep = min(count * self.array.itemsize + 64, self._mapped[0])
        left = int(lib.ls_arena_trim(self.pointer, self._mapped[0], keep))
        assert left >= keep, (left, keep)
        self._mapped[0] = left
        self.array = self.array[:count]
        return self.array


# Buffers this large or larger are arenas when a decode asks for them; smaller ones come
# from Arrow's pool.
_ARENA_MIN = 256 << 10
ARENA_FLAGS = lib.LS_ARENA_SMALL
"""How ArrowDecoder maps its columns (``LS_ARENA_*`` of native/ls_api.h); None: Arrow's pool.

Base pages, because on a VM that hands freed memory back to its host (a
balloon with free page reporting, as this one), huge pages are taken from
exactly the free blocks given back, and each first touch then costs the
host's faults too: 2.5 ms per MB against 0.5 with base pages (measured with
bench/arrow_table_bench.py --pause)."""


class _Columns:
    """The decode's output: arrays the C walk fills, bound to its ls_arrow_columns_t.

    The C walk wants room for a whole batch before it starts one (its record
    count; its section's bytes in each data column; section / 2 header
    entries). The caller sizes rows and values (decode_arrow: the header
    pass's totals for the uncompressed batches; :class:`ArrowDecoder`: the
    whole range's); keys and headers, usually much smaller than values, start
    at one section and grow when a batch does not fit (:meth:`reserve`, which
    copies only the part already written), as do all columns for
    decompressed sections: to twice their size, or, given ``expected_rows``,
    to what that many rows take at the bytes per row so far, so a whole
    range's columns grow about once.
    """

    def __init__(
        self,
        c: Any,
        headers: bool,
        rows: int,
        values: int,
        section: int,
        expected_rows: int | None = None,
        arena_flags: int | None = None,
    ) -> None:
        self.c = c
        self.headers = headers
        self.expected_rows = expected_rows
        self.arena_flags = arena_flags
        self.arenas: dict[str, _Arena] = {}
        self.arrays: dict[str, np.ndarray] = {}
        self._cdata: dict[str, Any] = {}  # keeps the pointers in `c` valid
        self._rows(rows)
        self._data("key", section)
        self._data("value", values)
        if headers:
            self._entries(section // 2)
            self._data("hkey", section)
            self._data("hvalue", section)

    @classmethod
    def planned(cls, c: Any, plan: Any, headers: bool, max_rows: int | None) -> _Columns:
        """Columns for decode_arrow: the header pass's totals; with ``max_rows``, rows and values
        for what max_rows rows and one more batch need."""
        section, rows, data = int(plan.section_max), int(plan.rows), int(plan.data)
        if max_rows is not None and rows > max_rows:
            # max_rows rows and the batch that passes it: a record takes >= 7 bytes.
            rows_wanted = max_rows + section // 7
            data = min(data, rows_wanted * (data // rows + 1) + section)
            rows = min(rows, rows_wanted)
        return cls(c, headers, rows, data, section)

    def _alloc(self, name: str, count: int, dtype: Any) -> np.ndarray:
        self.arenas.pop(name, None)
        if self.arena_flags is None or _size(count) * np.dtype(dtype).itemsize < _ARENA_MIN:
            return _empty(_size(count), dtype)
        arena = self.arenas[name] = _Arena(count, dtype, self.arena_flags)
        return arena.array

    def _bind(self, name: str, array: np.ndarray, kind: str) -> None:
        self.arrays[name] = array
        pointer = ffi.from_buffer(kind, array)
        self._cdata[name] = pointer
        setattr(self.c, name, pointer)

    def _grow(self, name: str, size: int, dtype: Any, used: int, kind: str) -> None:
        array = self._alloc(name, size, dtype)
        old = self.arrays.get(name)
        if old is not None and used > 0:
            array[:used] = old[:used]
        self._bind(name, array, kind)

    def _rows(self, cap: int) -> None:
        """Row-indexed arrays for `cap` rows, keeping rows already written."""
        n = int(self.c.rows)
        assert cap >= n, (cap, n)
        bits, used_bits = (cap + 7) // 8, (n + 7) // 8
        self._grow("offsets", cap, np.int64, n, "int64_t[]")
        self._grow("timestamps_us", cap, np.int64, n, "int64_t[]")
        self._grow("timestamp_types", cap, np.int32, n, "int32_t[]")
        names = ["key", "value", "header"] if self.headers else ["key", "value"]
        for name in names:
            self._grow(f"{name}_valid", bits, np.uint8, used_bits, "uint8_t[]")
            self._grow(f"{name}_offsets", cap + 1, np.int32, n + 1, "int32_t[]")
        self.c.rows_cap = cap

    def _entries(self, cap: int) -> None:
        """Header-entry-indexed arrays for `cap` entries."""
        n = int(self.c.headers)
        assert cap >= n, (cap, n)
        self._grow("hkey_offsets", cap + 1, np.int32, n + 1, "int32_t[]")
        self._grow("hvalue_offsets", cap + 1, np.int32, n + 1, "int32_t[]")
        self._grow("hvalue_valid", (cap + 7) // 8, np.uint8, (n + 7) // 8, "uint8_t[]")
        self.c.headers_cap = cap

    def _data(self, name: str, cap: int) -> None:
        """The data buffer of column `name` (key, value, hkey, hvalue) for `cap` bytes."""
        count = self.c.headers if name in ("hkey", "hvalue") else self.c.rows
        used = int(self.arrays[f"{name}_offsets"][count]) if count else 0
        self._grow(f"{name}_data", cap, np.uint8, used, "uint8_t[]")
        setattr(self.c, f"{name}_cap", cap)

    def _grown(self, cap: int, used: int, need: int) -> int:
        """A new capacity for a column of ``cap`` holding ``used`` that must take ``need`` more:
        twice ``cap`` at least, or what ``expected_rows`` take at the rows so far' rate."""
        grown = max(2 * cap, used + need)
        rows, expected = int(self.c.rows), self.expected_rows
        if expected is not None and 0 < rows < expected:
            grown = max(grown, used + need + used * (expected - rows) // rows)
        return grown

    def reserve(self, records: int, section: int) -> None:
        """Room for a batch of `records` records in a section of `section` bytes. O(bytes written) when it grows."""
        c = self.c
        if records > c.rows_cap - c.rows:
            self._rows(self._grown(c.rows_cap, c.rows, records))
        names = [("key", c.rows), ("value", c.rows)]
        if self.headers:
            if section // 2 > c.headers_cap - c.headers:
                self._entries(self._grown(c.headers_cap, c.headers, section // 2))
            names += [("hkey", c.headers), ("hvalue", c.headers)]
        for name, index in names:
            used = int(self.arrays[f"{name}_offsets"][index])
            cap = getattr(c, f"{name}_cap")
            if section > cap - used:
                self._data(name, self._grown(cap, used, section))

    def _validity(self, name: str, n: int) -> pa.Buffer:
        valid = self.arrays[f"{name}_valid"]
        if n % 8:  # bits past the last row: cleared, as Arrow recommends
            valid[n // 8] &= (1 << (n % 8)) - 1
        return pa.py_buffer(valid[: (n + 7) // 8])

    def _binary(self, kind: pa.DataType, name: str, n: int, nulls: int) -> pa.Array:
        offsets = self.arrays[f"{name}_offsets"][: n + 1]
        data = self.arrays[f"{name}_data"][: int(offsets[n])]
        validity = self._validity(name, n) if nulls else None
        buffers = [validity, pa.py_buffer(offsets), pa.py_buffer(data)]
        return pa.Array.from_buffers(kind, n, buffers, null_count=nulls)

    def _headers(self, n: int) -> pa.Array:
        c, entries = self.c, int(self.c.headers)
        keys = self._binary(pa.string(), "hkey", entries, 0)
        try:
            keys.validate(full=True)  # UTF-8, in C++
        except pa.ArrowInvalid:
            keys = _replace_invalid_utf8(keys)
        values = self._binary(pa.binary(), "hvalue", entries, int(c.hvalue_nulls))
        structs = pa.StructArray.from_arrays([keys, values], fields=list(_HEADERS_TYPE.value_type))
        nulls = int(c.header_nulls)
        validity = self._validity("header", n) if nulls else None
        offsets = pa.py_buffer(self.arrays["header_offsets"][: n + 1])
        return pa.Array.from_buffers(
            _HEADERS_TYPE, n, [validity, offsets], null_count=nulls, children=[structs]
        )

    def _used(self, name: str) -> int:
        """Elements of array ``name`` that hold the rows written so far."""
        n = int(self.c.headers) if name.startswith(("hkey_", "hvalue_")) else int(self.c.rows)
        if name.endswith("_valid"):
            return (n + 7) // 8
        if name.endswith("_offsets"):
            return n + 1
        if name.endswith("_data"):
            return int(self.arrays[name[: -len("data")] + "offsets"][n]) if n else 0
        return n

    def finish(self, topic: str, partition: int) -> pa.RecordBatch:
        """The rows written so far as a RecordBatch of kafka_schema. O(columns); no row is copied.
        Arenas are cut to their length: the last call (the C pointers are void after it)."""
        c = self.c
        n = int(c.rows)
        for name, arena in self.arenas.items():
            self.arrays[name] = arena.trim(self._used(name))
        self.arenas = {}
        columns = [
            self._binary(pa.binary(), "key", n, int(c.key_nulls)),
            self._binary(pa.binary(), "value", n, int(c.value_nulls)),
            *_constants(topic, partition, n),
            pa.Array.from_buffers(pa.int64(), n, [None, pa.py_buffer(self.arrays["offsets"][:n])]),
            pa.Array.from_buffers(_TIMESTAMP_TYPE, n, [None, pa.py_buffer(self.arrays["timestamps_us"][:n])]),
            pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(self.arrays["timestamp_types"][:n])]),
        ]
        if self.headers:
            columns.append(self._headers(n))
        return pa.RecordBatch.from_arrays(columns, schema=kafka_schema(self.headers))


def _constants(topic: str, partition: int, n: int) -> tuple[pa.Array, pa.Array]:
    """The topic and partition columns of ``n`` rows. Built with numpy: pa.repeat's first
    call in a process costs ~15 ms of Arrow's own setup."""
    name = topic.encode("utf-8")
    if n * len(name) > _DATA_LIMIT:  # int32 offsets cannot say it: pa.repeat says why
        return pa.repeat(pa.scalar(topic, pa.string()), n), pa.repeat(pa.scalar(partition, pa.int32()), n)
    offsets = np.arange(n + 1, dtype=np.int32)
    offsets *= len(name)
    topics = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(offsets), pa.py_buffer(name * n)])
    partitions = pa.Array.from_buffers(pa.int32(), n, [None, pa.py_buffer(np.full(n, partition, np.int32))])
    return topics, partitions


def _replace_invalid_utf8(keys: pa.Array) -> pa.Array:
    """Header keys with invalid UTF-8 replaced by U+FFFD, as Java's ``new String(bytes, UTF_8)``
    (so Spark's Kafka source) reads them. O(headers) in Python: the rare path only."""
    raw = pa.Array.from_buffers(pa.binary(), len(keys), keys.buffers())
    return pa.array([key.decode("utf-8", "replace") for key in raw.to_pylist()], pa.string())


def _check_range(start: int, end: int | None, max_rows: int | None) -> int:
    if start < 0:
        raise InvalidArgumentError(f"start={start}: offsets are >= 0")
    stop = _OFFSET_MAX if end is None else end
    if stop < start:
        raise InvalidArgumentError(f"end={end} is below start={start}: pass end >= start, or None")
    if max_rows is not None and max_rows < 1:
        raise InvalidArgumentError(f"max_rows={max_rows}: pass a count >= 1, or None for no limit")
    return stop


def _decode_compressed(view: memoryview, data: Any, c: Any, out: _Columns) -> str | None:
    """Decompresses the batch the walk stopped at and decodes it; the reason when it does not decompress."""
    position = int(c.position)
    batch = KafkaBatch(view[position:])
    try:
        section = batch.records_section()  # decompresses; checks the record count against it
    except CorruptRecordError as exc:
        c.stop, c.stop_offset = lib.LS_ERR_CORRUPT, batch.base_offset
        return f"does not decompress ({exc})"
    out.reserve(batch.record_count, len(section))
    with ffi.from_buffer(section) as decompressed:
        rc = lib.ls_arrow_decode_section(data + position, batch.size, decompressed, len(section), c)
    check(rc, "decoding a decompressed record batch into Arrow columns")
    return None


def _walk(view: memoryview, data: Any, c: Any, out: _Columns) -> str | None:
    """Runs the C walk to its stop, decompressing on the way; a decompression failure's reason."""
    # Each pass ends the walk, consumes one compressed batch (>= 61 bytes) or
    # grows the columns for the next batch, which then goes in.
    for _ in range(2 * (len(view) // HEADER_SIZE) + 2):
        check(lib.ls_arrow_decode(data, len(view), c), "decoding record batches into Arrow columns")
        if c.stop == lib.LS_ERR_CAPACITY:
            # Keys and headers start small; compressed batches may have used
            # room the header pass sized for the uncompressed ones.
            batch = KafkaBatch(view[c.position :])
            out.reserve(batch.record_count, batch.size - HEADER_SIZE)
            continue
        if c.stop != lib.LS_ARROW_STOP_COMPRESSED:
            return None
        reason = _decode_compressed(view, data, c, out)
        if reason is not None or c.stop != lib.LS_OK:
            return reason
    raise AssertionError("the Arrow decode walk did not end")  # pragma: no cover


def decode_arrow(
    records: bytes | bytearray | memoryview | None,
    topic: str,
    partition: int,
    start: int = 0,
    end: int | None = None,
    *,
    include_headers: bool = False,
    check_crc: bool = True,
    max_rows: int | None = None,
) -> tuple[pa.RecordBatch, int]:
    """The rows of every whole batch in ``records`` with ``start <= offset < end``, and the next offset.

    ``records``: whole v2 batches, possibly ending in a truncated one (normal
    in Fetch answers and at a live segment's tail: the walk ends there quietly).
    The result has :func:`kafka_schema` (``include_headers``) and the next
    offset to read from: the last whole batch's last offset + 1, never below
    ``start`` nor above ``end`` (``end`` when the walk stopped at it);
    ``start`` when no batch is whole. ``end`` None: no bound.

    - Control batches are skipped but consumed; compressed batches
      (gzip/snappy/lz4/zstd) are decompressed and decoded by the same C routine.
    - timestampType is 0 (CreateTime) or 1 (LogAppendTime, batch attribute
      bit 3: every record then has the batch's max timestamp, Kafka's rule);
      timestamp is ``ms * 1000`` as ``timestamp[us, UTC]``.
    - Null key or value (length -1) -> Arrow null. Header keys are UTF-8;
      invalid UTF-8 is replaced by U+FFFD, as Java's ``new String(bytes,
      UTF_8)`` (Spark's Kafka source) does; header values are nullable binary;
      a record without headers has a null headers list (as Spark's).
    - ``max_rows``: stop after the batch that reaches it (whole batches only).
    - A column holds < 2 GiB (Arrow's int32 offsets): the walk stops before a
      batch that could pass that, and the next offset says where to go on.

    A corrupt batch (CRC-32C when ``check_crc``; sizes, varints, a section
    that does not decompress) raises :class:`CorruptArrowError` naming its
    offset and carrying the rows before it.

    Cost: one header pass, then one pass per byte (CRC-32C and a copy of each
    key, value and header) in C; O(compressed batches) Python steps.
    """
    stop = _check_range(start, end, max_rows)
    view = memoryview(records if records is not None else b"").cast("B")
    c = ffi.new("ls_arrow_columns_t *")
    c.offset_start, c.offset_end, c.next_offset = start, stop, start
    c.rows_max = max_rows or 0
    c.data_limit = _DATA_LIMIT
    c.flags = (lib.LS_ARROW_CRC if check_crc else 0) | (lib.LS_ARROW_HEADERS if include_headers else 0)
    # The buffer export ends here, not when the frame is collected: a memoryview
    # cleared by the cyclic GC while still exported crashes CPython (a raised
    # error's traceback can put this frame in a cycle).
    with ffi.from_buffer(view) as data:
        plan = ffi.new("ls_arrow_plan_t *")
        plan.offset_start, plan.offset_end = start, stop
        check(lib.ls_arrow_plan(data, len(view), plan), "planning an Arrow decode")
        out = _Columns.planned(c, plan, include_headers, max_rows)
        reason = _walk(view, data, c, out)
    rows = out.finish(topic, partition)
    _check_stop(c, reason, rows, topic, partition)
    return rows, int(c.next_offset)


def _check_stop(c: Any, reason: str | None, rows: pa.RecordBatch, topic: str, partition: int) -> None:
    """Raise what a walk's stop means unless it is a normal one; ``rows``: those before it."""
    if c.stop in _NORMAL_STOPS:
        if c.stop == lib.LS_ARROW_STOP_FULL and rows.num_rows == 0:
            raise NativeCapacityError(
                f"{topic} [{partition}]: the batch at offset {c.stop_offset} holds more than "
                f"{_DATA_LIMIT} bytes, more than an Arrow binary column takes"
            )
        return
    if c.stop == lib.LS_ERR_CAPACITY:
        raise_for(c.stop, "decoding record batches into Arrow columns")
    offset, next_offset = int(c.stop_offset), int(c.next_offset)
    why = reason or _WHY.get(c.stop, f"failed its checks (code {c.stop})")
    raise CorruptArrowError(
        f"{topic} [{partition}]: the record batch at offset {offset} (byte {c.position}) {why}; "
        f"the {rows.num_rows} rows before it are in the error's .rows (resume at .next_offset="
        f"{next_offset}); skip the batch or stop reading (the data is damaged)",
        rows,
        next_offset,
        offset,
    )


class ArrowDecoder:
    """Record sets of one partition, one after the other, decoded into one set of Arrow columns.

    :func:`decode_arrow` gives each record set columns of its own: right for a
    stream of batches. A whole table read that way would be many small
    batches, each with a dozen allocations of its own. This decoder sizes
    each column once for the whole range and appends every set's rows to it:
    rows for ``rows`` (at most one row per offset of ``[start, end)``),
    values for ``data`` bytes (an upper bound of the record bytes to come,
    e.g. the segments' sizes), or, for None, for what ``rows`` rows take at
    the first set's bytes per row; keys and headers grow once, to what the
    range takes at the rate of the rows so far. No row is copied unless a
    guess was short (then the part written, once per doubling).

    Memory: columns of 256 KiB or more are anonymous mappings (``ARENA_FLAGS``;
    only the pages written cost memory) cut to their length by
    :meth:`finish`; they are unmapped when the table lets go of them (not
    recycled as Arrow's pool recycles freed pages: a second table faults its
    pages in again). Why: a table read in a fresh process writes every
    output byte for the first time, and on a VM base pages cost a fifth of
    what huge pages from Arrow's pool may (see ``ARENA_FLAGS``).

    Rows are those with ``start <= offset < end``, each offset once: a set
    that starts before the next offset (a batch read again) adds only the
    rows after it. A column passing 2 GiB (Arrow's int32 offsets) starts a
    new chunk, so :meth:`finish` returns one RecordBatch per chunk (one,
    unless 2 GiB of keys or values). Errors as :func:`decode_arrow` (a
    CorruptArrowError's ``rows``: the chunk's rows before the bad batch).

    Cost: per set, one header pass and one C pass over its bytes; O(sets)
    Python steps. Not thread-safe: one decoder per partition and thread.

    >>> from logstore.records import build_batch
    >>> decoder = ArrowDecoder("t", 0, 0, 4, rows=4)
    >>> decoder.add(build_batch([b"a", b"b"], base_offset=0)), decoder.add(build_batch([b"c"], base_offset=2))
    (2, 3)
    >>> [batch.column("value").to_pylist() for batch in decoder.finish()]
    [[b'a', b'b', b'c']]
    """

    def __init__(
        self,
        topic: str,
        partition: int,
        start: int = 0,
        end: int | None = None,
        *,
        rows: int | None = None,
        data: int | None = None,
        include_headers: bool = False,
        check_crc: bool = True,
    ) -> None:
        self.end = _check_range(start, end, None)
        if (rows is not None and rows < 0) or (data is not None and data < 0):
            raise InvalidArgumentError(f"rows={rows}, data={data}: pass counts >= 0, or None")
        self.topic, self.partition, self.headers = topic, partition, include_headers
        self.rows_hint, self.data_hint = rows, data
        self.flags = (lib.LS_ARROW_CRC if check_crc else 0) | (lib.LS_ARROW_HEADERS if include_headers else 0)
        self.next_offset = start
        self._chunks: list[pa.RecordBatch] = []
        self._c: Any = None
        self._out: _Columns | None = None
        self._done = False

    @property
    def num_rows(self) -> int:
        """Rows decoded so far."""
        current = int(self._c.rows) if self._c is not None else 0
        return sum(chunk.num_rows for chunk in self._chunks) + current

    def _open(self, data: Any, length: int) -> tuple[Any, _Columns]:
        """Fresh columns for the rest of the range, sized with the header pass of the set at hand
        (``length`` bytes at ``data``)."""
        plan = ffi.new("ls_arrow_plan_t *")
        plan.offset_start, plan.offset_end = self.next_offset, self.end
        check(lib.ls_arrow_plan(data, length, plan), "planning an Arrow decode")
        done = self.num_rows
        left = None if self.rows_hint is None else max(self.rows_hint - done, 0)
        planned, data, section = int(plan.rows), int(plan.data), int(plan.section_max)
        rows = max(planned, left or 0)
        if self.data_hint is not None:
            values = max(self.data_hint - sum(_data_bytes(chunk) for chunk in self._chunks), data)
        elif planned:
            values = data + (rows - planned) * (data // planned + 1)  # the first set's bytes per row
        else:
            values = data
        c = ffi.new("ls_arrow_columns_t *")
        c.offset_start, c.offset_end, c.next_offset = self.next_offset, self.end, self.next_offset
        c.data_limit, c.flags = _DATA_LIMIT, self.flags
        values = min(values, _DATA_LIMIT)
        out = _Columns(c, self.headers, rows, values, section, expected_rows=rows, arena_flags=ARENA_FLAGS)
        self._c, self._out = c, out
        return c, out

    def add(self, records: bytes | bytearray | memoryview | None, offset: int | None = None) -> int:
        """Decodes the whole batches of ``records`` (a trailing partial batch is left, quietly);
        returns the next offset to read. ``offset``: where the set was read from, when the reader
        skipped ahead (rows below it are left out). The set is not kept: reuse its buffer afterwards."""
        if self._done:
            raise InvalidArgumentError("this ArrowDecoder is finished; make a new one")
        if offset is not None:
            self.next_offset = min(max(self.next_offset, offset), self.end)
        view = memoryview(records if records is not None else b"").cast("B")
        with ffi.from_buffer(view) as data:
            # Each pass decodes the set to its end or to a full chunk, which then makes way
            # for a new one (a chunk holds >= 1 batch, or the batch is too big: an error).
            for _ in range(len(view) // HEADER_SIZE + 2):
                c, out = self._c, self._out
                position = 0 if c is None or c.stop != lib.LS_ARROW_STOP_FULL else int(c.position)
                if c is None or out is None or c.stop == lib.LS_ARROW_STOP_FULL:
                    if c is not None:
                        self._seal()
                    c, out = self._open(data + position, len(view) - position)
                c.position = position
                c.offset_start = c.next_offset = self.next_offset
                reason = _walk(view, data, c, out)
                self.next_offset = int(c.next_offset)
                if c.stop == lib.LS_ARROW_STOP_FULL and int(c.rows) > 0:
                    continue  # the chunk is full: the rest of the set goes into a new one
                if c.stop not in _NORMAL_STOPS or c.stop == lib.LS_ARROW_STOP_FULL:
                    self._done = True
                    _check_stop(c, reason, out.finish(self.topic, self.partition), self.topic, self.partition)
                return self.next_offset
        raise AssertionError("the Arrow decode of a record set did not end")  # pragma: no cover

    def _seal(self) -> None:
        """The current chunk's columns become a RecordBatch."""
        assert self._out is not None
        self._chunks.append(self._out.finish(self.topic, self.partition))
        self._c, self._out = None, None

    def finish(self) -> list[pa.RecordBatch]:
        """The rows as RecordBatches of :func:`kafka_schema` (one per chunk; none if no row).
        The last call."""
        if not self._done and self._out is not None and int(self._c.rows) > 0:
            self._seal()
        self._done = True
        self._c, self._out = None, None
        chunks, self._chunks = self._chunks, []
        return chunks


def _data_bytes(chunk: pa.RecordBatch) -> int:
    """Value bytes of a decoded chunk (its value column's data)."""
    return int(chunk.column(1).buffers()[2].size) if chunk.num_rows else 0


# ---------------------------------------------------------------------------
# Encoding


def _binary_array(array: Any, name: str) -> pa.Array:
    """``array`` as a pa.binary() Array: binary, string and their large forms, chunked or not."""
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    if not isinstance(array, pa.Array):
        raise InvalidArgumentError(f"{name} must be a pyarrow Array, not {type(array).__name__}")
    kinds = (pa.binary(), pa.large_binary(), pa.string(), pa.large_string())
    if array.type not in kinds:
        raise InvalidArgumentError(
            f"{name} has type {array.type}: pass binary, large_binary, string or large_string "
            "(cast other types first, e.g. with pyarrow.compute)"
        )
    try:
        return array.cast(pa.binary())
    except pa.ArrowInvalid as exc:
        raise InvalidArgumentError(
            f"{name} holds more than 2 GiB: encode it in slices (array.slice) ({exc})"
        ) from exc


_ONE_BYTE = np.zeros(1, np.uint8)  # a valid address for empty data buffers


def _bind_binary(source: Any, prefix: str, array: pa.Array, keep: list[Any]) -> None:
    """Points source's ``<prefix>_valid/_valid_bit/_offsets/_data/_data_len`` at a binary array."""
    valid, offsets, data = array.buffers()[:3]
    first, n = array.offset, len(array)
    offsets_np = np.frombuffer(offsets, np.int32)[first : first + n + 1] if offsets is not None else None
    if offsets_np is None or len(offsets_np) < n + 1:
        offsets_np = np.zeros(n + 1, np.int32)  # an empty array may have no offsets buffer
    parts = [
        ffi.from_buffer("uint8_t[]", valid) if valid is not None and array.null_count else ffi.NULL,
        ffi.from_buffer("int32_t[]", offsets_np),
        ffi.from_buffer("uint8_t[]", data if data is not None else _ONE_BYTE),
    ]
    keep += parts
    setattr(source, f"{prefix}_valid", parts[0])
    setattr(source, f"{prefix}_valid_bit", first)
    setattr(source, f"{prefix}_offsets", parts[1])
    setattr(source, f"{prefix}_data", parts[2])
    setattr(source, f"{prefix}_data_len", data.size if data is not None else 0)


def _bind_headers(source: Any, headers: Any, n: int, keep: list[Any]) -> int:
    """Points source's header fields at a list<struct<key, value>> array; returns the entry count."""
    if isinstance(headers, pa.ChunkedArray):
        headers = headers.combine_chunks()
    if isinstance(headers, pa.Array) and pa.types.is_large_list(headers.type):
        headers = headers.cast(pa.list_(headers.type.value_type))
    kind: Any = headers.type if isinstance(headers, pa.Array) else type(headers).__name__
    if not (
        isinstance(headers, pa.Array)
        and pa.types.is_list(kind)
        and pa.types.is_struct(kind.value_type)
        and {"key", "value"} <= {f.name for f in kind.value_type}
    ):
        raise InvalidArgumentError(
            f"headers must be a pyarrow list<struct<key: string, value: binary>> array, not {kind}"
        )
    if len(headers) != n:
        raise InvalidArgumentError(f"headers has {len(headers)} rows, values {n}: pass one list per row")
    entries = headers.values
    first = headers.offset
    list_offsets = np.frombuffer(headers.buffers()[1], np.int32)[first : first + n + 1]
    valid = headers.buffers()[0]
    parts = [
        ffi.from_buffer("uint8_t[]", valid) if valid is not None and headers.null_count else ffi.NULL,
        ffi.from_buffer("int32_t[]", list_offsets),
    ]
    entry_valid = entries.buffers()[0]
    parts.append(
        ffi.from_buffer("uint8_t[]", entry_valid)
        if entry_valid is not None and entries.null_count
        else ffi.NULL
    )
    keep += parts
    source.header_valid, source.header_valid_bit, source.header_offsets = parts[0], first, parts[1]
    source.entry_valid, source.entry_valid_bit = parts[2], entries.offset
    _bind_binary(source, "hkey", _binary_array(entries.field("key"), "header keys"), keep)
    _bind_binary(source, "hvalue", _binary_array(entries.field("value"), "header values"), keep)
    return len(entries)


def _timestamps(timestamps_ms: np.ndarray | int | None, n: int, source: Any, keep: list[Any]) -> None:
    if timestamps_ms is None or isinstance(timestamps_ms, (int, np.integer)):
        source.timestamps = ffi.NULL
        source.timestamp = int(time.time() * 1000) if timestamps_ms is None else int(timestamps_ms)
        return
    stamps = np.ascontiguousarray(timestamps_ms, dtype=np.int64)
    if stamps.shape != (n,):
        raise InvalidArgumentError(f"timestamps_ms has shape {stamps.shape}: pass one int64 ms per row ({n})")
    pointer = ffi.from_buffer("int64_t[]", stamps)
    keep += [stamps, pointer]
    source.timestamps = pointer


def _recompress(batch: bytes, codec: int) -> bytes:
    """The batch with its records section compressed, header fields kept, CRC recomputed."""
    header = KafkaBatch(memoryview(batch))
    section = compress(codec, memoryview(batch)[HEADER_SIZE:])
    out = ffi.new("uint8_t[]", HEADER_SIZE + len(section))
    ffi.memmove(out + HEADER_SIZE, section, len(section))
    rc = lib.ls_batch_seal(
        out, HEADER_SIZE + len(section), header.base_offset, header.partition_leader_epoch,
        header.attributes | codec, header.last_offset_delta, header.base_timestamp,
        header.max_timestamp, header.producer_id, header.producer_epoch, header.base_sequence,
        header.record_count,
    )  # fmt: skip
    check(rc, "sealing a compressed batch")
    return bytes(ffi.buffer(out))


def _encode_bound(source: Any, n: int, entries: int) -> int:
    """Bytes all rows take at most (records and their batch headers, one batch per row at worst)."""
    data = source.key_data_len + source.value_data_len
    if entries:
        data += source.hkey_data_len + source.hvalue_data_len
    return int(data + n * (_RECORD_OVERHEAD_MAX + HEADER_SIZE) + entries * _HEADER_OVERHEAD_MAX)


def encode_arrow(
    keys: pa.Array | None,
    values: pa.Array,
    *,
    timestamps_ms: np.ndarray | int | None = None,
    headers: pa.Array | None = None,
    max_batch_bytes: int = 1 << 20,
    compression: str = "none",
) -> list[bytes]:
    """Record batches holding the rows in order: v2, base offset 0, producer id -1.

    Each batch is at most ``max_batch_bytes`` (before compression) unless one
    record is bigger. ``keys``/``values``: binary, large_binary, string or
    large_string Arrays (chunked too); a null key is no key, a null value a
    tombstone; ``keys`` None: no keys. ``headers``: list<struct<key string,
    value binary>> (a null list: no headers; a null entry or key is refused).
    ``timestamps_ms``: int64 per row, one int for all, or None (now).
    ``compression``: none, gzip, snappy, lz4, zstd.

    Cost: one C pass over the Arrow buffers (lengths from the offsets, -1 for
    nulls); Python per batch only (slicing out each batch; compressing it).

    >>> import pyarrow as pa
    >>> [batch] = encode_arrow(pa.array([b"k", None]), pa.array([b"v", b"w"]), timestamps_ms=5)
    >>> decode_arrow(batch, "t", 0)[0].column("key").to_pylist()
    [b'k', None]
    """
    values = _binary_array(values, "values")
    n = len(values)
    if not HEADER_SIZE < max_batch_bytes <= 2**31 - 1:
        raise InvalidArgumentError(f"max_batch_bytes={max_batch_bytes}: pass {HEADER_SIZE + 1} .. 2**31 - 1")
    codec = codec_id(compression)
    keep: list[Any] = []
    source = ffi.new("ls_arrow_source_t *")
    source.rows = n
    _bind_binary(source, "value", values, keep)
    if keys is not None:
        keys = _binary_array(keys, "keys")
        if len(keys) != n:
            raise InvalidArgumentError(f"keys has {len(keys)} rows, values {n}: pass one key per value")
        _bind_binary(source, "key", keys, keep)
    entries = _bind_headers(source, headers, n, keep) if headers is not None else 0
    _timestamps(timestamps_ms, n, source, keep)
    batches = _encode_all(source, n, _encode_bound(source, n, entries), max_batch_bytes)
    return [_recompress(batch, codec) for batch in batches] if codec else batches


def _encode_all(source: Any, n: int, bound: int, max_batch_bytes: int) -> list[bytes]:
    """Runs the C encoder chunk by chunk; grows the chunk for a record bigger than it."""
    encoding = ffi.new("ls_arrow_encoding_t *")
    encoding.batch_bytes_max = max_batch_bytes
    cap = min(bound, max(_ENCODE_CHUNK, 2 * max_batch_bytes))
    batches: list[bytes] = []
    # Each pass encodes a row at least, or doubles the chunk (at most 31 times).
    for _ in range(n + 32):
        if encoding.row >= n:
            return batches
        out = np.empty(_size(cap), np.uint8)
        ends = np.empty(cap // HEADER_SIZE + 1, np.int64)
        encoding.out, encoding.out_cap = ffi.from_buffer("uint8_t[]", out), cap
        encoding.batch_ends, encoding.batch_cap = ffi.from_buffer("int64_t[]", ends), len(ends)
        rc = lib.ls_arrow_encode(source, encoding)
        if rc == lib.LS_ERR_CAPACITY and cap < 2**31:
            cap = min(2 * cap, 2**31)
            continue
        if rc == lib.LS_ERR_ARGUMENT:
            raise InvalidArgumentError(
                f"row {encoding.row} cannot be encoded: a null header entry or header key "
                "(Kafka has neither), or offsets outside their data"
            )
        check(rc, "encoding Arrow rows into record batches")
        start = 0
        for end in ends[: encoding.batch_count].tolist():
            batches.append(out[start:end].tobytes())
            start = end
    raise AssertionError("the Arrow encode did not end")  # pragma: no cover


def partitions_for_keys(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Kafka's default partition of each key, in C: ``(murmur2(key) & 0x7fffffff) % num_partitions``.

    int32 per row, -1 for a null key (the caller's sticky or round-robin
    choice). Equals ``logstore._speedups.partition_for_key`` key by key.

    >>> import pyarrow as pa
    >>> partitions_for_keys(pa.array([b"a", None]), 3).tolist()
    [1, -1]
    """
    if isinstance(num_partitions, bool) or not isinstance(num_partitions, (int, np.integer)):
        raise InvalidArgumentError(f"num_partitions must be an int, not {type(num_partitions).__name__}")
    if not 1 <= num_partitions <= 2**31 - 1:
        raise InvalidArgumentError(f"num_partitions={num_partitions}: pass 1 .. 2**31 - 1")
    keys = _binary_array(keys, "keys")
    keep: list[Any] = []
    source = ffi.new("ls_arrow_source_t *")
    _bind_binary(source, "key", keys, keep)
    out = np.empty(len(keys), np.int32)
    rc = lib.ls_arrow_partitions(
        source.key_valid, source.key_valid_bit, source.key_offsets, source.key_data,
        source.key_data_len, len(keys), int(num_partitions), ffi.from_buffer("int32_t[]", out),
    )  # fmt: skip
    check(rc, "partitioning Arrow keys")
    return out

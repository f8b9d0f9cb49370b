"""One segment of a partition's log: ``.log`` + ``.index`` + ``.timeindex``.

On-disk format (Kafka's): ``%020d.log`` holds v2 record batches back to back,
named by the segment's base offset, with offsets and positions indexed
sparsely (see :mod:`logstore.storage.index`). Positions are u32, so a
segment stays below 2 GiB.

Writes: whole batches go to the end of ``.log`` with ``pwrite`` (bench/
measures this against copying into a preallocated map; pwrite won, and it
keeps the file size equal to the data, so a torn tail is all a crash can
leave). The log is written before its index entries, so an index never
points past the log.

Reads: the file is memory-mapped; a read returns a zero-copy memoryview of
whole batches, and the file position and size for ``sendfile``. The map is
extended lazily when a read reaches bytes appended after it was made.

Crash policy: ``recover()`` rescans the log from its start, validating each
batch (structure, CRC-32C, increasing offsets), truncates the file at the
first invalid or incomplete batch and rebuilds both indexes. Opening a
segment verifies its indexes against the log and recovers when one is
missing or damaged. A closed segment raises :class:`ClosedError`.

Invariants: ``size`` is the byte length of whole valid batches;
``base_offset <= next_offset``; index entries point at batch starts.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from logstore import _crashpoints as crashpoints
from logstore._native import ffi, lib, raise_for
from logstore._speedups import locate, record_at
from logstore.errors import (
    ClosedError,
    CorruptIndexError,
    CorruptRecordError,
    InvalidArgumentError,
    LogstoreError,
)
from logstore.records.batch import RecordBatch
from logstore.records.record import Record
from logstore.storage.index import IndexFullError, OffsetIndex, TimeIndex
from logstore.storage.transactions import TXN_INDEX_SUFFIX
from logstore.storage.validator import ScannedBatches

SEGMENT_SIZE_MAX = 0x7FFFFFFF  # positions are u32; Kafka caps segments at Int.MaxValue
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_MAX_INDEX_SIZE = 10 * 1024 * 1024
# Index entries an append's scan can yield into the segment's reusable scratch.
_APPEND_SCRATCH_CAP = 64
# Reads below this many bytes are served by copying from the map, larger ones by sendfile
# (broker/apis/fetch.py): a copy costs less than a sendfile's system calls below it.
COPIED_READ_BYTES = 16 * 1024


def _scratch_pointers(scratch: tuple[Any, Any, Any]) -> tuple[Any, ...]:
    """C pointers to a scan's scratch: entry offsets, positions, timestamps, time-entry offsets."""
    positions_and_offsets, stamps, time_offsets = scratch
    return (
        ffi.from_buffer("uint32_t[]", positions_and_offsets[0]),
        ffi.from_buffer("uint32_t[]", positions_and_offsets[1]),
        ffi.from_buffer("int64_t[]", stamps),
        ffi.from_buffer("uint32_t[]", time_offsets),
    )


def segment_file_name(base_offset: int, suffix: str) -> str:
    """Kafka's file name: the base offset as 20 digits, then the suffix.

    >>> segment_file_name(42, ".log")
    '00000000000000000042.log'
    """
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True)
class SegmentRead:
    """Whole batches read from a segment: where they lie, and a zero-copy view."""

    segment: LogSegment
    position: int
    size: int
    view: memoryview

    @property
    def path(self) -> str:
        return self.segment.log_path


class LogSegment:
    """A log file and its two indexes; one writer, many readers.

    Appends are O(bytes) (one pwrite, one header walk in C); lookups are
    O(log entries) in the index plus a header walk of at most
    ``index.interval.bytes``.
    """

    def __init__(
        self,
        directory: str,
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        max_index_size: int = DEFAULT_MAX_INDEX_SIZE,
        active: bool = True,
        create: bool = False,
        dense: bool = True,
        leader_epoch_max: int = -1,
        clean_shutdown: bool = False,
    ) -> None:
        if base_offset < 0:
            raise InvalidArgumentError(f"segment base offset must be >= 0, got {base_offset}")
        self.directory = directory
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_index_size = max_index_size
        self.active = active
        self._clean_shutdown = clean_shutdown
        # Integrity rules every scan of this segment applies: offsets dense
        # unless the log is compacted, leader epochs in range.
        self.scan_flags = lib.LS_SCAN_MONOTONIC | lib.LS_SCAN_EPOCH | (lib.LS_SCAN_DENSE if dense else 0)
        self.leader_epoch_max = leader_epoch_max
        # Bytes of whole valid batches in a sealed segment that is damaged
        # after them: nothing at or past it is served (None: undamaged).
        self.damaged_at: int | None = None
        self.log_path = os.path.join(directory, segment_file_name(base_offset, ".log"))
        self._closed = False
        self._record_cache: dict[int, bytes] = {}
        self._batch_size_max = SEGMENT_SIZE_MAX
        self._small_scratch: tuple[Any, tuple[Any, ...]] | None = None
        self._append_state: Any = ffi.new("ls_scan_t *")
        self._map: mmap.mmap | None = None
        self._map_ptr: Any = ffi.NULL
        self._map_size = 0
        flags = os.O_RDWR | os.O_CREAT | (os.O_EXCL if create else 0)
        self._fd = os.open(self.log_path, flags, 0o644)
        self.size = os.fstat(self._fd).st_size
        self.bytes_since_index = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self.next_offset = base_offset
        # Kafka resets a segment's creation time when it is loaded.
        self.created_ms = int(time.time() * 1000)
        self._rolling_timestamp: int | None = None
        self._suffix = ""
        index_missing = (
            not create
            and self.size > 0
            and not (
                os.path.exists(self._index_path(".index")) and os.path.exists(self._index_path(".timeindex"))
            )
        )
        self.offset_index = self._open_index(OffsetIndex, ".index", fresh=create or index_missing)
        self.time_index = self._open_index(TimeIndex, ".timeindex", fresh=create or index_missing)
        if not create:
            self._load(index_missing)

    # -- opening -----------------------------------------------------------

    @classmethod
    def create(cls, directory: str, base_offset: int, **kwargs: Any) -> LogSegment:
        """A new, empty, active segment (its files must not exist)."""
        return cls(directory, base_offset, create=True, **kwargs)

    @classmethod
    def open(cls, directory: str, base_offset: int, **kwargs: Any) -> LogSegment:
        """An existing segment; a missing or damaged index is rebuilt from the log."""
        return cls(directory, base_offset, create=False, **kwargs)

    def _index_path(self, suffix: str) -> str:
        return os.path.join(self.directory, segment_file_name(self.base_offset, suffix))

    def _open_index(self, cls: type[Any], suffix: str, fresh: bool) -> Any:
        path = self._index_path(suffix)
        if fresh and os.path.exists(path):
            os.unlink(path)
        try:
            return cls(
                path,
                self.base_offset,
                self.max_index_size,
                writable=self.active or fresh,
                exact_length=self._clean_shutdown and not fresh,
            )
        except CorruptIndexError:
            os.unlink(path)
            return cls(path, self.base_offset, self.max_index_size, writable=True)

    def _load(self, index_missing: bool) -> None:
        """Walk every batch header; verify the indexes against the log.

        A damaged active segment is recovered (truncated at the damage: it is
        the log's tail). A damaged sealed segment is left as it is on disk and
        marked ``damaged_at``: truncating it would open a hole before the
        segments after it, and nothing past the damage is served. Damaged or
        missing indexes are rebuilt from the log's valid batches.
        """
        walk = self._walk_state(self.size)
        if walk.stop != 0:
            if self.active:
                self.recover()
                return
            self.damaged_at = int(walk.bytes_valid)
        valid = int(walk.bytes_valid)
        try:
            if index_missing:
                raise CorruptIndexError(f"{self.log_path}: an index file is missing")
            self.offset_index.verify(self._pointer(), valid)
            self.time_index.verify(self.next_offset - 1)
            self.time_index.verify_log(self._pointer(), valid)
        except CorruptIndexError:
            self._rebuild_indexes(valid)
        _, position = self.offset_index.last_entry()
        self.bytes_since_index = valid - position if self.offset_index.entries else valid
        if not self.active:
            self.offset_index.seal()
            self.time_index.seal()

    def _walk_state(self, end: int) -> Any:
        """Header walk of [0, end): sets next offset and max timestamp; returns the scan."""
        state, _ = self._scan(0, flags=self.scan_flags, index=False, end=end)
        self.next_offset = int(state.offset_last) + 1 if state.batch_count else self.base_offset
        self.max_timestamp = int(state.timestamp_max)
        self.offset_of_max_timestamp = int(state.timestamp_max_offset)
        return state

    def _reindex(self, end: int, flags: int) -> Any:
        """Empty both indexes, then index the valid batches of [0, end); returns the scan."""
        for index in (self.offset_index, self.time_index):
            if not index.writable:
                index.writable = True
                index.resize(self.max_index_size)
            index.reset()
        self.bytes_since_index = 0
        state, scratch = self._scan(0, flags=flags, index=True, end=end)
        self._apply_index_entries(state, scratch)
        return state

    def _rebuild_indexes(self, end: int) -> None:
        """Both indexes anew from the log's batches in [0, end), CRC-checked; no truncation."""
        state = self._reindex(end, self.scan_flags | lib.LS_SCAN_CRC)
        if state.stop != 0 and not self.active:
            self.damaged_at = int(state.bytes_valid)
        self._walk_state(int(state.bytes_valid))

    def valid_size(self) -> int:
        """Bytes that may be served: all of them, unless the segment is damaged."""
        return self.size if self.damaged_at is None else self.damaged_at

    # -- the map -----------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise ClosedError(f"segment {self.log_path} is closed; reopen the log to read it")

    def _pointer(self) -> Any:
        """A cffi pointer to the mapped log, covering all ``size`` bytes."""
        self._check_open()
        if self._map_size < self.size:
            self._remap()
        return self._map_ptr

    def _remap(self) -> None:
        old = self._map
        self._map = mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) if self.size else None
        self._map_ptr = ffi.from_buffer(self._map) if self._map is not None else ffi.NULL
        self._map_size = self.size
        if old is not None:
            # A reader may still hold a view; the map then closes when it lets go.
            with contextlib.suppress(BufferError):
                old.close()

    def view(self, position: int = 0, size: int | None = None) -> memoryview:
        """Zero-copy view of ``size`` bytes at ``position`` (whole batches or not)."""
        self._pointer()
        end = self.size if size is None else position + size
        if not 0 <= position <= end <= self.size:
            raise InvalidArgumentError(
                f"bytes {position}..{end} are outside {self.log_path} (size {self.size})"
            )
        if self._map is None:
            return memoryview(b"")
        return memoryview(self._map)[position:end]

    # -- scanning and appending -------------------------------------------

    def _scan(
        self, position: int, flags: int, index: bool, data: Any = None, end: int | None = None
    ) -> tuple[Any, Any]:
        """Run the native scan over ``data`` (default: the log from ``position``)."""
        # Appends (one writer, under the log's lock) reuse one state: ffi.new costs ~1 us.
        state = self._append_state if data is not None else ffi.new("ls_scan_t *")
        state.position_base = position if data is None else self.size
        state.segment_base_offset = self.base_offset
        state.index_interval = self.index_interval_bytes if index else 0
        state.bytes_since_index = self.bytes_since_index
        if data is not None:
            state.offset_prev = self.next_offset - 1
        else:  # a walk from the start: the first batch may not start below the base
            state.offset_prev = self.base_offset - 1 if position == 0 else -1
        state.timestamp_max = self.max_timestamp if data is not None else -1
        state.timestamp_max_offset = self.offset_of_max_timestamp if data is not None else -1
        state.time_index_last = self.time_index.last_timestamp
        state.batch_size_max = self._batch_size_max
        state.leader_epoch_max = self.leader_epoch_max
        state.leader_epoch_prev = -1
        state.flags = flags
        if data is None:
            buf, length = self._pointer() + position, (self.size if end is None else end) - position
        else:
            buf = ffi.from_buffer(data)
            length = len(buf)
        cap = length // max(self.index_interval_bytes, 1) + 2 if index else 0
        if data is not None and cap <= _APPEND_SCRATCH_CAP:
            # Appends (under the log's lock) reuse one small scratch: most are far below it.
            scratch, pointers = self._append_scratch()
            cap = _APPEND_SCRATCH_CAP
        else:
            scratch = np.empty((2, cap), np.uint32), np.empty(cap, np.int64), np.empty(cap, np.uint32)
            pointers = _scratch_pointers(scratch)
        rc = lib.ls_scan_batches(buf, length, state, *pointers, cap)
        if rc != 0:
            raise_for(rc, f"scanning {self.log_path}")
        return state, scratch

    def _index_scanned(self, scanned: ScannedBatches, offset_next: int, append_time: int) -> tuple[Any, Any]:
        """The index entries of scanned batches appended at the end (``ls_index_batches``: the
        rule :meth:`_scan` applies, from the scan's per-batch sizes, offsets and timestamps)."""
        state = self._append_state
        state.position_base = self.size
        state.segment_base_offset = self.base_offset
        state.index_interval = self.index_interval_bytes
        state.bytes_since_index = self.bytes_since_index
        state.offset_prev = self.next_offset - 1
        state.timestamp_max = self.max_timestamp
        state.timestamp_max_offset = self.offset_of_max_timestamp
        state.time_index_last = self.time_index.last_timestamp
        state.flags = lib.LS_SCAN_MONOTONIC
        count = scanned.count
        if count + 1 <= _APPEND_SCRATCH_CAP:
            scratch, pointers = self._append_scratch()
            cap = _APPEND_SCRATCH_CAP
        else:
            cap = count + 1
            scratch = np.empty((2, cap), np.uint32), np.empty(cap, np.int64), np.empty(cap, np.uint32)
            pointers = _scratch_pointers(scratch)
        rc = lib.ls_index_batches(scanned.batches, count, offset_next, append_time, state, *pointers, cap)
        if rc != 0:
            raise_for(rc, f"indexing batches appended to {self.log_path}")
        return state, scratch

    def _append_scratch(self) -> tuple[Any, tuple[Any, ...]]:
        if self._small_scratch is None:
            cap = _APPEND_SCRATCH_CAP
            arrays = np.empty((2, cap), np.uint32), np.empty(cap, np.int64), np.empty(cap, np.uint32)
            self._small_scratch = arrays, _scratch_pointers(arrays)
        return self._small_scratch

    def _apply_index_entries(self, state: Any, scratch: Any) -> None:
        offsets_positions, stamps, time_offsets = scratch
        n, t = state.index_count, state.time_index_count
        if n:
            self.offset_index.append_relative(offsets_positions[0][:n], offsets_positions[1][:n])
        if t:
            self.time_index.append_relative(stamps[:t], time_offsets[:t])

    def append(
        self,
        data: bytes | bytearray | memoryview,
        scanned: ScannedBatches | None = None,
        offset_next: int = -1,
        append_time: int = -1,
    ) -> int:
        """Append whole batches whose offsets are assigned and above ``next_offset``.

        The bytes must already be validated (CRC) by the caller; this checks
        structure and offsets, writes them, and indexes them. ``scanned``: the
        validator's scan of ``data`` (whose offsets were then assigned from
        ``offset_next``, or are the batches' own when -1, with ``append_time``
        as their LogAppendTime when >= 0): the index entries come from it
        (``ls_index_batches``) instead of a walk of the bytes. Returns the new
        next offset. Raises IndexFullError (nothing written) when the indexes
        cannot take the entries: roll first.
        """
        self._check_open()
        if not self.active:
            raise InvalidArgumentError(f"{self.log_path} is sealed; append to the active segment")
        length = len(data)
        if self.size + length > SEGMENT_SIZE_MAX:
            raise InvalidArgumentError(f"{self.log_path} would pass {SEGMENT_SIZE_MAX} bytes; roll first")
        if scanned is None:
            state, scratch = self._scan(0, flags=lib.LS_SCAN_MONOTONIC, index=True, data=data)
        else:
            state, scratch = self._index_scanned(scanned, offset_next, append_time)
        if state.stop != 0 or state.bytes_valid != length:
            raise_for(state.stop or lib.LS_ERR_CORRUPT, f"appending to {self.log_path}")
        if (
            self.offset_index.entries + state.index_count > self.offset_index.max_entries
            or self.time_index.entries + state.time_index_count > self.time_index.max_entries
        ):
            raise IndexFullError(f"the indexes of {self.log_path} are full; roll the segment")
        if self.size == 0:
            if scanned is not None:
                first_max = append_time if append_time >= 0 else scanned.first.timestamp_max
            else:
                first_max = int(RecordBatch(memoryview(data)).max_timestamp)
            self._rolling_timestamp = first_max if first_max >= 0 else self.created_ms
        if crashpoints.ARMED and crashpoints.reached("segment.mid_write"):
            self._write(memoryview(data)[: length // 2], self.size)
            crashpoints.die()
        self._write(data, self.size)
        crashpoints.crash_point("segment.after_log_write")
        self._apply_index_entries(state, scratch)
        self.size += length
        self.bytes_since_index = state.bytes_since_index
        self.max_timestamp = state.timestamp_max
        self.offset_of_max_timestamp = state.timestamp_max_offset
        if state.batch_count:
            self.next_offset = state.offset_last + 1
        return self.next_offset

    def _write(self, data: Any, position: int) -> None:
        view = memoryview(data).cast("B")
        written = os.pwrite(self._fd, view, position)
        # pwrite may write less than asked; each pass writes at least one byte.
        for _ in range(len(view) + 1):
            if written >= len(view):
                return
            written += os.pwrite(self._fd, view[written:], position + written)
        raise LogstoreError(f"pwrite to {self.log_path} made no progress")

    # -- reading -----------------------------------------------------------

    def translate_offset(self, offset: int, start_position: int = 0) -> tuple[int, int] | None:
        """(position, size) of the first batch whose last offset >= ``offset``, or None.

        Index lookup and position search in one C call (the hot path of every read).
        """
        if self._map_size < self.size or self._closed:
            self._pointer()
        valid = self.size if self.damaged_at is None else self.damaged_at
        if self._map is None or valid == 0:
            found = lib.LS_ERR_NOT_FOUND
        elif start_position:
            out = ffi.new("int64_t[2]")
            rc = lib.ls_search_offset(self._map_ptr, valid, start_position, offset, out, out + 1)
            found = int(out[0]) << 32 | int(out[1]) if rc == 0 else rc
        else:
            # The index's fields directly: this is every read's hot path, and
            # the segment (checked open above) owns the index.
            index = self.offset_index
            log = self._map if valid == self._map_size else memoryview(self._map)[:valid]
            found = locate(log, index._buffer, index._entries, self.base_offset, offset)
        if found >= 0:
            return found >> 32, found & 0xFFFFFFFF
        if found == lib.LS_ERR_NOT_FOUND:
            self._refuse_damaged(offset)
            return None
        raise_for(found, f"looking up offset {offset} in {self.log_path}")

    def _refuse_damaged(self, offset: int) -> None:
        """Raise if ``offset`` lies in the damaged part of this segment."""
        if self.damaged_at is not None and offset < self.next_offset:
            raise CorruptRecordError(
                f"{self.log_path}: the batch holding offset {offset} is damaged (from byte {self.damaged_at}) "
                "and is not served; restore the segment from a replica or delete the records before it"
            )

    def fileno(self) -> int:
        """The log file's descriptor (for ``sendfile``; dup it to keep it past a close)."""
        if self._closed:
            raise ClosedError(f"segment {self.log_path} is closed")
        return self._fd

    def read_checked(self, offset: int, max_bytes: int, offset_limit: int) -> tuple[SegmentRead, int] | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes`` (at least one) and
        below ``offset_limit`` (their base offsets), with their record count: one C scan
        (``ls_scan_batches`` with ``LS_SCAN_LIMITS``) finds where they end and checks them as
        every scan of this segment does, CRC-32C included. A batch failing a check is not served:
        the batches before it are (the reader's next fetch starts at it), and a read that starts
        at it raises CorruptRecordError. None when no batch below the limit holds ``offset`` or a
        later one.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position = found[0]
        valid = self.valid_size()
        if position >= valid:
            return None
        state = ffi.new("ls_scan_t *")
        state.bytes_max = max_bytes
        state.offset_limit = offset_limit
        state.offset_prev = -1
        state.timestamp_max = -1
        state.timestamp_max_offset = -1
        state.time_index_last = -1
        state.leader_epoch_max = self.leader_epoch_max
        state.leader_epoch_prev = -1
        flags = self.scan_flags | lib.LS_SCAN_CRC | lib.LS_SCAN_LIMITS
        state.flags = flags
        rc = lib.ls_scan_batches(self._pointer() + position, valid - position, state, ffi.NULL, ffi.NULL,
                                 ffi.NULL, ffi.NULL, 0)  # fmt: skip
        if rc != 0:
            raise_for(rc, f"reading {self.log_path} at byte {position}")
        # In a log that was never compacted the batch holding ``offset`` starts at or before it:
        # a later start means its base offset (which the CRC does not cover) was damaged.
        if flags & lib.LS_SCAN_DENSE and state.batch_count and state.offset_first > offset:
            state.stop, state.bytes_valid = lib.LS_ERR_OFFSET, 0
        if state.stop != 0 and state.bytes_valid == 0:
            raise CorruptRecordError(
                f"{self.log_path}: the batch at byte {position + state.bytes_valid} failed its check and is "
                "not served; restart to recover the log, or restore the segment from a replica"
            )
        size = int(state.bytes_valid)
        if size == 0:
            return None
        return SegmentRead(self, position, size, self.view(position, size)), int(state.record_count)

    def read(self, offset: int, max_bytes: int, max_position: int | None = None) -> SegmentRead | None:
        """Whole batches from the one holding ``offset``, up to ``max_bytes``.

        At least one batch is returned if any holds an offset >= ``offset``
        below ``max_position`` (as Kafka does, so a large batch never stalls
        a reader); None when there is none.
        """
        found = self.translate_offset(offset)
        if found is None:
            return None
        position, _ = found
        valid = self.valid_size()
        end = valid if max_position is None else min(max_position, valid)
        if position >= end:
            return None
        out = ffi.new("int64_t[2]")
        rc = lib.ls_span_batches(self._pointer(), end, position, max_bytes, out, out + 1)
        size = int(out[0])
        if rc == 0 and size < COPIED_READ_BYTES:
            # A span this small is served by a copy from the map (broker/apis/fetch.py), not by
            # sendfile: its pages are read in here, under the SIGBUS guard, so that a bad block is
            # this read's I/O error (the log's directory fails) and never a signal in the copy.
            rc = lib.ls_touch(self._map_ptr + position, size)
        if rc != 0:
            raise_for(rc, f"reading {self.log_path} at byte {position}")
        return SegmentRead(self, position, size, self.view(position, size))

    def record_at(self, offset: int) -> Record | None:
        """The record with ``offset``, or None if no record has it. O(log n), one C call.

        The first visit to a batch checks its CRC and caches its record
        positions (4 bytes a record, for at most 65,536 batches a segment).
        """
        if self._map_size < self.size or self._map is None:
            self._pointer()
            if self._map is None:
                return None
        index = self.offset_index
        log = self._map if self.damaged_at is None else memoryview(self._map)[: self.damaged_at]
        try:
            found = record_at(
                log, index._buffer, index._entries, self.base_offset, offset, self._record_cache
            )
        except ValueError as exc:
            raise CorruptRecordError(f"{self.log_path}: {exc}; it is not served") from exc
        if found is None:
            self._refuse_damaged(offset)
        if found is False:  # a compressed batch: decode it whole
            read = self.read(offset, 1)
            records = [] if read is None else RecordBatch(read.view).records
            return next((r for r in records if r.offset == offset), None)
        return found  # type: ignore[return-value]

    def find_offset_by_timestamp(
        self, timestamp: int, start_offset: int | None = None
    ) -> tuple[int, int] | None:
        """(timestamp, offset) of the first record at or after ``timestamp``, or None."""
        start = self.base_offset if start_offset is None else start_offset
        _, indexed_offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(indexed_offset, start))
        log = self._pointer()
        valid = self.valid_size()
        out = ffi.new("int64_t[2]")
        for _ in range(valid // lib.LS_BATCH_HEADER_SIZE + 1):
            rc = lib.ls_search_timestamp(log, valid, position, timestamp, out, out + 1)
            if rc == lib.LS_ERR_NOT_FOUND:
                return None
            if rc != 0:
                raise_for(rc, f"searching {self.log_path} by timestamp")
            batch = RecordBatch(self.view(int(out[0]), int(out[1])))
            for record in batch.records:
                if record.timestamp is not None and record.timestamp >= timestamp and record.offset >= start:
                    return record.timestamp, record.offset
            position = int(out[0] + out[1])
        return None

    # -- maintenance -------------------------------------------------------

    def verify_indexes(self) -> None:
        """Raise CorruptIndexError unless both indexes agree with the log."""
        valid = self.valid_size()
        self.offset_index.verify(self._pointer(), valid)
        self.time_index.verify(self.next_offset - 1)
        self.time_index.verify_log(self._pointer(), valid)

    def recover(self, max_batch_size: int = SEGMENT_SIZE_MAX) -> int:
        """Rebuild the indexes from the log, truncating at the first invalid batch.

        Returns the number of bytes truncated. O(segment bytes), in C.
        """
        self._check_open()
        self._batch_size_max = max_batch_size
        try:
            state = self._reindex(self.size, self.scan_flags | lib.LS_SCAN_CRC | lib.LS_SCAN_RECORDS)
        finally:
            self._batch_size_max = SEGMENT_SIZE_MAX
        self.damaged_at = None
        truncated = self.size - state.bytes_valid
        if truncated:
            self._truncate_file(state.bytes_valid)
        self.bytes_since_index = state.bytes_since_index
        self.max_timestamp = state.timestamp_max
        self.offset_of_max_timestamp = state.timestamp_max_offset
        self.next_offset = state.offset_last + 1 if state.batch_count else self.base_offset
        if not self.active:
            self.offset_index.seal()
            self.time_index.seal()
        return int(truncated)

    def _truncate_file(self, size: int) -> None:
        self._record_cache.clear()
        os.ftruncate(self._fd, size)
        self.size = size
        self._rolling_timestamp = None
        if self._map_size > size:
            self._remap()

    def truncate_to(self, offset: int) -> int:
        """Remove every batch whose last offset is >= ``offset``; returns bytes removed.

        Truncation is at batch boundaries: the batch holding ``offset`` goes.
        """
        found = self.translate_offset(offset)
        if found is None:
            return 0
        position, _ = found
        removed = self.size - position
        self.offset_index.truncate_to(offset)
        self.time_index.truncate_to(offset)
        self._truncate_file(position)
        self._walk_state(self.size)
        _, indexed = self.offset_index.last_entry()
        self.bytes_since_index = self.size - indexed if self.offset_index.entries else self.size
        return removed

    def seal(self) -> None:
        """Make the segment read-only on roll: last time entry, trimmed indexes."""
        self._check_open()
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(
                self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True
            )
        self.offset_index.seal()
        self.time_index.seal()
        self.active = False

    def flush(self) -> None:
        """fsync the log, then flush the indexes."""
        self.sync_log()
        self.offset_index.flush()
        self.time_index.flush()

    def sync_log(self) -> None:
        """fsync the log file only: what durability needs (indexes are rebuilt on recovery).

        Safe while another thread seals the segment: it touches no index.
        """
        self._check_open()
        os.fdatasync(self._fd)

    def close(self) -> None:
        """Trim the indexes and release the files. Idempotent."""
        if self._closed:
            return
        self.offset_index.close()
        self.time_index.close()
        self._closed = True
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
        self._map, self._map_ptr = None, ffi.NULL
        os.close(self._fd)

    def release(self) -> None:
        """Release the files with no I/O (no index trim): the directory failed. Idempotent."""
        if self._closed:
            return
        self.offset_index.release()
        self.time_index.release()
        self._closed = True
        if self._map is not None:
            with contextlib.suppress(BufferError):
                self._map.close()
        self._map, self._map_ptr = None, ffi.NULL
        with contextlib.suppress(OSError):
            os.close(self._fd)

    def delete(self) -> None:
        """Close and remove the segment's files."""
        self.close()
        for path in self.paths():
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def rolling_timestamp_ms(self) -> int:
        """What segment.ms counts from: the first batch's max timestamp, else creation."""
        if self._rolling_timestamp is None and self.size >= lib.LS_BATCH_HEADER_SIZE:
            first = RecordBatch(self.view(0, lib.LS_BATCH_HEADER_SIZE))
            self._rolling_timestamp = (
                int(first.max_timestamp) if first.max_timestamp >= 0 else self.created_ms
            )
        return self.created_ms if self._rolling_timestamp is None else self._rolling_timestamp

    @property
    def largest_timestamp_ms(self) -> int:
        """What retention.ms counts from: the max timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.stat(self.log_path).st_mtime * 1000)

    def paths(self) -> list[str]:
        """The segment's files; the ``.txnindex`` (storage/transactions.py) only while it exists."""
        txn_index = self.log_path[: -len(".log" + self._suffix)] + TXN_INDEX_SUFFIX + self._suffix
        found = [txn_index] if os.path.exists(txn_index) else []
        return [self.log_path, self.offset_index.path, self.time_index.path, *found]

    def rename_suffix(self, suffix: str) -> None:
        """Rename the segment's files to carry ``suffix`` (".deleted", ".swap", "")."""
        stem = os.path.join(self.directory, segment_file_name(self.base_offset, ""))
        for kind in (".log", ".index", ".timeindex", TXN_INDEX_SUFFIX):
            old = stem + kind + self._suffix
            if os.path.exists(old):
                os.replace(old, stem + kind + suffix)
        self.log_path = stem + ".log" + suffix
        self.offset_index.path = stem + ".index" + suffix
        self.time_index.path = stem + ".timeindex" + suffix
        self._suffix = suffix

    def __repr__(self) -> str:
        return (
            f"LogSegment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset}, "
            f"active={self.active})"
        )

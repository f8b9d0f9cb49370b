"""A logstore data directory read straight from its segment files: read-only, no Store, no lock.

Spark executors (other processes) and ``logstore.arrow.read_table`` read a
data directory that a live broker may own and be appending to, so nothing
here writes, locks or recovers anything. The layout read (Kafka's; see
:mod:`logstore.storage.store`, :mod:`~logstore.storage.segment` and
:mod:`~logstore.storage.index`)::

    <data>/topic-configs/<topic>.properties   partitions=N (one line of key=value per setting)
    <data>/log-start-offset-checkpoint        "0", count, then "topic partition offset" lines
    <data>/<topic>-<p>/<base:020d>.log        v2 record batches back to back
    <data>/<topic>-<p>/<base:020d>.index      8-byte big-endian entries (relative offset u32, position u32)
    <data>/<topic>-<p>/<base:020d>.timeindex  12-byte entries (timestamp i64, relative offset u32)

A standalone :class:`~logstore.storage.log.Log` keeps its own
``log-start-offset-checkpoint`` inside ``<topic>-<p>/``; both are read.

How the writer's concurrency is met:

- Sealed segments (every one but the last) never change: the log and its
  trimmed indexes are memory-mapped, and reads are zero-copy views.
- The last (active) segment grows by ``pwrite``, and its index file is
  preallocated and trimmed when the segment rolls, and a broker restarting
  after a crash truncates a torn tail. A map of a file that shrinks kills the
  reader with SIGBUS, so the active segment is read with ``pread`` (a copy
  of the bytes returned) and its index with ``pread`` of the entries not yet
  seen. No prefix of it is safe to map either: recovery rescans the whole
  active segment and cuts at its first invalid batch, wherever that is (a
  write the disk lost below the recovery point too), and
  ``Log.truncate_to`` cuts at any batch. Only whole batches are ever returned: a batch the broker is still
  writing is incomplete and stops the walk quietly.
- Index entries are hints, checked before use (the batch at the position
  must end at the entry's offset); a torn or stale entry costs a longer
  header walk, never a wrong answer.
- A segment deleted by retention while being read is still readable through
  its open descriptor; one found gone on open makes the listing refresh, and
  an offset below the new log start raises :class:`OffsetGoneError`.

Costs: ``read`` is O(log segments) to pick the segment, an index lookup
(C, binary search; none for a read that starts where the last one ended)
and a header walk of at most ``index.interval.bytes`` plus the batches
returned (C); the active segment adds one copy of the bytes read. ``end_offset`` walks the headers after the last position it
knows (the last index entry at first, then where it ended before).

Not thread-safe: one :class:`PartitionFiles` per reading thread.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import re
import struct
from bisect import bisect_right
from collections.abc import Iterator
from typing import Any

import numpy as np

from logstore._native import ffi, lib, raise_for
from logstore._speedups import locate
from logstore.errors import (
    CorruptRecordError,
    InvalidArgumentError,
    LogstoreError,
    OffsetGoneError,
    UnknownTopicError,
)
from logstore.records.batch import RecordBatch, scan
from logstore.storage.checkpoints import read_offsets
from logstore.storage.log import LOG_START_FILE
from logstore.storage.store import TOPIC_CONFIGS, _read_properties, topic_name

__all__ = ["OffsetGoneError", "PartitionFiles", "list_topics"]

HEADER_SIZE = lib.LS_BATCH_HEADER_SIZE
_SEGMENT_LOG = re.compile(r"^(\d{20})\.log$")
_LENGTH = struct.Struct(">i")
# A v2 batch header's first fields: base offset, batch length, leader epoch, magic, CRC,
# attributes, last offset delta (Kafka's layout; the record count etc. follow).
_HEAD = struct.Struct(">qiibIhi")
_OFFSET_ENTRY = 8
_TIME_ENTRY = 12
# Smallest pread of the active segment: below this a syscall costs more than the bytes.
_WINDOW_MIN = 64 * 1024
# Bytes of index entries read at a time from the active segment's preallocated index.
_INDEX_CHUNK = 64 * 1024
# A torn index write can leave this many entries with a wrong position (numpy writes a
# column at a time, the scan yields up to 64 entries an append); older entries are checked.
_INDEX_BACKTRACK = 128
# Boundaries (offset after, position) remembered for the active segment: a read starting at
# one skips the index lookup (a walk reads each batch once).
_CURSORS_MAX = 8


def list_topics(data_dir: str) -> dict[str, int]:
    """Topic -> partition count of a data directory, from ``topic-configs/*.properties``. O(topics).

    Only topics whose properties file exists are listed: a deleted topic's
    file goes before its directories are renamed ``...-delete``, so those are
    never seen. Raises :class:`LogstoreError` if ``data_dir`` is not a
    logstore data directory.
    """
    configs = os.path.join(data_dir, TOPIC_CONFIGS)
    if not os.path.isdir(configs):
        raise LogstoreError(
            f"{data_dir} is not a logstore data directory (it has no {TOPIC_CONFIGS}/ folder); "
            "pass the directory a broker or Store was started with (its --data-dir)"
        )
    topics: dict[str, int] = {}
    for name in sorted(os.listdir(configs)):
        if not name.endswith(".properties"):
            continue
        try:
            properties = _read_properties(os.path.join(configs, name))
        except FileNotFoundError:
            continue  # deleted since the listing
        try:
            topics[topic_name(name)] = int(properties.get("partitions", "1"))
        except ValueError:
            raise LogstoreError(
                f"{os.path.join(configs, name)}: partitions={properties['partitions']!r} is not a number; "
                "the file is damaged"
            ) from None
    return topics


def _scan_whole(buf: Any) -> Any:
    """Header walk (no CRC) of ``buf``: bytes_valid, offset_last, stop of its whole batches. O(batches)."""
    return scan(buf, 0)


def _batch_size_needed(buf: Any) -> int:
    """Bytes of the batch starting at ``buf[0]`` by its length field, or 0 if fewer than 12 bytes."""
    if len(buf) < lib.LS_LOG_OVERHEAD:
        return 0
    return int(_LENGTH.unpack_from(buf, 8)[0]) + lib.LS_LOG_OVERHEAD


class _IndexTail:
    """The live entries of the active segment's preallocated index, read with pread as they appear.

    Entries past the live ones are zero (the file is preallocated); the last
    live entry may be mid-write, so it is held back until a later entry
    follows it. O(new entries) per ``grow``.
    """

    def __init__(self, path: str, entry_size: int) -> None:
        self.path = path
        self.entry_size = entry_size
        self.entries = bytearray()
        self._fd: int | None = None
        self._missing = False

    @property
    def count(self) -> int:
        return len(self.entries) // self.entry_size

    def grow(self) -> None:
        """Read the entries written since the last call (all but the newest)."""
        if self._fd is None and not self._missing:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                self._missing = True  # the broker rebuilds a missing index at its next start
        if self._fd is None:
            return
        size = self.entry_size
        fresh = bytearray()
        at = len(self.entries)
        # Each pass reads one chunk; the file is at most segment.index.bytes long.
        for _ in range(os.fstat(self._fd).st_size // _INDEX_CHUNK + 2):
            chunk = os.pread(self._fd, _INDEX_CHUNK - _INDEX_CHUNK % size, at)
            n = len(chunk) // size
            if n == 0:
                break
            raw = np.frombuffer(chunk, np.uint8, count=n * size).reshape(n, size)
            empty = np.flatnonzero(~raw.any(axis=1))
            live = int(empty[0]) if len(empty) else n
            fresh += chunk[: live * size]
            at += live * size
            if live < n:
                break
        if len(fresh) > size:
            self.entries += fresh[: len(fresh) - size]  # hold the newest back: it may be mid-write

    def truncate(self, count: int) -> None:
        """Forget entries from ``count`` on (they are read again by the next ``grow``)."""
        del self.entries[count * self.entry_size :]

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class _Segment:
    """One segment's files, read-only: mapped when sealed, pread while active (see the module)."""

    def __init__(self, directory: str, base_offset: int) -> None:
        self.directory = directory
        self.base_offset = base_offset
        stem = os.path.join(directory, f"{base_offset:020d}")
        self.log_path = stem + ".log"
        self.index_path = stem + ".index"
        self.time_index_path = stem + ".timeindex"
        self.sealed = False
        self.size = 0
        self._fd: int | None = None
        self._map: mmap.mmap | None = None
        self._index: Any = b""  # sealed: the mapped .index (or b"")
        self._index_count = 0
        self._time_index: Any = b""
        self._time_count = 0
        self._mapped = False
        self._offsets = _IndexTail(self.index_path, _OFFSET_ENTRY)
        self._times = _IndexTail(self.time_index_path, _TIME_ENTRY)
        self._cursors: list[tuple[int, int]] = []  # (offset after, position) at whole-batch ends
        self._scratch: bytearray | None = None  # the active segment's reused pread buffer

    # -- files -----------------------------------------------------------------

    def open(self) -> None:
        """Open the log (FileNotFoundError if retention or the cleaner removed it)."""
        if self._fd is None:
            self._fd = os.open(self.log_path, os.O_RDONLY)
            self.size = os.fstat(self._fd).st_size

    def seal(self) -> None:
        """A later segment exists: this one no longer changes, so it may be mapped."""
        self.sealed = True
        self._offsets.close()
        self._times.close()
        self._cursors = []
        self._scratch = None

    def refresh(self) -> None:
        """Re-read the active segment's size (a broker may have appended, or truncated a torn tail)."""
        self.open()
        assert self._fd is not None
        if self.sealed:
            return
        size = os.fstat(self._fd).st_size
        if size < self.size:  # truncated: positions remembered past it are void
            self._cursors = [c for c in self._cursors if c[1] <= size]
            self._offsets.truncate(0)
            self._times.truncate(0)
        self.size = size

    def _map_sealed(self) -> None:
        """Map the log and both indexes once (sealed files are trimmed and fixed)."""
        if self._mapped:
            return
        self.open()
        assert self._fd is not None
        self.size = os.fstat(self._fd).st_size
        self._map = mmap.mmap(self._fd, self.size, access=mmap.ACCESS_READ) if self.size else None
        self._index, self._index_count = self._map_index(self.index_path, _OFFSET_ENTRY)
        self._time_index, self._time_count = self._map_index(self.time_index_path, _TIME_ENTRY)
        if not self._still_named():
            # The cleaner swapped in a new segment under these names after the log was opened:
            # the indexes may be the new one's. Walk the log we hold without them.
            self._index, self._index_count, self._time_index, self._time_count = b"", 0, b"", 0
        self._mapped = True

    def _still_named(self) -> bool:
        """Whether the log file name still names the file we hold (checked after the indexes were
        opened: a swap renames the old log away first and the new log in last)."""
        assert self._fd is not None
        try:
            named = os.stat(self.log_path)
        except FileNotFoundError:
            return False
        held = os.fstat(self._fd)
        return (named.st_dev, named.st_ino) == (held.st_dev, held.st_ino)

    @staticmethod
    def _map_index(path: str, entry_size: int) -> tuple[Any, int]:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return b"", 0
        try:
            length = os.fstat(fd).st_size
            count = length // entry_size
            if count == 0:
                return b"", 0
            return mmap.mmap(fd, count * entry_size, access=mmap.ACCESS_READ), count
        finally:
            os.close(fd)

    def close(self) -> None:
        for mapped in (self._map, self._index, self._time_index):
            if isinstance(mapped, mmap.mmap):
                # A caller may still hold a view; the map then closes when it lets go.
                with contextlib.suppress(BufferError):
                    mapped.close()
        self._map, self._index, self._time_index = None, b"", b""
        self._mapped = False
        self._offsets.close()
        self._times.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    # -- windows of whole batches -----------------------------------------------

    def _windows(self, position: int, want: int, scratch: bool = True) -> Iterator[tuple[Any, int, int, int]]:
        """(buffer, file position of buffer[0], start, end): whole batches [start, end) of buffer.

        Sealed: the map itself, once (zero-copy). Active: pread windows of at
        least ``want`` bytes from ``position``, one after the other, until the
        end of the file or a batch not yet whole; ``scratch``: into one buffer
        reused by every window (each is gone once the next is read), else
        into fresh bytes.
        """
        if self.sealed:
            self._map_sealed()
            if self._map is not None and position < self.size:
                yield self._map, 0, position, self.size
            return
        assert self._fd is not None
        need = 0
        # Each pass consumes at least one whole batch (>= 61 bytes) or grows the window to one.
        for _ in range(self.size // HEADER_SIZE + 2):
            if position >= self.size:
                return
            length = min(self.size - position, max(want, _WINDOW_MIN, need))
            window = self._pread(length, position) if scratch else os.pread(self._fd, length, position)
            state = _scan_whole(window)
            valid = int(state.bytes_valid)
            if valid == 0:
                need = _batch_size_needed(window)
                if state.stop == lib.LS_ERR_INCOMPLETE and len(window) < need <= self.size - position:
                    continue  # a batch larger than the window: read all of it
                if state.stop not in (lib.LS_OK, lib.LS_ERR_INCOMPLETE):
                    raise CorruptRecordError(
                        f"{self.log_path}: the batch at byte {position} is malformed; the broker recovers "
                        "the segment at its next start"
                    )
                return  # a batch still being written: not served yet
            need = 0
            self._remember(int(state.offset_last) + 1, position + valid)
            yield window, position, 0, valid
            position += valid

    def _pread(self, length: int, position: int) -> memoryview:
        """``length`` bytes at ``position`` into the reused scratch buffer (fresh pages cost more
        than the copy: 8 MiB of new memory a read halved the decode rate)."""
        assert self._fd is not None
        if self._scratch is None or len(self._scratch) < length:
            self._scratch = bytearray(max(length, _WINDOW_MIN))
        read = os.preadv(self._fd, [memoryview(self._scratch)[:length]], position)
        return memoryview(self._scratch)[:read]

    def _remember(self, offset_after: int, position: int) -> None:
        """Keeps the newest boundaries (where the next sequential read starts) and the furthest
        (where end_offset walks on from); drops the oldest other one past _CURSORS_MAX."""
        cursors = self._cursors
        if (offset_after, position) in cursors:
            return
        cursors.append((offset_after, position))
        if len(cursors) > _CURSORS_MAX:
            furthest = max(cursors)
            cursors.remove(next(c for c in cursors if c != furthest))

    # -- where to start -----------------------------------------------------------

    def _start(self, offset: int) -> int:
        """A batch start at or before the batch holding ``offset`` (cursor, index, else 0)."""
        best = 0
        for after, position in self._cursors:
            if after == offset:
                return position  # a sequential read: where the last one ended, no index lookup
            if after <= offset:
                best = max(best, position)
        hint = self._offset_hint(offset)
        return max(best, hint)

    def _offset_hint(self, offset: int) -> int:
        """The position of the last checked index entry at or below ``offset`` (active segment)."""
        tail = self._offsets
        tail.grow()
        if tail.count == 0:
            return 0
        relative = min(max(offset - self.base_offset, 0), 0xFFFFFFFF)
        slot = int(lib.ls_offset_index_lookup(ffi.from_buffer(tail.entries), tail.count, relative))
        # Check the entry and older ones: a torn write leaves wrong positions at the end.
        for candidate in range(slot, max(slot - _INDEX_BACKTRACK, -1), -1):
            entry_relative, position = struct.unpack_from(">II", tail.entries, candidate * _OFFSET_ENTRY)
            if self._batch_ends_at(position, self.base_offset + entry_relative):
                if candidate < slot:
                    tail.truncate(candidate + 1)  # re-read the later ones when they settle
                return position
        tail.truncate(max(slot - _INDEX_BACKTRACK + 1, 0))
        return 0

    def _batch_ends_at(self, position: int, last_offset: int) -> bool:
        """Whether a whole batch starts at ``position`` whose last offset is ``last_offset``."""
        if position < 0 or position + HEADER_SIZE > self.size:
            return False
        assert self._fd is not None
        header = os.pread(self._fd, HEADER_SIZE, position)
        if len(header) < HEADER_SIZE:
            return False
        base, length, _, magic, _, _, delta = _HEAD.unpack_from(header, 0)
        whole = position + lib.LS_LOG_OVERHEAD + length <= self.size
        return bool(
            magic == 2
            and length >= HEADER_SIZE - lib.LS_LOG_OVERHEAD
            and whole
            and base + delta == last_offset
        )

    # -- reads --------------------------------------------------------------------

    def read(self, offset: int, max_bytes: int, scratch: bool = False) -> memoryview | None:
        """Whole batches from the one holding ``offset`` (or the first after it), <= max_bytes
        unless one batch is larger; None if no batch here ends at or after ``offset``.
        ``scratch``: an active segment's bytes land in the reused buffer."""
        offset = max(offset, self.base_offset)
        if self.sealed:
            return self._read_sealed(offset, max_bytes)
        start = self._start(offset)
        out = ffi.new("int64_t[2]")
        for window, at, begin, end in self._windows(start, max_bytes, scratch):
            rc = lib.ls_search_offset(ffi.from_buffer(window), end, begin, offset, out, out + 1)
            if rc == lib.LS_ERR_NOT_FOUND:
                continue
            if rc != 0:
                raise_for(rc, f"searching {self.log_path} from byte {at + begin}")
            return self._span(window, end, int(out[0]), max_bytes, at)
        return None

    def _read_sealed(self, offset: int, max_bytes: int) -> memoryview | None:
        self._map_sealed()
        position = self._sealed_position(offset)
        if position is None:
            return None
        assert self._map is not None
        return self._span(self._map, self.size, position, max_bytes, 0)

    def _span(self, buf: Any, end: int, position: int, max_bytes: int, at: int) -> memoryview:
        """Whole batches of ``buf[position:end]`` within ``max_bytes`` (at least one)."""
        out = ffi.new("int64_t[2]")
        rc = lib.ls_span_batches(ffi.from_buffer(buf), end, position, max_bytes, out, out + 1)
        if rc != 0:
            # A damaged tail (a sealed segment the broker marked damaged): serve what is whole before it.
            valid = int(_scan_whole(memoryview(buf)[position:end]).bytes_valid)
            if valid == 0:
                raise CorruptRecordError(
                    f"{self.log_path}: the batch at byte {at + position} is damaged and is not served; "
                    "restore the segment from a replica or delete the records before it"
                )
            rc = lib.ls_span_batches(
                ffi.from_buffer(buf), position + valid, position, max_bytes, out, out + 1
            )
            if rc != 0:
                raise_for(rc, f"reading {self.log_path} at byte {at + position}")
        size = int(out[0])
        assert size > 0 and position + size <= end, (position, size, end)
        view = memoryview(buf)[position : position + size]
        if not self.sealed:
            self._remember(int(_scan_whole(view).offset_last) + 1, at + position + size)
        return view

    def end_offset(self) -> int:
        """The offset after the last whole batch (the base offset if there is none). O(new batches)."""
        position, after = 0, self.base_offset
        for known_after, known_position in self._cursors:
            if known_position > position:
                position, after = known_position, known_after
        # The last checked index entry: the batch there is whole, so the walk below counts it.
        position = max(position, self._offset_hint(2**63 - 1))
        for window, _, begin, end in self._windows(position, 1 << 20):
            after = max(after, int(_scan_whole(memoryview(window)[begin:end]).offset_last) + 1)
        return after

    def find_timestamp(self, timestamp: int, min_offset: int) -> int | None:
        """The first offset >= ``min_offset`` whose record's timestamp >= ``timestamp``, or None.

        Kafka's rule (``LogSegment.findOffsetByTimestamp``): the time index
        names where the running max timestamp passed a value; the walk goes
        from there by batch max timestamps, then through the records of a
        candidate batch.
        """
        if self.sealed:
            self._map_sealed()
            entries, count = self._time_index, self._time_count
        else:
            self._times.grow()
            entries, count = self._times.entries, self._times.count
        indexed = self.base_offset
        if count:
            slot = int(lib.ls_time_index_lookup(ffi.from_buffer(entries), count, timestamp))
            if slot >= 0:
                indexed = self.base_offset + struct.unpack_from(">I", entries, slot * _TIME_ENTRY + 8)[0]
        target = max(indexed, min_offset, self.base_offset)
        position = self._sealed_position(target) if self.sealed else self._start(target)
        if position is None:
            return None
        out = ffi.new("int64_t[2]")
        for window, _, begin, end in self._windows(position, 1 << 20):
            at = begin
            # Each pass consumes one batch of this window.
            for _ in range((end - begin) // HEADER_SIZE + 1):
                rc = lib.ls_search_timestamp(ffi.from_buffer(window), end, at, timestamp, out, out + 1)
                if rc == lib.LS_ERR_NOT_FOUND:
                    break
                if rc != 0:
                    raise_for(rc, f"searching {self.log_path} by timestamp")
                found = self._first_at_or_after(
                    memoryview(window)[out[0] : out[0] + out[1]], timestamp, min_offset
                )
                if found is not None:
                    return found
                at = int(out[0] + out[1])
        return None

    def _sealed_position(self, offset: int) -> int | None:
        """The position of the batch holding ``offset`` (or the first after it); None if none."""
        if self._map is None:
            return None
        found = locate(self._map, self._index, self._index_count, self.base_offset, offset)
        if found == lib.LS_ERR_CORRUPT:  # an index hint past the log: walk from the start
            found = locate(self._map, b"", 0, self.base_offset, offset)
        if found == lib.LS_ERR_NOT_FOUND:
            return None
        if found < 0:
            raise_for(int(found), f"looking up offset {offset} in {self.log_path}")
        return int(found) >> 32

    @staticmethod
    def _first_at_or_after(view: memoryview, timestamp: int, min_offset: int) -> int | None:
        columns = RecordBatch(view).columns()
        hits = np.flatnonzero((columns.timestamps >= timestamp) & (columns.offsets >= min_offset))
        return int(columns.offsets[hits[0]]) if len(hits) else None


class PartitionFiles:
    """One ``<data>/<topic>-<p>/`` directory, read-only (see the module for the concurrency rules).

    >>> import tempfile
    >>> from logstore.storage.store import Store
    >>> data = tempfile.mkdtemp()
    >>> with Store(data, scheduler=False) as store:
    ...     store.create_topic("events")
    ...     _ = store.log("events").append([b"a", b"b"])
    >>> with PartitionFiles(data, "events", 0) as files:
    ...     files.log_start_offset, files.end_offset(), len(files.read(0, 1 << 20)) > 0
    (0, 2, True)
    """

    def __init__(self, data_dir: str, topic: str, partition: int) -> None:
        if partition < 0:
            raise InvalidArgumentError(f"partition must be >= 0, not {partition}")
        self.data_dir = data_dir
        self.topic = topic
        self.partition = partition
        self.path = os.path.join(data_dir, f"{topic}-{partition}")
        if not os.path.isdir(self.path):
            known = list_topics(data_dir) if os.path.isdir(os.path.join(data_dir, TOPIC_CONFIGS)) else None
            if known is None:
                hint = f"{data_dir} is not a logstore data directory"
            elif topic in known:
                hint = f"topic {topic!r} has partitions 0 to {known[topic] - 1}"
            else:
                hint = f"topics there: {', '.join(sorted(known)) or 'none'}"
            raise UnknownTopicError(f"no partition directory {self.path} ({hint})")
        self._segments: list[_Segment] = []
        self._bases: list[int] = []
        self._log_start = 0
        self._closed = False
        self.refresh()

    # -- state ---------------------------------------------------------------------

    @property
    def log_start_offset(self) -> int:
        """max(first segment's base, the checkpointed log start), as of the last refresh.

        The broker checkpoints its log start now and then; before it does, this
        may be below the true start (the records are still on disk then).
        """
        return self._log_start

    def refresh(self) -> bool:
        """List the segments and read the log start again; True if the segments changed. O(files)."""
        self._check_open()
        try:
            names = os.listdir(self.path)
        except FileNotFoundError:
            raise UnknownTopicError(f"{self.path} is gone: the topic was deleted") from None
        bases = sorted(int(m.group(1)) for m in map(_SEGMENT_LOG.match, names) if m)
        changed = bases != self._bases
        if changed:
            kept = {s.base_offset: s for s in self._segments}
            for segment in self._segments:
                if segment.base_offset not in bases:
                    segment.close()
            self._segments = [kept.get(b) or _Segment(self.path, b) for b in bases]
            self._bases = bases
            for segment in self._segments[:-1]:
                if not segment.sealed:
                    segment.seal()
        self._log_start = max(self._bases[0] if self._bases else 0, self._checkpointed_start())
        return changed

    def _checkpointed_start(self) -> int:
        key = (self.topic, self.partition)
        starts = [
            read_offsets(os.path.join(d, LOG_START_FILE)).get(key, 0) for d in (self.data_dir, self.path)
        ]
        return max(starts)

    def _check_open(self) -> None:
        if self._closed:
            raise LogstoreError(f"the files of {self.topic}[{self.partition}] are closed; open them again")

    # -- reads -----------------------------------------------------------------------

    def end_offset(self) -> int:
        """The offset after the last whole batch of the last segment (a batch still being written
        does not count). Lists the segments again first. O(batches since the last call)."""
        self.refresh()
        for _ in range(len(self._segments) + 2):
            if not self._segments:
                return self._log_start
            last = self._segments[-1]
            try:
                last.refresh()
                return last.end_offset()
            except FileNotFoundError:
                self.refresh()  # rolled and deleted meanwhile (a topic deleted, or truncated fully)
        raise LogstoreError(f"{self.path}: the segments keep changing under the reader; try again")

    def read(self, offset: int, max_bytes: int, *, scratch: bool = False) -> memoryview | None:
        """Whole batches from the one holding ``offset``: at most ``max_bytes``, but at least one batch.

        The first batch may start before ``offset`` (filter on the records'
        offsets); past the last whole batch: None. Offsets below the log start
        raise :class:`OffsetGoneError`. The view is zero-copy for sealed
        segments and stays valid after ``close``; for the active segment it is
        a copy, fresh each time, or with ``scratch`` in a buffer reused by the
        next read (decode it first: fresh 8 MiB buffers cost ~40% of the
        decode rate, measured).
        """
        self._check_open()
        if max_bytes < 1:
            raise InvalidArgumentError(f"max_bytes must be >= 1, not {max_bytes}")
        # Two passes: the second after the segments were listed again (a roll, or retention).
        for _ in range(2):
            if offset < self._log_start:
                raise OffsetGoneError(self.topic, self.partition, offset, self._log_start, f" in {self.path}")
            try:
                view = self._read_listed(offset, max_bytes, scratch)
            except FileNotFoundError:
                view = None  # removed since the listing: list again
            if view is not None:
                return view
            if not self.refresh():
                break  # nothing new: the end
        if offset < self._log_start:
            raise OffsetGoneError(self.topic, self.partition, offset, self._log_start, f" in {self.path}")
        return None

    def _read_listed(self, offset: int, max_bytes: int, scratch: bool) -> memoryview | None:
        first = max(bisect_right(self._bases, offset) - 1, 0)
        for segment in self._segments[first:]:
            if segment is self._segments[-1]:
                segment.refresh()
            else:
                segment.open()
            view = segment.read(offset, max_bytes, scratch)
            if view is not None:
                return view
        return None

    def bytes_from(self, offset: int) -> int:
        """The bytes of the segments from the one holding ``offset`` to the end of the log: an upper
        bound of the record bytes that reads from ``offset`` return (as of the last listing, plus
        what the active segment gained since). O(segments)."""
        self._check_open()
        first = max(bisect_right(self._bases, offset) - 1, 0)
        total = 0
        for segment in self._segments[first:]:
            try:
                if segment is self._segments[-1]:
                    segment.refresh()
                else:
                    segment.open()
            except FileNotFoundError:
                continue  # removed by retention meanwhile: none of its bytes will be read
            total += segment.size
        return total

    def offset_for_timestamp(self, timestamp_ms: int) -> int | None:
        """The first offset (at or after the log start) whose record's timestamp is >= ``timestamp_ms``;
        None if there is none (Kafka's ListOffsets by time). O(segments) plus one batch walk."""
        self._check_open()
        if timestamp_ms < 0:
            raise InvalidArgumentError(
                f"timestamp_ms must be >= 0, not {timestamp_ms}; use log_start_offset or end_offset() "
                "for the earliest or latest offset"
            )
        self.refresh()
        for segment in list(self._segments):
            try:
                if segment is self._segments[-1]:
                    segment.refresh()
                else:
                    segment.open()
                found = segment.find_timestamp(timestamp_ms, self._log_start)
            except FileNotFoundError:
                continue  # removed by retention meanwhile: its records are gone
            if found is not None:
                return found
        return None

    def close(self) -> None:
        """Release every descriptor and map (views handed out stay valid). Idempotent."""
        for segment in self._segments:
            segment.close()
        self._segments, self._bases = [], []
        self._closed = True

    def __enter__(self) -> PartitionFiles:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"PartitionFiles({self.path!r}, segments={len(self._segments)}, start={self._log_start})"

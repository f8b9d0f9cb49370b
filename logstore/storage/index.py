"""Sparse indexes of a log segment: ``.index`` (offsets) and ``.timeindex``.

On-disk format (Kafka's):

- ``%020d.index``: 8-byte entries, big-endian ``(relative offset u32,
  position u32)``; the offset is the last offset of the batch that starts at
  the position.
- ``%020d.timeindex``: 12-byte entries, big-endian ``(timestamp i64,
  relative offset u32)``; timestamps strictly increase.

The file of the active segment is preallocated to ``segment.index.bytes``
(sparse: ``ftruncate``) and memory-mapped read-only (``numpy.memmap``);
entries past the live count are zero. Sealing trims the file to its entries.
Lookups run in C over the map, and read only live entries.

Nothing writes through the map, and nothing reads a page past the live
entries through it: entries are written with ``pwrite`` and the live count is
found with ``pread``. A page of a sparse file that a full filesystem cannot
back would otherwise kill the process with SIGBUS when touched (tmpfs backs
even a read fault with a new page); ``pwrite`` fails with ENOSPC instead, an
error the append reports, and ``pread`` of a hole allocates nothing.

Crash policy: an index is a cache of its log. After an unclean shutdown the
live count is taken as the entries before the first all-zero one; the
segment verifies every index against its log on open and rebuilds a damaged
or missing one from the log (``LogSegment.recover``).

Invariants: live entries are strictly increasing in both fields (offset
index) or in timestamp (time index); ``0 <= entries <= max_entries``.
"""

from __future__ import annotations

import contextlib
import mmap
import os
import struct
from typing import Any, ClassVar

import numpy as np

from logstore._native import ffi, lib, raise_for
from logstore.errors import ClosedError, CorruptIndexError, InvalidArgumentError

# Entries an append writes one by one rather than through numpy.
_PACKED_ROWS_MAX = 4
_TIMESTAMP = struct.Struct(">q")  # a time index entry's first field


class IndexFullError(InvalidArgumentError):
    """The index has no room for another entry: the segment must roll."""


class _SparseIndex:
    """A preallocated, memory-mapped file of fixed-size big-endian entries."""

    DTYPE: ClassVar[np.dtype[Any]]
    ENTRY: ClassVar[struct.Struct]  # one entry, for O(1) reads without numpy scalars
    KEY: ClassVar[str]
    SUFFIX: ClassVar[str]

    def __init__(
        self, path: str, base_offset: int, max_index_size: int, writable: bool, exact_length: bool = False
    ) -> None:
        if max_index_size < self.DTYPE.itemsize:
            raise InvalidArgumentError(
                f"segment.index.bytes={max_index_size} cannot hold one {self.SUFFIX} entry "
                f"of {self.DTYPE.itemsize} bytes; raise it"
            )
        self.path = path
        self.base_offset = base_offset
        self.writable = writable
        self.max_index_size = max_index_size - max_index_size % self.DTYPE.itemsize
        self._map: np.ndarray | None = None
        self._fd = -1  # the writable index's file, for pwrite (the map is read-only)
        self._ptr: Any = ffi.NULL
        self._entries = 0
        self._closed = False
        length = os.path.getsize(path) if os.path.exists(path) else 0
        self._open_map(self.max_index_size if writable else None)
        self._entries = self._live_entries(length, exact_length) if length else 0
        self._advise_appends()

    # -- mapping -----------------------------------------------------------

    def _open_map(self, size: int | None) -> None:
        """Map the file, resized to ``size`` bytes first when given."""
        # Resizing (trim on seal, preallocation) needs write access even for a
        # sealed index; mapping alone does not.
        flags = os.O_RDWR | os.O_CREAT if self.writable or size is not None else os.O_RDONLY
        fd = os.open(self.path, flags, 0o644)
        keep = False
        try:
            length = os.fstat(fd).st_size
            if length % self.DTYPE.itemsize:
                if not self.writable:
                    raise CorruptIndexError(
                        f"{self.path}: size {length} is not a multiple of {self.DTYPE.itemsize}; "
                        "the index is damaged and will be rebuilt from the log"
                    )
                length -= length % self.DTYPE.itemsize
                os.ftruncate(fd, length)
            if size is not None and size != length:
                os.ftruncate(fd, size)
                length = size
            keep = self.writable
        finally:
            if keep:
                self._fd = fd
            else:
                os.close(fd)
        count = length // self.DTYPE.itemsize
        self._memmap: np.memmap | None = None
        if count == 0:
            self._map = np.zeros(0, dtype=self.DTYPE)
        else:
            self._memmap = np.memmap(self.path, dtype=self.DTYPE, mode="r", shape=(count,))
            # A plain ndarray view: element access without memmap's per-slice overhead.
            self._map = self._memmap.view(np.ndarray)
        self._ptr = ffi.from_buffer(self._map) if count else ffi.NULL
        # The mapped file as a plain buffer, for one-call lookups in C.
        self._buffer: Any = self._memmap._mmap if self._memmap is not None else b""  # type: ignore[attr-defined]

    def _advise_appends(self) -> None:
        """No fault-around or readahead on the active index's map: its reads touch only the
        live entries, and the rest of the preallocated file is holes best left unread."""
        if self.writable and self._memmap is not None:
            self._memmap._mmap.madvise(mmap.MADV_RANDOM)  # type: ignore[attr-defined]

    def _live_entries(self, length: int, exact_length: bool) -> int:
        """The live entries of a file that existed with ``length`` bytes.

        After a clean shutdown (``exact_length``) every index was trimmed to
        its entries, so the length says how many, as in Kafka; a full index
        is then full, whatever its entries hold. Otherwise a file shorter
        than the preallocation was trimmed (on seal): its length says how many
        (an untrimmed sealed one, left by a power loss, fails verification
        against the log and is rebuilt). A full-length file after a crash
        ends at the first all-zero entry: an offset index never has position
        0 (the first batch gets no entry), and a time index entry (0, +0)
        missed there only costs a lookup a longer scan.

        Entries are written in order into a zero-filled file, so the live
        ones are a prefix: a binary search finds the first all-zero entry in
        O(log n) entries read (a scan of the whole preallocated file cost
        ~30 ms per index, seconds for a broker restarted after kill -9 with
        a hundred partitions). A hole a power loss may leave inside the
        prefix only points lookups earlier, which scan forward from there.
        """
        assert self._map is not None
        if exact_length or not self.writable or length < self.max_index_size or len(self._map) == 0:
            return min(length // self.DTYPE.itemsize, len(self._map))
        size = self.DTYPE.itemsize
        low, high = 0, len(self._map)  # invariant: entries below low are live, from high on empty
        for _ in range(64):  # log2 of any entry count
            if low >= high:
                break
            middle = (low + high) // 2
            if any(os.pread(self._fd, size, middle * size)):  # pread: a hole stays a hole
                low = middle + 1
            else:
                high = middle
        return low

    def _check_open(self) -> np.ndarray:
        if self._closed or self._map is None:
            raise ClosedError(f"{self.path} is closed; reopen its segment to use it")
        return self._map

    # -- state -------------------------------------------------------------

    @property
    def entries(self) -> int:
        return self._entries

    @property
    def max_entries(self) -> int:
        return self.max_index_size // self.DTYPE.itemsize

    @property
    def is_full(self) -> bool:
        return self._entries >= self.max_entries

    @property
    def closed(self) -> bool:
        return self._closed

    def entry(self, slot: int) -> tuple[int, int]:
        mm = self._check_open()
        if not 0 <= slot < self._entries:
            raise IndexError(f"slot {slot} outside 0..{self._entries - 1}")
        first, second = self.ENTRY.unpack_from(mm.data, slot * self.ENTRY.size)
        return first, second

    def _append_rows(self, first: np.ndarray, second: np.ndarray) -> None:
        mm = self._check_open()
        if not self.writable:
            raise InvalidArgumentError(f"{self.path} is sealed; only the active segment's index grows")
        count = len(first)
        if self._entries + count > len(mm):
            raise IndexFullError(f"{self.path} is full ({self.max_entries} entries); roll the segment")
        if count <= _PACKED_ROWS_MAX:
            # An append yields one or two entries: packing them costs ~0.3 us a row,
            # numpy's field views and casts ~5 us a call.
            pack = self.ENTRY.pack
            data = b"".join([pack(int(first[row]), int(second[row])) for row in range(count)])
        else:
            rows = np.empty(count, dtype=self.DTYPE)
            names = self.DTYPE.names
            assert names is not None
            rows[names[0]] = first
            rows[names[1]] = second
            data = rows.tobytes()
        self._write(data, self._entries * self.DTYPE.itemsize)
        self._entries += count

    def _write(self, data: bytes, position: int) -> None:
        """``data`` at ``position`` of the file (OSError, e.g. ENOSPC, with the entries uncounted)."""
        written = os.pwrite(self._fd, data, position)
        for _ in range(len(data)):  # a short write writes at least one byte
            if written >= len(data):
                return
            written += os.pwrite(self._fd, data[written:], position + written)

    def truncate_entries(self, entries: int) -> None:
        """Keep the first ``entries`` entries; zero the rest (the live-count marker)."""
        self._check_open()
        if not 0 <= entries <= self._entries:
            raise InvalidArgumentError(f"cannot truncate {self.path} to {entries} entries")
        if self.writable:
            size = self.DTYPE.itemsize
            self._write(bytes((self._entries - entries) * size), entries * size)  # written pages: no ENOSPC
            self._entries = entries
        else:
            self._entries = entries
            self.resize(entries * self.DTYPE.itemsize)

    def reset(self) -> None:
        """Drop every entry (before a rebuild)."""
        self.truncate_entries(0)

    def resize(self, size: int) -> None:
        """Remap the file at ``size`` bytes (trim or preallocate)."""
        self._check_open()
        self._release_map()
        self._open_map(size - size % self.DTYPE.itemsize)
        self._advise_appends()

    def trim(self) -> None:
        """Shrink the file to its live entries (on roll and close)."""
        if self._map is not None and len(self._map) != self._entries:
            self.resize(self._entries * self.DTYPE.itemsize)

    def seal(self) -> None:
        """Trim, and map read-only from now on."""
        self.trim()
        self.writable = False
        self._release_map()
        self._open_map(None)

    def flush(self) -> None:
        self._check_open()
        if self._fd >= 0:
            os.fdatasync(self._fd)

    def _release_map(self) -> None:
        memmap, self._memmap, self._map, self._ptr = self._memmap, None, None, ffi.NULL
        self._buffer = b""
        del memmap  # the mmap closes once no view of it is left
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def close(self) -> None:
        if self._closed:
            return
        if self.writable and self._map is not None:
            self.trim()
        self._release_map()
        self._closed = True

    def release(self) -> None:
        """Release the map and file with no I/O (no trim): the directory failed."""
        if not self._closed:
            with contextlib.suppress(OSError):
                self._release_map()
            self._closed = True

    def delete(self) -> None:
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def rename(self, path: str) -> None:
        os.replace(self.path, path)
        self.path = path


class OffsetIndex(_SparseIndex):
    """Maps offsets to file positions of the batches that hold them.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> idx = OffsetIndex(os.path.join(d, "0.index"), base_offset=100, max_index_size=80, writable=True)
    >>> idx.append(110, 4100); idx.append(120, 8300)
    >>> idx.lookup(115), idx.lookup(120), idx.lookup(105)
    ((110, 4100), (120, 8300), (100, 0))
    >>> idx.close()
    """

    DTYPE = np.dtype([("offset", ">u4"), ("position", ">u4")])
    ENTRY = struct.Struct(">II")
    KEY = "offset"
    SUFFIX = ".index"

    def append(self, offset: int, position: int) -> None:
        """Add one entry; offsets and positions must increase. O(1)."""
        relative = offset - self.base_offset
        if not 0 <= relative <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"offset {offset} is outside the u32 range of base {self.base_offset}")
        if self._entries:
            last_offset, last_position = self.entry(self._entries - 1)
            if relative <= last_offset - self.base_offset or position <= last_position:
                raise InvalidArgumentError(
                    f"index entry ({offset}, {position}) does not follow ({last_offset}, {last_position})"
                )
        self._append_rows(np.array([relative], np.uint32), np.array([position], np.uint32))

    def append_relative(self, offsets: np.ndarray, positions: np.ndarray) -> None:
        """Add entries computed by the native scan (relative offsets). O(k)."""
        self._append_rows(offsets, positions)

    def entry(self, slot: int) -> tuple[int, int]:
        relative, position = super().entry(slot)
        return self.base_offset + relative, position

    def last_entry(self) -> tuple[int, int]:
        """(offset, position) of the last entry, or (base_offset, 0)."""
        return self.entry(self._entries - 1) if self._entries else (self.base_offset, 0)

    def lookup_slot(self, offset: int) -> int:
        """The slot of the last entry with offset <= ``offset``, or -1. O(log n), in C."""
        self._check_open()
        relative = offset - self.base_offset
        if relative < 0:
            return -1
        slot = int(lib.ls_offset_index_lookup(self._ptr, self._entries, min(relative, 0xFFFFFFFF)))
        if slot == lib.LS_ERR_IO:
            raise_for(slot, f"looking up offset {offset} in {self.path}")
        return slot

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below ``offset``, else (base, 0)."""
        slot = self.lookup_slot(offset)
        return self.entry(slot) if slot >= 0 else (self.base_offset, 0)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset`` (Kafka's truncateTo)."""
        slot = self.lookup_slot(offset)
        keep = 0 if slot < 0 else slot if self.entry(slot)[0] == offset else slot + 1
        self.truncate_entries(keep)

    def verify(self, log: Any, log_len: int) -> None:
        """Raise CorruptIndexError unless every entry points at its batch in ``log``."""
        self._check_open()
        bad = ffi.new("int64_t *")
        rc = lib.ls_offset_index_verify(log, log_len, self._ptr, self._entries, self.base_offset, bad)
        if rc != 0:
            raise CorruptIndexError(
                f"{self.path}: entry {bad[0]} does not match the log; the index will be rebuilt"
            )

    @property
    def buffer(self) -> Any:
        """The mapped file as a buffer (for one-call lookups in C); raises when closed."""
        self._check_open()
        return self._buffer

    @property
    def pointer(self) -> Any:
        """The cffi pointer to the entries (for one-call segment lookups)."""
        self._check_open()
        return self._ptr


class TimeIndex(_SparseIndex):
    """Maps timestamps to the offsets at which they were first reached.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> idx = TimeIndex(os.path.join(d, "0.timeindex"), base_offset=0, max_index_size=120, writable=True)
    >>> idx.maybe_append(1000, 10); idx.maybe_append(1000, 20); idx.maybe_append(2000, 30)
    >>> idx.entries, idx.lookup(1500), idx.lookup(999)
    (2, (1000, 10), (-1, 0))
    >>> idx.close()
    """

    DTYPE = np.dtype([("timestamp", ">i8"), ("offset", ">u4")])
    ENTRY = struct.Struct(">qI")
    KEY = "timestamp"
    SUFFIX = ".timeindex"

    def entry(self, slot: int) -> tuple[int, int]:
        timestamp, relative = super().entry(slot)
        return timestamp, self.base_offset + relative

    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset)."""
        return self.entry(self._entries - 1) if self._entries else (-1, self.base_offset)

    @property
    def last_timestamp(self) -> int:
        """The last entry's timestamp, or -1. O(1); read straight from the map (every append asks)."""
        entries = self._entries
        if not entries:
            return -1
        self._check_open()
        (timestamp,) = _TIMESTAMP.unpack_from(self._buffer, (entries - 1) * self.ENTRY.size)
        return int(timestamp)

    def maybe_append(self, timestamp: int, offset: int, skip_full_check: bool = False) -> None:
        """Add an entry if ``timestamp`` exceeds the last one (Kafka's maybeAppend)."""
        if self._entries and timestamp <= self.last_entry()[0]:
            return
        if self.is_full and skip_full_check:
            return
        relative = offset - self.base_offset
        if not 0 <= relative <= 0xFFFFFFFF:
            raise InvalidArgumentError(f"offset {offset} is outside the u32 range of base {self.base_offset}")
        self._append_rows(np.array([timestamp], np.int64), np.array([relative], np.uint32))

    def append_relative(self, timestamps: np.ndarray, offsets: np.ndarray) -> None:
        """Add entries computed by the native scan. O(k)."""
        self._append_rows(timestamps, offsets)

    def lookup(self, timestamp: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry at or below ``timestamp``, else (-1, base)."""
        self._check_open()
        slot = int(lib.ls_time_index_lookup(self._ptr, self._entries, timestamp))
        if slot == lib.LS_ERR_IO:
            raise_for(slot, f"looking up timestamp {timestamp} in {self.path}")
        return self.entry(slot) if slot >= 0 else (-1, self.base_offset)

    def truncate_to(self, offset: int) -> None:
        """Remove every entry whose offset is >= ``offset``."""
        mm = self._check_open()
        offsets = np.asarray(mm["offset"][: self._entries], dtype=np.int64) + self.base_offset
        self.truncate_entries(int(np.searchsorted(offsets, offset, side="left")))

    def verify_log(self, log: Any, log_len: int) -> None:
        """Raise CorruptIndexError unless every entry names the batch that set its timestamp."""
        self._check_open()
        bad = ffi.new("int64_t *")
        rc = lib.ls_time_index_verify_log(log, log_len, self._ptr, self._entries, self.base_offset, bad)
        if rc != 0:
            raise CorruptIndexError(
                f"{self.path}: entry {bad[0]} does not match the log; the index will be rebuilt"
            )

    def verify(self, offset_max: int) -> None:
        """Raise CorruptIndexError unless entries are ordered and within the segment."""
        self._check_open()
        bad = ffi.new("int64_t *")
        rc = lib.ls_time_index_verify(self._ptr, self._entries, offset_max - self.base_offset, bad)
        if rc != 0:
            raise CorruptIndexError(f"{self.path}: entry {bad[0]} is out of order; the index will be rebuilt")

"""A naive segmented log in pure Python: the peer ``bench/peers.py`` calls "naive Python log".

What a competent Python programmer would write in an afternoon, with no C of
its own: every append of N values is one batch, written with one ``os.write``
and checked by one CRC call.

Batch layout (little-endian)::

    base_offset  int64
    count        uint32
    crc          uint32   CRC of everything after the header
    body_length  uint32
    lengths      count x uint32 (the length prefix of every value)
    values       the values, concatenated

Segments roll at ``segment_bytes`` (files ``%020d.naive``); an in-memory list
per segment maps each batch's base offset to its file position (the index).
Reads find the batch by bisection, ``os.pread`` whole batches, check their
CRC and parse them in Python into ``(offset, value)`` tuples; a lookup of
one record reads the batch's length table and then the value (two preads,
no CRC check). The CRC is CRC-32C from the ``crc32c`` package when it is
installed (hardware-accelerated), else ``zlib.crc32``.

Nothing here is durable across a crash (no recovery, no index on disk): the
peer is a lower bound on the work a log must do, not a storage engine.
"""

from __future__ import annotations

import bisect
import os
import struct
import zlib
from array import array
from collections.abc import Callable, Sequence
from itertools import accumulate, pairwise

try:
    from crc32c import crc32c as _crc32c

    def crc(data: bytes | bytearray | memoryview) -> int:
        """CRC-32C (the ``crc32c`` package)."""
        return _crc32c(data)

    CRC_NAME = "crc32c"
except ImportError:  # pragma: no cover - depends on the environment

    def crc(data: bytes | bytearray | memoryview) -> int:
        """CRC-32 (zlib; the ``crc32c`` package is not installed)."""
        return zlib.crc32(data)

    CRC_NAME = "zlib.crc32"

HEADER = struct.Struct("<qIII")
HEADER_SIZE = HEADER.size
_ZERO_HEADER = bytes(HEADER_SIZE)
if array("I").itemsize != 4:  # pragma: no cover - every platform we run on
    raise RuntimeError("array('I') is not 4 bytes wide here")


class CorruptBatchError(Exception):
    """A batch failed its CRC or structure check."""


def encode(values: Sequence[bytes], base_offset: int) -> bytearray:
    """One batch of ``values`` at ``base_offset``: one join, one CRC."""
    lengths = array("I", map(len, values))
    buf = bytearray().join([_ZERO_HEADER, lengths, *values])
    HEADER.pack_into(
        buf, 0, base_offset, len(values), crc(memoryview(buf)[HEADER_SIZE:]), len(buf) - HEADER_SIZE
    )
    return buf


class _Segment:
    """One file and its in-memory batch index."""

    def __init__(self, directory: str, base_offset: int) -> None:
        self.base_offset = base_offset
        self.path = os.path.join(directory, f"{base_offset:020d}.naive")
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        self.size = 0
        self.bases: list[int] = []  # base offset of every batch
        self.positions: list[int] = []  # its file position
        self.counts: list[int] = []  # its record count

    def close(self) -> None:
        os.close(self.fd)


class NaiveLog:
    """Append-only log of byte values; offsets are assigned from 0."""

    def __init__(self, directory: str, fsync_every: int = 0, segment_bytes: int = 1 << 30) -> None:
        """``fsync_every``: fdatasync after the batch that passes every N records (0: never)."""
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.fsync_every = fsync_every
        self.segment_bytes = segment_bytes
        self.segments: list[_Segment] = [_Segment(directory, 0)]
        self.segment_bases: list[int] = [0]
        self.next_offset = 0
        self._unsynced = 0

    # -- appending ---------------------------------------------------------

    def append(self, values: Sequence[bytes]) -> tuple[int, int]:
        """Append ``values`` as one batch; returns (first offset, last offset)."""
        first = self.next_offset
        self._write(encode(values, first), [first], [0], [len(values)])
        return first, first + len(values) - 1

    def append_encoded(self, data: bytes | bytearray) -> tuple[int, int]:
        """Append pre-encoded batches: check each CRC, assign offsets, one write.

        Offsets are written in place into a bytearray; ``bytes`` are copied first.
        """
        buf = data if isinstance(data, bytearray) else bytearray(data)
        view = memoryview(buf)
        first = offset = self.next_offset
        bases, positions, counts = [], [], []
        at = 0
        for _ in range(len(buf) // HEADER_SIZE + 1):
            if at >= len(buf):
                break
            if at + HEADER_SIZE > len(buf):
                raise CorruptBatchError(f"truncated header at byte {at}")
            _, count, checksum, body = HEADER.unpack_from(buf, at)
            end = at + HEADER_SIZE + body
            if end > len(buf) or crc(view[at + HEADER_SIZE : end]) != checksum:
                raise CorruptBatchError(f"batch at byte {at} fails its check")
            struct.pack_into("<q", buf, at, offset)
            bases.append(offset)
            positions.append(at)
            counts.append(count)
            offset += count
            at = end
        view.release()
        if not bases:
            raise CorruptBatchError("no batch to append")
        self._write(buf, bases, positions, counts)
        return first, offset - 1

    def _write(self, buf: bytearray, bases: list[int], relative: list[int], counts: list[int]) -> None:
        segment = self.segments[-1]
        if segment.size and segment.size + len(buf) > self.segment_bytes:
            segment = self._roll()
        written = os.write(segment.fd, buf)
        if written != len(buf):  # a short write to a regular file: disk full
            raise OSError(f"short write to {segment.path}: {written} of {len(buf)} bytes")
        segment.bases += bases
        segment.positions += [segment.size + r for r in relative]
        segment.counts += counts
        segment.size += len(buf)
        records = sum(counts)
        self.next_offset += records
        if self.fsync_every:
            self._unsynced += records
            if self._unsynced >= self.fsync_every:
                os.fdatasync(segment.fd)
                self._unsynced = 0

    def _roll(self) -> _Segment:
        os.fdatasync(self.segments[-1].fd)
        segment = _Segment(self.directory, self.next_offset)
        self.segments.append(segment)
        self.segment_bases.append(segment.base_offset)
        return segment

    def flush(self) -> None:
        os.fdatasync(self.segments[-1].fd)
        self._unsynced = 0

    # -- reading -----------------------------------------------------------

    def _locate(self, offset: int) -> tuple[_Segment, int]:
        if not 0 <= offset < self.next_offset:
            raise IndexError(f"offset {offset} outside [0, {self.next_offset})")
        segment = self.segments[bisect.bisect_right(self.segment_bases, offset) - 1]
        return segment, bisect.bisect_right(segment.bases, offset) - 1

    def read(self, offset: int, max_bytes: int = 1 << 20) -> list[tuple[int, bytes]]:
        """Records from ``offset`` in whole batches up to ``max_bytes`` (at least one batch)."""
        segment, index = self._locate(offset)
        positions = segment.positions
        start = positions[index]
        limit = start + max_bytes
        # The last batch that ends within max_bytes (but at least the first one).
        starts_within = bisect.bisect_right(positions, limit) - 1
        final = starts_within == len(positions) - 1 and segment.size <= limit
        last = max(starts_within if final else starts_within - 1, index)
        end = positions[last + 1] if last + 1 < len(positions) else segment.size
        buf = os.pread(segment.fd, end - start, start)
        records: list[tuple[int, bytes]] = []
        at = 0
        view = memoryview(buf)
        for _ in range(last - index + 1):
            base, count, checksum, body = HEADER.unpack_from(buf, at)
            stop = at + HEADER_SIZE + body
            if crc(view[at + HEADER_SIZE : stop]) != checksum:
                raise CorruptBatchError(f"{segment.path}: batch at byte {start + at} fails its check")
            values_at = at + HEADER_SIZE + 4 * count
            ends = accumulate(view[at + HEADER_SIZE : values_at].cast("I"), initial=values_at)
            values = [buf[a:b] for a, b in pairwise(ends)]
            if base < offset:
                skip = offset - base
                records += zip(range(offset, base + count), values[skip:], strict=True)
            else:
                records += zip(range(base, base + count), values, strict=True)
            at = stop
        view.release()
        return records

    def get(self, offset: int) -> bytes:
        """The value at ``offset``: the batch's length table, then the value (two preads)."""
        segment, index = self._locate(offset)
        position = segment.positions[index]
        count = segment.counts[index]
        lengths = array("I", os.pread(segment.fd, 4 * count, position + HEADER_SIZE))
        i = offset - segment.bases[index]
        skip = sum(lengths[:i])
        return os.pread(segment.fd, lengths[i], position + HEADER_SIZE + 4 * count + skip)

    def close(self) -> None:
        for segment in self.segments:
            segment.close()
        self.segments = []


def self_check(make_dir: Callable[[], str]) -> None:
    """A quick correctness check (used by bench/peers.py before it measures)."""
    log = NaiveLog(make_dir(), segment_bytes=4096)
    try:
        expected = [bytes([i % 251]) * (i % 37) for i in range(3000)]
        for i in range(0, 2000, 100):
            log.append(expected[i : i + 100])
        log.append_encoded(b"".join(encode(expected[i : i + 250], 0) for i in range(2000, 3000, 250)))
        assert log.next_offset == 3000
        for offset in (0, 1, 99, 100, 1999, 2000, 2249, 2250, 2999):
            assert log.get(offset) == expected[offset], offset
        got: list[tuple[int, bytes]] = []
        at = 5
        for _ in range(3000):
            if at >= log.next_offset:
                break
            chunk = log.read(at, 700)
            got += chunk
            at = chunk[-1][0] + 1
        assert got == list(enumerate(expected))[5:], "naive log read back something else"
    finally:
        log.close()

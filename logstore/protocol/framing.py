"""Splitting a connection's byte stream into request frames, with few copies.

Small frames arrive in a reusable scratch buffer and are copied out as
``bytes``. A frame too large for the scratch buffer is read by the socket
straight into a buffer of its own (no copy), taken from a small pool of
recycled buffers: memory freshly handed out by the kernel costs a page fault
per 4 KiB on first touch, and a broker receiving 1 MiB produce requests would
otherwise pay that on every one. Such a frame is handed out as a writable
memoryview (so offsets can be assigned in place) together with its buffer,
which the caller gives back with :meth:`FrameReader.release` once nothing
refers to it.

>>> reader = FrameReader(size_max=1 << 20)
>>> view = reader.get_buffer()
>>> view[:12] = b"\\x00\\x00\\x00\\x08abcdefgh"
>>> [bytes(frame.data) for frame in reader.buffer_updated(12)]
[b'abcdefgh']
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

SIZE = struct.Struct(">i")
SCRATCH_SIZE = 128 * 1024
POOL_SIZE = 4
ROUND = 256 * 1024
# A large frame's buffer starts at this size and doubles as its bytes arrive,
# so a client that declares a huge frame and sends little pins little memory.
LARGE_INITIAL = 2 * 1024 * 1024
POOLED_MAX = 16 * 1024 * 1024
FRAME_SIZE_MIN = 8  # api key, version and correlation id


class FrameSizeError(Exception):
    """A frame size outside [FRAME_SIZE_MIN, size_max]: the stream cannot be trusted further."""

    def __init__(self, size: int, size_max: int) -> None:
        super().__init__(
            f"a frame of {size} bytes (allowed: {FRAME_SIZE_MIN} to socket.request.max.bytes={size_max})"
        )
        self.size = size


@dataclass(slots=True)  # not frozen: one is made per request, and a frozen one costs 4x
class Frame:
    """One request frame: ``data`` (bytes, or a writable view of ``owner``)."""

    data: bytes | memoryview
    owner: bytearray | None = None

    def __len__(self) -> int:
        return len(self.data)


class FrameReader:
    """A stream of frames for ``asyncio.BufferedProtocol``.

    Invariants: ``0 <= _used <= len(_scratch)``; while a large frame is being
    read, ``_large_filled < _large_size``, ``_large_filled < len(_large)`` and
    the scratch buffer is empty. Memory held for a frame is at most twice its
    bytes received, or LARGE_INITIAL.
    """

    def __init__(self, size_max: int) -> None:
        self.size_max = size_max
        self._scratch = bytearray(SCRATCH_SIZE)
        self._used = 0
        self._large: bytearray | None = None
        self._large_size = 0
        self._large_filled = 0
        self._pool: list[bytearray] = []

    def get_buffer(self) -> memoryview:
        """Where the socket should write next."""
        if self._large is not None:
            return memoryview(self._large)[self._large_filled : min(self._large_size, len(self._large))]
        return memoryview(self._scratch)[self._used :]

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """``nbytes`` arrived in the last buffer; returns the frames now complete."""
        if self._large is not None:
            self._large_filled += nbytes
            assert self._large_filled <= min(self._large_size, len(self._large))
            if self._large_filled < self._large_size:
                if self._large_filled == len(self._large):
                    self._grow()
                return []
            frame = Frame(memoryview(self._large)[: self._large_size], self._large)
            self._large = None
            return [frame]
        self._used += nbytes
        assert self._used <= len(self._scratch)
        return self._split_scratch()

    def _split_scratch(self) -> list[Frame]:
        frames: list[Frame] = []
        scratch, used, at = self._scratch, self._used, 0
        while used - at >= 4:
            (size,) = SIZE.unpack_from(scratch, at)
            if not FRAME_SIZE_MIN <= size <= self.size_max:
                raise FrameSizeError(size, self.size_max)
            available = used - at - 4
            if available >= size:
                frames.append(Frame(bytes(scratch[at + 4 : at + 4 + size])))
                at += 4 + size
                continue
            if 4 + size > len(scratch):
                # Too big for the scratch buffer: read the rest straight into its own buffer.
                large = self._take(size)
                assert available < len(large)  # available < SCRATCH_SIZE <= LARGE_INITIAL
                large[:available] = scratch[at + 4 : used]
                self._large, self._large_size, self._large_filled = large, size, available
                at = used
            break
        remaining = used - at
        if at and remaining:
            scratch[:remaining] = scratch[at:used]
        self._used = remaining
        return frames

    def _take(self, size: int) -> bytearray:
        want = min(size, LARGE_INITIAL)
        for i, buffer in enumerate(self._pool):
            if len(buffer) >= want:
                return self._pool.pop(i)
        return bytearray(_rounded(want))

    def _grow(self) -> None:
        """A bigger buffer for the frame being read (the old one may still be exported: copy)."""
        assert self._large is not None
        bigger = bytearray(_rounded(min(self._large_size, 2 * len(self._large))))
        bigger[: self._large_filled] = self._large[: self._large_filled]
        self._large = bigger

    def release(self, frame: Frame) -> None:
        """Give a large frame's buffer back for reuse (nothing may refer to it after this)."""
        if frame.owner is not None and len(self._pool) < POOL_SIZE and len(frame.owner) <= POOLED_MAX:
            self._pool.append(frame.owner)


def _rounded(size: int) -> int:
    return (size + ROUND - 1) // ROUND * ROUND

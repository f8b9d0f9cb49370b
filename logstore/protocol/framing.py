"""Splitting a connection's byte stream into request frames, with few copies and little idle memory.

Reads land in one scratch buffer shared by every connection of the thread
(the loop asks for a buffer, reads into it and reports the bytes within one
callback, so no two connections ever use it at once). Complete frames are
copied out as ``bytes``; the bytes of a frame not yet complete move to a
buffer of the connection's own (of the scratch size, as every connection
had before), which the next reads fill. Once the frame is complete the
next read goes to the shared buffer again; the connection's buffer is kept
for its next partial frame (a client streaming requests would otherwise pay
a fresh, page-faulting allocation per request) until :meth:`FrameReader.trim`
(the broker trims connections quiet for 10 s). A connection whose requests
arrive whole, as an idle client's do, never has a read buffer of its own.

A frame too large for the scratch buffer is read by the socket straight into
a buffer of its own (no copy), taken from a small pool of recycled buffers:
memory freshly handed out by the kernel costs a page fault per 4 KiB on
first touch, and a broker receiving 1 MiB produce requests would otherwise
pay that on every one. Such a frame is handed out as a writable memoryview
(so offsets can be assigned in place) together with its buffer, which the
caller gives back with :meth:`FrameReader.release` once nothing refers to
it; :meth:`FrameReader.trim` drops the pool (an idle connection). Once a
connection has sent a large frame, its next read goes straight to a recycled
buffer (when one is free; at most that frame's size and SCRATCH_SIZE more): a
producer's next large frame then lands where it stays, header included, with
no copy out of the scratch buffer and one read fewer; what follows it in that
read is copied out as from the scratch buffer, and after a small first frame
the connection's reads go to the scratch buffer again.

>>> reader = FrameReader(size_max=1 << 20)
>>> view = reader.get_buffer()
>>> view[:12] = b"\\x00\\x00\\x00\\x08abcdefgh"
>>> [bytes(frame.data) for frame in reader.buffer_updated(12)]
[b'abcdefgh']
"""

from __future__ import annotations

import struct
import threading
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

    Invariants: with no large frame in progress, either ``_own`` is None
    (the next read goes to the thread's shared scratch buffer) or it holds
    ``0 < _used < len(_own) == SCRATCH_SIZE`` bytes of frames not yet complete; while a large frame is being read,
    ``_large_filled < _large_size``, ``_large_filled < len(_large)`` and
    ``_own`` is None. The frame being read starts at ``_large[_large_at]`` (0, or 4 when it
    was read with its size into a recycled buffer, ``_spec``). Memory held for a frame is at
    most twice its bytes received, or LARGE_INITIAL; between frames, the spare own buffer and
    the pool, until :meth:`trim`.
    """

    __slots__ = (
        "_expect_large",
        "_large",
        "_large_at",
        "_large_filled",
        "_large_size",
        "_own",
        "_pool",
        "_shared",
        "_spare",
        "_spec",
        "_used",
        "size_max",
    )

    def __init__(self, size_max: int) -> None:
        self.size_max = size_max
        self._shared = _shared_scratch()
        self._own: bytearray | None = None
        self._spare: bytearray | None = None  # the last _own, reused for the next partial frame
        self._used = 0
        self._large: bytearray | None = None
        self._large_size = 0
        self._large_filled = 0
        self._large_at = 0
        self._pool: list[bytearray] = []
        self._spec: bytearray | None = None  # the recycled buffer of a read in progress
        # The last frame's size when it was large (0: small): the next read goes to a recycled
        # buffer, up to that size and SCRATCH_SIZE more (so it rarely holds a second large frame).
        self._expect_large = 0

    def limit(self, size_max: int) -> None:
        """Frames above ``size_max`` bytes end the stream from now on (SASL's pre-auth cap)."""
        assert size_max > 0
        self.size_max = size_max

    def get_buffer(self) -> memoryview:
        """Where the socket should write next (valid until the matching :meth:`buffer_updated`)."""
        large = self._large
        if large is not None:
            at = self._large_at
            return memoryview(large)[at + self._large_filled : min(at + self._large_size, len(large))]
        if self._own is not None:
            return memoryview(self._own)[self._used :]
        if self._expect_large and (self._spec is not None or self._pool):
            if self._spec is None:
                self._spec = self._pool.pop()
            return memoryview(self._spec)[: 4 + self._expect_large + SCRATCH_SIZE]
        return memoryview(self._shared)

    def buffer_updated(self, nbytes: int) -> list[Frame]:
        """``nbytes`` arrived in the last buffer; returns the frames now complete."""
        large = self._large
        if large is not None:
            self._large_filled += nbytes
            at = self._large_at
            assert self._large_filled <= min(self._large_size, len(large) - at)
            if self._large_filled < self._large_size:
                if at + self._large_filled == len(large):
                    self._grow()
                return []
            frame = Frame(memoryview(large)[at : at + self._large_size], large)
            self._large = None
            return [frame]
        if self._own is not None:
            self._used += nbytes
            assert self._used <= len(self._own)
            return self._split(self._own, self._used)
        if self._spec is not None:
            return self._split_recycled(nbytes)
        assert nbytes <= len(self._shared)
        return self._split(self._shared, nbytes)

    def _split_recycled(self, used: int) -> list[Frame]:
        """A read into a recycled buffer (:meth:`get_buffer`): a large first frame stays in it
        (a view, as any large frame); anything else is split as from the scratch buffer."""
        buffer = self._spec
        assert buffer is not None and used <= len(buffer)
        self._spec = None
        if used >= 4:
            (size,) = SIZE.unpack_from(buffer, 0)
            if 4 + size > SCRATCH_SIZE and size <= self.size_max:
                self._expect_large = size
                if 4 + size <= used:
                    frame = Frame(memoryview(buffer)[4 : 4 + size], buffer)
                    return [frame, *self._split(buffer, used, 4 + size)]
                self._large, self._large_size, self._large_filled, self._large_at = buffer, size, used - 4, 4
                if used == len(buffer):
                    self._grow()
                return []
        self._expect_large = 0
        try:
            return self._split(buffer, used)
        finally:
            if len(self._pool) < POOL_SIZE:  # every frame was copied out of it
                self._pool.append(buffer)

    def _split(self, buffer: bytearray, used: int, at: int = 0) -> list[Frame]:
        """The frames complete in ``buffer[at:used]``; the rest goes to ``_own`` or ``_large``."""
        frames: list[Frame] = []
        size_max = self.size_max
        while used - at >= 4:
            (size,) = SIZE.unpack_from(buffer, at)
            if not FRAME_SIZE_MIN <= size <= size_max:
                raise FrameSizeError(size, size_max)
            end = at + 4 + size
            if end > used:
                break
            if 4 + size > SCRATCH_SIZE:  # only a recycled buffer holds a whole large frame
                frames.append(self._copied(buffer, at + 4, size))
            else:
                frames.append(Frame(bytes(buffer[at + 4 : end])))
            at = end
        else:
            if at == used:  # the common case: whole frames only
                if self._own is not None:  # kept for the next partial frame, until trim()
                    self._spare, self._own, self._used = self._own, None, 0
                return frames
            size = -1  # under 4 bytes of the next frame: its size is not known yet
        self._keep(buffer, at, used, size)
        return frames

    def _keep(self, buffer: bytearray, at: int, used: int, size: int) -> None:
        """Keep ``buffer[at:used]``, the start of a frame of ``size`` bytes (-1: not known yet)."""
        remaining = used - at
        with memoryview(buffer) as view:
            if size >= 0 and 4 + size > SCRATCH_SIZE:
                # Too big for the scratch buffer: read the rest straight into its own buffer.
                available = remaining - 4
                large = self._take(size, available)
                assert available < len(large)
                large[:available] = view[at + 4 : used]
                self._large, self._large_size, self._large_filled, self._large_at = large, size, available, 0
                self._expect_large = size
                self._own, self._used = None, 0
                return
            # Part of a frame: keep it in a buffer of this connection's (the frame fits).
            if buffer is self._own:
                if at:
                    buffer[:remaining] = view[at:used]
            else:
                own = self._spare if self._spare is not None else bytearray(SCRATCH_SIZE)
                self._spare = None
                own[:remaining] = view[at:used]
                self._own = own
            self._used = remaining

    def _take(self, size: int, filled: int) -> bytearray:
        """A buffer for a frame of ``size`` bytes of which ``filled`` (fewer) arrived: recycled if one fits."""
        want = min(size, max(LARGE_INITIAL, 2 * filled))
        for i, buffer in enumerate(self._pool):
            if len(buffer) >= want:
                return self._pool.pop(i)
        return bytearray(_rounded(want))

    def _copied(self, buffer: bytearray, at: int, size: int) -> Frame:
        """A whole large frame read with another into a recycled buffer: copied into its own."""
        for i, owner in enumerate(self._pool):
            if len(owner) >= size:
                del self._pool[i]
                break
        else:
            owner = bytearray(_rounded(size))
        with memoryview(buffer) as view:
            owner[:size] = view[at : at + size]
        self._expect_large = size
        return Frame(memoryview(owner)[:size], owner)

    def _grow(self) -> None:
        """A bigger buffer for the frame being read (the old one may still be exported: copy)."""
        large = self._large
        assert large is not None
        end = self._large_at + self._large_filled
        bigger = bytearray(_rounded(min(self._large_at + self._large_size, 2 * len(large))))
        bigger[:end] = large[:end]
        self._large = bigger

    def release(self, frame: Frame) -> None:
        """Give a large frame's buffer back for reuse (nothing may refer to it after this)."""
        if frame.owner is not None and len(self._pool) < POOL_SIZE and len(frame.owner) <= POOLED_MAX:
            self._pool.append(frame.owner)

    def trim(self) -> None:
        """Drop the recycled buffers (the connection has gone quiet)."""
        self._pool.clear()
        self._spare = None
        self._spec = None

    @property
    def held(self) -> int:
        """Bytes of buffers this reader holds (the shared scratch buffer not counted)."""
        own = len(self._own) if self._own is not None else 0
        own += len(self._spare) if self._spare is not None else 0
        large = len(self._large) if self._large is not None else 0
        large += len(self._spec) if self._spec is not None else 0
        return own + large + sum(len(buffer) for buffer in self._pool)


_local = threading.local()


def _shared_scratch() -> bytearray:
    """This thread's scratch buffer (the loop that reads into it runs on this thread)."""
    scratch: bytearray | None = getattr(_local, "scratch", None)
    if scratch is None:
        scratch = _local.scratch = bytearray(SCRATCH_SIZE)
    return scratch


def _rounded(size: int) -> int:
    return (size + ROUND - 1) // ROUND * ROUND

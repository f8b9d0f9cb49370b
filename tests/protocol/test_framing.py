"""The frame splitter (protocol/framing.py): frames split whatever the pieces, large frames in
recycled buffers, bad sizes refused, idle readers holding nothing."""

from __future__ import annotations

import random
import struct

import pytest

from logstore.protocol.framing import SCRATCH_SIZE, Frame, FrameReader, FrameSizeError

pytestmark = pytest.mark.unit


def feed(reader: FrameReader, stream: bytes, rng: random.Random) -> list[bytes]:
    """Deliver ``stream`` in random-sized pieces, as a socket would."""
    frames = []
    at = 0
    while at < len(stream):
        buffer = reader.get_buffer()
        n = min(len(buffer), len(stream) - at, rng.randint(1, 300_000))
        buffer[:n] = stream[at : at + n]
        at += n
        for frame in reader.buffer_updated(n):
            frames.append(bytes(frame.data))
            reader.release(frame)
    return frames


@pytest.mark.parametrize("seed", range(5))
def test_frames_split_whatever_the_pieces(seed: int) -> None:
    rng = random.Random(seed)
    sizes = [
        rng.choice([8, 9, 100, 5000, SCRATCH_SIZE - 4, SCRATCH_SIZE, 300_000, 1_100_000, 5_000_000])
        for _ in range(40)
    ]
    payloads = [rng.randbytes(size) for size in sizes]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    assert feed(FrameReader(6_000_000), stream, rng) == payloads


def test_large_frames_are_writable_views_of_recycled_buffers() -> None:
    reader = FrameReader(4_000_000)
    payload = b"x" * 1_000_000
    seen = []
    for _ in range(3):
        stream = struct.pack(">i", len(payload)) + payload
        at, frames = 0, []
        while at < len(stream):
            buffer = reader.get_buffer()
            n = min(len(buffer), len(stream) - at)
            buffer[:n] = stream[at : at + n]
            at += n
            frames += reader.buffer_updated(n)
        (frame,) = frames
        assert isinstance(frame.data, memoryview) and not frame.data.readonly
        assert frame.data == payload
        seen.append(id(frame.owner))
        reader.release(frame)
    assert len(set(seen)) == 1  # the same buffer each time: no fresh pages


@pytest.mark.parametrize("size", [-1, 0, 7, 2_000_001])
def test_bad_sizes(size: int) -> None:
    reader = FrameReader(2_000_000)
    reader.get_buffer()[:4] = struct.pack(">i", size)
    with pytest.raises(FrameSizeError):
        reader.buffer_updated(4)


def test_idle_readers_hold_no_buffer_and_share_the_scratch() -> None:
    """Two readers interleaving their reads split correctly; trimmed, a reader holds nothing."""
    rng = random.Random(7)
    readers = [FrameReader(1_000_000), FrameReader(1_000_000)]
    payloads = [[rng.randbytes(rng.choice([10, 3000, 70_000])) for _ in range(30)] for _ in readers]
    streams = [b"".join(struct.pack(">i", len(p)) + p for p in ps) for ps in payloads]
    at = [0, 0]
    got: list[list[bytes]] = [[], []]
    while any(at[i] < len(streams[i]) for i in range(2)):
        for i, reader in enumerate(readers):
            if at[i] >= len(streams[i]):
                continue
            buffer = reader.get_buffer()
            n = min(len(buffer), len(streams[i]) - at[i], rng.randint(1, 50_000))
            buffer[:n] = streams[i][at[i] : at[i] + n]
            at[i] += n
            for frame in reader.buffer_updated(n):
                got[i].append(bytes(frame.data))
                reader.release(frame)
    assert got == payloads
    for reader in readers:
        reader.trim()
    assert [reader.held for reader in readers] == [0, 0]
    # a frame cut in two: its first part is kept in a buffer the size of the frame, then dropped
    reader = readers[0]
    frame = struct.pack(">i", 100) + b"y" * 100
    reader.get_buffer()[:50] = frame[:50]
    assert reader.buffer_updated(50) == [] and reader.held == SCRATCH_SIZE
    reader.get_buffer()[:54] = frame[50:]
    assert [bytes(f.data) for f in reader.buffer_updated(54)] == [b"y" * 100]
    assert len(reader.get_buffer()) == SCRATCH_SIZE  # whole frames go to the shared buffer again
    assert reader.held == SCRATCH_SIZE  # kept for the next partial frame, until trimmed
    reader.trim()
    assert reader.held == 0


@pytest.mark.parametrize("seed", range(6))
def test_frames_held_while_more_arrive_keep_their_bytes(seed: int) -> None:
    """Large frames read straight into recycled buffers (several per read, partial ones, small
    ones between) stay intact while held, released in any order: no buffer is in two hands."""
    rng = random.Random(seed)
    reader = FrameReader(6_000_000)
    choices = [8, 100, 5000, SCRATCH_SIZE - 4, SCRATCH_SIZE, 440_000, 1_100_000, 2_500_000]
    sizes = [rng.choice(choices) for _ in range(60)]
    payloads = [rng.randbytes(size) for size in sizes]
    stream = b"".join(struct.pack(">i", len(p)) + p for p in payloads)
    held: list[tuple[int, Frame]] = []
    got: list[int] = []
    at = 0
    while at < len(stream):
        buffer = reader.get_buffer()
        n = min(len(buffer), len(stream) - at, rng.choice([3, 1000, 300_000, 3_000_000, 8_000_000]))
        buffer[:n] = stream[at : at + n]
        at += n
        for frame in reader.buffer_updated(n):
            held.append((len(got), frame))
            got.append(len(frame))
        while held and rng.random() < 0.5:
            index, frame = held.pop(rng.randrange(len(held)))
            assert bytes(frame.data) == payloads[index]
            reader.release(frame)  # its bytes may be overwritten from now on
    assert all(bytes(frame.data) == payloads[index] for index, frame in held)
    assert got == sizes


def test_a_large_frame_after_a_large_one_is_read_where_it_stays() -> None:
    reader = FrameReader(4_000_000)
    payload = b"z" * 500_000
    stream = struct.pack(">i", len(payload)) + payload
    for round_ in range(3):
        buffer = reader.get_buffer()
        if round_:  # a recycled buffer, not the scratch one: the size and body land in place
            assert len(buffer) > len(stream)
        n = min(len(buffer), len(stream))
        buffer[:n] = stream[:n]
        frames = reader.buffer_updated(n)
        while not frames:
            buffer = reader.get_buffer()
            buffer[: len(stream) - n] = stream[n:]
            frames = reader.buffer_updated(len(stream) - n)
        (frame,) = frames
        assert frame.data == payload and not frame.data.readonly
        reader.release(frame)
    # a small frame next: copied out, and reads go to the scratch buffer again
    small = struct.pack(">i", 10) + b"s" * 10
    reader.get_buffer()[: len(small)] = small
    assert [bytes(frame.data) for frame in reader.buffer_updated(len(small))] == [b"s" * 10]
    assert len(reader.get_buffer()) == SCRATCH_SIZE

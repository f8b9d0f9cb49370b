"""The frame splitter, the zero-copy Produce decoder and the direct response encoders, against kio."""

from __future__ import annotations

import datetime
import io
import random
import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from logstore.broker.apis.produce_codec import decode, encode_body
from logstore.protocol import ProtocolError
from logstore.protocol.framing import SCRATCH_SIZE, Frame, FrameReader, FrameSizeError


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


@pytest.mark.parametrize("size", [-1, 0, 7, 2_000_001])
def test_bad_sizes(size: int) -> None:
    reader = FrameReader(2_000_000)
    reader.get_buffer()[:4] = struct.pack(">i", size)
    with pytest.raises(FrameSizeError):
        reader.buffer_updated(4)


def encode(request: object) -> bytes:
    out = io.BytesIO()
    entity_writer(type(request))(out, request)
    return out.getvalue()


topics = st.lists(
    st.tuples(
        st.text(min_size=1, max_size=20),
        st.lists(
            st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.binary(max_size=200))), max_size=4
        ),
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(3, 10),
    transactional_id=st.one_of(st.none(), st.text(max_size=10)),
    acks=st.sampled_from([-1, 0, 1]),
    timeout=st.integers(0, 2**31 - 1),
    topics=topics,
)
def test_produce_decode_matches_kio(
    version: int, transactional_id: str | None, acks: int, timeout: int, topics: list
) -> None:
    module = load_payload_module(0, version, EntityType.request)
    request = module.ProduceRequest(
        transactional_id=transactional_id,
        acks=acks,
        timeout=datetime.timedelta(milliseconds=timeout),
        topic_data=tuple(
            module.TopicProduceData(
                name=name,
                partition_data=tuple(module.PartitionProduceData(index=i, records=r) for i, r in parts),
            )
            for name, parts in topics
        ),
    )
    body = b"prefix" + encode(request)
    ours, size = decode(bytearray(body), 6, version)
    theirs, their_size = entity_reader(type(request))(body, 6)
    assert size == their_size == len(body) - 6
    assert (ours.transactional_id, ours.acks, ours.timeout) == (
        theirs.transactional_id,
        theirs.acks,
        theirs.timeout,
    )
    assert [
        (t.name, [(p.index, None if p.records is None else bytes(p.records)) for p in t.partition_data])
        for t in ours.topic_data
    ] == [(t.name, [(p.index, p.records) for p in t.partition_data]) for t in theirs.topic_data]


@pytest.mark.parametrize("version", [3, 9])
def test_produce_decode_rejects_every_truncation(version: int) -> None:
    module = load_payload_module(0, version, EntityType.request)
    request = module.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout=datetime.timedelta(milliseconds=100),
        topic_data=(
            module.TopicProduceData(
                name="t", partition_data=(module.PartitionProduceData(index=0, records=b"r" * 50),)
            ),
        ),
    )
    body = encode(request)
    for cut in range(len(body)):
        with pytest.raises(ProtocolError):
            decode(body[:cut], 0, version)


partition_results = st.lists(
    st.tuples(
        st.integers(0, 2**31 - 1),
        st.sampled_from([0, 1, 2, 3, 10, 45, 47, 87]),
        st.integers(-1, 2**62),
        st.one_of(st.just(-1), st.integers(0, 2**41)),
        st.integers(-1, 2**62),
        st.one_of(st.none(), st.text(max_size=30)),
        st.lists(
            st.tuples(st.integers(0, 2**31 - 1), st.one_of(st.none(), st.text(max_size=20))), max_size=3
        ).map(tuple),
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(3, 10),
    topics=st.lists(st.tuples(st.text(min_size=1, max_size=20), partition_results), max_size=4),
)
def test_produce_response_bytes_equal_kios(version: int, topics: list) -> None:
    """The hand-written encoder writes exactly the bytes kio's writer writes."""
    from kio.schema.errors import ErrorCode

    from logstore.protocol import NO_THROTTLE, build

    module = load_payload_module(0, version, EntityType.response)
    response = build(
        module.ProduceResponse,
        responses=tuple(
            build(
                module.TopicProduceResponse,
                name=name,
                partition_responses=tuple(
                    build(
                        module.PartitionProduceResponse,
                        index=index,
                        error_code=ErrorCode(error),
                        base_offset=base,
                        log_append_time=None
                        if append < 0
                        else datetime.datetime.fromtimestamp(append / 1000, datetime.UTC),
                        log_start_offset=start,
                        record_errors=tuple(
                            build(
                                module.BatchIndexAndErrorMessage, batch_index=i, batch_index_error_message=why
                            )
                            for i, why in record_errors
                        )
                        if version >= 8
                        else (),
                        error_message=message,
                    )
                    for index, error, base, append, start, message, record_errors in parts
                ),
            )
            for name, parts in topics
        ),
        throttle_time=NO_THROTTLE,
    )
    assert encode_body(version, topics) == encode(response)


@settings(max_examples=200, deadline=None)
@given(
    version=st.integers(2, 10),
    topics=st.lists(
        st.tuples(
            st.text(max_size=20),
            st.uuids(),
            st.lists(
                st.tuples(
                    st.integers(-1, 2**31 - 1),
                    st.sampled_from([0, 3, 12, 22, 25, 27, 28, 100]),
                    st.booleans(),  # the error came before the commit (an unknown topic) or from it
                ),
                max_size=4,
                unique_by=lambda p: p[0],
            ),
        ),
        max_size=4,
    ),
)
def test_offset_commit_response_bytes_equal_kios(version: int, topics: list) -> None:
    """OffsetCommit's hand-written response encoder writes exactly what kio writes."""
    from types import SimpleNamespace

    from kio.schema.errors import ErrorCode

    from logstore.broker.apis.offset_commit import _encode
    from logstore.protocol import NO_THROTTLE, build

    module = load_payload_module(8, version, EntityType.response)
    response = build(
        module.OffsetCommitResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                module.OffsetCommitResponseTopic,
                name=name,
                topic_id=topic_id,
                partitions=tuple(
                    build(module.OffsetCommitResponsePartition, partition_index=p, error_code=ErrorCode(e))
                    for p, e, _ in parts
                ),
            )
            for name, topic_id, parts in topics
        ),
    )
    request = SimpleNamespace(
        topics=[
            SimpleNamespace(
                name=name,
                topic_id=topic_id,
                partitions=[SimpleNamespace(partition_index=p) for p, _, _ in parts],
            )
            for name, topic_id, parts in topics
        ]
    )
    names = [f"topic-{index}" for index in range(len(topics))]  # as the broker resolved them
    before = {
        (i, p): ErrorCode(e) for i, (_, _, parts) in enumerate(topics) for p, e, early in parts if early
    }
    committed = {
        (names[i], p): ErrorCode(e)
        for i, (_, _, parts) in enumerate(topics)
        for p, e, early in parts
        if not early
    }
    assert _encode(version, request, names, before, committed) == encode(response)


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

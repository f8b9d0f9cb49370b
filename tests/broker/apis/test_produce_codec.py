"""The zero-copy Produce decoder (broker/apis/produce_codec.py) and the direct response encoders
(Produce's, OffsetCommit's in broker/apis/offset_commit.py), against kio. The frame splitter
they read from is tested in tests/protocol/test_framing.py."""

from __future__ import annotations

import datetime
import io

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kio.index import load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from logstore.broker.apis.produce_codec import decode, encode_body
from logstore.protocol import ProtocolError

pytestmark = pytest.mark.unit


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

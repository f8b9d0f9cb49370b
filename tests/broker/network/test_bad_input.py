"""The broker against bad input on raw sockets: each bad frame gets an error or a close, others are served on.

Frames are built here with kio (request header v1, or v2 for flexible
versions, packed by hand), then broken on purpose: sizes over
``socket.request.max.bytes``, negative or shorter than a header, unknown
APIs and versions, garbage and truncated bodies, a client stalled
mid-frame. Each must get an error response, or a closed connection and a
log line, while every other connection is served. A seeded fuzz test sends
at least 10,000 mutated frames, then real clients still produce and consume.
"""

from __future__ import annotations

import datetime
import io
import os
import random
import re
import selectors
import socket
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Literal

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer  # type: ignore[import-untyped]
from kafka import TopicPartition as KafkaTopicPartition
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer
from kio.static.constants import EntityType

from logstore import build_batch
from logstore.protocol import build
from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

SIZE = struct.Struct(">i")
TIMEOUT_S = 10
TOPIC = "bad-input"


# -- frames ------------------------------------------------------------------


def _module(
    api_key: int,
    version: int,
    kind: Literal[EntityType.request, EntityType.response] = EntityType.request,
) -> ModuleType:
    return load_payload_module(api_key, version, kind)


def _top(module: ModuleType, suffix: str) -> type:
    return next(
        v
        for k, v in vars(module).items()
        if k.endswith(suffix) and getattr(v, "__type__", None) in (EntityType.request, EntityType.response)
    )


def encode(request: Any, correlation_id: int, client_id: str | None = "bad-input") -> bytes:
    """A whole request frame, size prefix included: header v1 (v2 when flexible) + kio body."""
    cls = type(request)
    header = struct.pack(">hhi", cls.__api_key__, cls.__version__, correlation_id)
    if client_id is None:
        header += struct.pack(">h", -1)
    else:
        name = client_id.encode()
        header += struct.pack(">h", len(name)) + name
    if cls.__flexible__:
        header += b"\x00"  # no tagged fields
    body = io.BytesIO()
    entity_writer(cls)(body, request)
    payload = header + body.getvalue()
    return SIZE.pack(len(payload)) + payload


def api_versions(version: int) -> Any:
    module = _module(18, version)
    return build(module.ApiVersionsRequest, client_software_name="bad-input", client_software_version="1.0")


def metadata(version: int, topics: list[str] | None, auto_create: bool = True) -> Any:
    module = _module(3, version)
    entries = None
    if topics is not None:
        entries = tuple(
            build(module.MetadataRequestTopic, name=name, topic_id=uuid.UUID(int=0)) for name in topics
        )
    elif version == 0:
        entries = ()
    return build(
        module.MetadataRequest,
        topics=entries,
        allow_auto_topic_creation=auto_create,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )


def produce(version: int, topic: str, partition: int, records: bytes | None, acks: int = 1) -> Any:
    module = _module(0, version)
    data = build(module.PartitionProduceData, index=partition, records=records)
    return build(
        module.ProduceRequest,
        transactional_id=None,
        acks=acks,
        timeout=datetime.timedelta(seconds=5),
        topic_data=(build(module.TopicProduceData, name=topic, partition_data=(data,)),),
    )


def fetch(
    version: int,
    topic: str,
    partition: int,
    offset: int = 0,
    max_bytes: int = 1 << 20,
    max_wait_ms: int = 0,
    min_bytes: int = 0,
) -> Any:
    module = _module(1, version)
    part = build(
        module.FetchPartition,
        partition=partition,
        current_leader_epoch=-1,
        fetch_offset=offset,
        last_fetched_epoch=-1,
        log_start_offset=-1,
        partition_max_bytes=max_bytes,
    )
    return build(
        module.FetchRequest,
        replica_id=-1,
        max_wait=datetime.timedelta(milliseconds=max_wait_ms),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=(build(module.FetchTopic, topic=topic, partitions=(part,)),),
        forgotten_topics_data=(),
        rack_id="",
    )


def list_offsets(version: int, topic: str, partition: int, timestamp: int = -1) -> Any:
    module = _module(2, version)
    part = build(
        module.ListOffsetsPartition, partition_index=partition, current_leader_epoch=-1, timestamp=timestamp
    )
    return build(
        module.ListOffsetsRequest,
        replica_id=-1,
        isolation_level=0,
        topics=(build(module.ListOffsetsTopic, name=topic, partitions=(part,)),),
    )


def init_producer_id(version: int, transactional_id: str | None = None, timeout_s: float = 60) -> Any:
    module = _module(22, version)
    return build(
        module.InitProducerIdRequest,
        transactional_id=transactional_id,
        transaction_timeout=datetime.timedelta(seconds=timeout_s),
        producer_id=-1,
        producer_epoch=-1,
    )


def decode_response(api_key: int, version: int, frame: bytes) -> tuple[int, Any]:
    """(correlation id, response) from a response frame without its size prefix."""
    cls = _top(_module(api_key, version, EntityType.response), "Response")
    (correlation_id,) = SIZE.unpack_from(frame, 0)
    at = 4 + (1 if cls.__flexible__ and api_key != 18 else 0)  # type: ignore[attr-defined]
    response: Any = entity_reader(cls)(frame, at)[0]
    return correlation_id, response


# -- a raw connection --------------------------------------------------------


class Raw:
    """One blocking socket to the broker."""

    def __init__(self, broker: BrokerProcess, timeout: float = TIMEOUT_S) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self.sock.recv(min(n, 1 << 20))
            if not chunk:
                raise ConnectionError("closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def read_frame(self) -> bytes:
        (size,) = SIZE.unpack(self._exact(4))
        return self._exact(size)

    def call(self, request: Any, correlation_id: int = 7) -> Any:
        self.send(encode(request, correlation_id))
        got, response = decode_response(
            type(request).__api_key__, type(request).__version__, self.read_frame()
        )
        assert got == correlation_id
        return response

    def closed_by_broker(self, timeout: float = TIMEOUT_S) -> bool:
        """True when the broker closes (or resets) the connection within ``timeout``."""
        self.sock.settimeout(timeout)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def __enter__(self) -> Raw:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def served(broker: BrokerProcess, conn: Raw | None = None) -> None:
    """An ApiVersions round trip (on ``conn``, or a new connection) answers without error."""
    if conn is None:
        with Raw(broker) as fresh:
            response = fresh.call(api_versions(3))
    else:
        response = conn.call(api_versions(3))
    assert response.error_code == ErrorCode.none
    assert any(k.api_key == 18 for k in response.api_keys)


def wait_for_log(broker: BrokerProcess, pattern: str, timeout: float = TIMEOUT_S) -> str:
    """The first log line matching the regular expression ``pattern`` (waits for the broker to write it)."""
    deadline = time.monotonic() + timeout
    while True:
        for line in broker.log_text().splitlines():
            if re.search(pattern, line):
                return line
        if time.monotonic() > deadline:
            raise AssertionError(f"no log line matching {pattern!r}:\n{broker.log_text()[-3000:]}")
        time.sleep(0.05)


def no_crash_in_log(broker: BrokerProcess) -> None:
    log = broker.log_text()
    assert "unexpected error" not in log, log[-5000:]
    assert "Traceback" not in log, log[-5000:]


def expect_close(broker: BrokerProcess, data: bytes, log_pattern: str) -> str:
    """``data`` on a fresh connection gets it closed and a log line matching ``log_pattern``; others are served."""
    with Raw(broker) as bystander:
        served(broker, bystander)
        with Raw(broker) as bad:
            bad.send(data)
            assert bad.closed_by_broker(), f"the broker kept the connection open after {data[:64]!r}"
        line = wait_for_log(broker, log_pattern)
        served(broker, bystander)
    served(broker)
    assert broker.alive
    return line


def header(api_key: int, version: int, correlation_id: int = 1, flexible: bool = False) -> bytes:
    """A request header v1 (v2 with ``flexible``) with client id "bad-input"."""
    data = struct.pack(">hhih", api_key, version, correlation_id, 9) + b"bad-input"
    return data + (b"\x00" if flexible else b"")


def framed(payload: bytes) -> bytes:
    return SIZE.pack(len(payload)) + payload


# -- 1. frames over socket.request.max.bytes --------------------------------


def test_frame_over_socket_request_max_bytes(broker_factory: Callable[..., BrokerProcess]) -> None:
    limit = 1 << 20
    broker = broker_factory({"socket.request.max.bytes": str(limit)})
    with Raw(broker) as before:
        served(broker, before)
        with Raw(broker) as bad:
            bad.send(SIZE.pack(limit + 1) + header(18, 0) + bytes(1000))
            assert bad.closed_by_broker()
        line = wait_for_log(broker, f"a frame of {limit + 1} bytes")
        assert f"socket.request.max.bytes={limit}" in line
        served(broker, before)
        served(broker)
        with Raw(broker) as huge:  # declared only: the broker must not wait for (or allocate) 2 GiB
            huge.send(SIZE.pack(2**31 - 1))
            assert huge.closed_by_broker()
        wait_for_log(broker, f"a frame of {2**31 - 1} bytes")
        # A frame of exactly the limit is served (kio ignores the padding after the body).
        with Raw(broker) as edge:
            payload = encode(api_versions(0), 5)[4:]
            edge.send(framed(payload + bytes(limit - len(payload))))
            correlation_id, response = decode_response(18, 0, edge.read_frame())
            assert (correlation_id, response.error_code) == (5, ErrorCode.none)
        served(broker, before)
    assert broker.alive


# -- 2. negative and short sizes -------------------------------------------------


@pytest.mark.parametrize("size", [-1, -(2**31), 0, 3, 7])
def test_negative_or_short_size(broker: BrokerProcess, size: int) -> None:
    expect_close(broker, SIZE.pack(size) + header(18, 0), f"a frame of {size} bytes")


def test_frame_shorter_than_its_header(broker: BrokerProcess) -> None:
    # 8 bytes pass the framing (api key, version, correlation id) but hold no client id length.
    expect_close(
        broker, framed(struct.pack(">hhi", 18, 0, 1)), "8-byte frame is shorter than a request header"
    )
    expect_close(broker, framed(struct.pack(">hhih", 3, 1, 1, 100) + b"abc"), "client_id runs past the end")
    # Header v2: the tagged fields of the header run past the end.
    expect_close(broker, framed(header(3, 12) + b"\x02\x00\x05ab"), "past the end of the frame")


# -- 3. unknown APIs and versions -------------------------------------------------


def test_unknown_api_key(broker: BrokerProcess) -> None:
    expect_close(broker, framed(header(9999, 0) + bytes(8)), "unknown API key 9999")
    expect_close(broker, framed(header(-1, 0)), "unknown API key -1")


def test_unsupported_version(broker: BrokerProcess) -> None:
    expect_close(broker, framed(header(0, 99, flexible=True) + bytes(16)), "Produce v99 is not supported")
    expect_close(broker, framed(header(3, -1)), "Metadata v-1 is not supported")
    expect_close(broker, framed(header(1, 3) + bytes(32)), "Fetch v3 is not supported")


def test_api_versions_unsupported_version_answers_v0_with_the_ranges(broker: BrokerProcess) -> None:
    with Raw(broker) as conn:
        # As a newer client would send it: header v2 and a v3-style body.
        body = b"\x0abad-input\x041.0\x00"
        conn.send(framed(header(18, 99, correlation_id=42, flexible=True) + body))
        correlation_id, response = decode_response(18, 0, conn.read_frame())
        assert correlation_id == 42
        assert response.error_code == ErrorCode.unsupported_version
        assert int(response.error_code.value) == 35
        ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
        assert ranges[18] == (0, 4)
        for key in (0, 1, 2, 3, 22):
            assert key in ranges
        # The same ranges as a supported ApiVersions, and the connection stays open.
        normal = conn.call(api_versions(0))
        assert {k.api_key: (k.min_version, k.max_version) for k in normal.api_keys} == ranges
        served(broker, conn)


# -- 4. garbage and truncated bodies -------------------------------------------


def test_garbage_frame(broker: BrokerProcess) -> None:
    expect_close(broker, framed(b"\xde\xad\xbe\xef" * 8), "unknown API key -8531")


@pytest.mark.parametrize(
    ("name", "payload", "log_pattern"),
    [
        # kio sizes an array's storage from its wire length before reading the items: these
        # lengths (2**31 - 1 items; a 5-byte compact length of 2**32) made it ask for 16 and
        # 32 GiB, and a failed allocation aborts the whole broker.
        (
            "legacy array length 2**31-1",
            header(3, 1) + b"\x7f\xff\xff\xff",
            "cannot decode Metadata v1 .*topics claims 2147483647 items",
        ),
        (
            "5-byte compact array length",
            header(3, 12, flexible=True) + b"\xff\xff\xff\xff\x0f",
            "cannot decode Metadata v12 .*topics claims 4294967294 items",
        ),
        (
            "fetch topics 2**31-1",
            header(1, 6) + bytes(12) + b"\x7f\xff\xff\xff\x00\x7f\xff\xff\xff",
            "cannot decode Fetch v6 .*topics claims 2147483647 items",
        ),
        (
            "varint of 6 bytes",
            header(3, 12, flexible=True) + b"\xff" * 6,
            "Metadata v12 .*varint longer than 5 bytes",
        ),
        (
            "string past the end",
            header(3, 1) + b"\x00\x00\x00\x01\x7f\xffab",
            "cannot decode Metadata v1 .*name runs past the end",
        ),
        (
            "garbage body",
            header(3, 9, flexible=True) + b"\xffgarbage\x00\x01\x02",
            "cannot decode Metadata v9",
        ),
        # A null where the schema allows none: kio would hand the handler None.
        (
            "null topic_data",
            header(0, 9, flexible=True) + b"\x00\x00\x01\x00\x00\x13\x88\x00\x00",
            "topic_data is null|produce request: topics has -1 items",
        ),
        (
            "null fetch topics",
            header(1, 12, flexible=True) + bytes(25) + b"\x00",
            "Fetch v12 .*topics is null",
        ),
        (
            "null software name",
            header(18, 3, flexible=True) + b"\x00\x041.0\x00",
            "ApiVersions v3 .*client_software_name is null",
        ),
        (
            "null topic name",
            header(3, 1) + b"\x00\x00\x00\x01\xff\xff",
            "cannot decode Metadata v1 .*name is null",
        ),
    ],
)
def test_bad_body(broker: BrokerProcess, name: str, payload: bytes, log_pattern: str) -> None:
    expect_close(broker, framed(payload), log_pattern)
    no_crash_in_log(broker)


def test_body_truncated_mid_field(broker: BrokerProcess) -> None:
    batch = build_batch([b"one", b"two"])
    frame = encode(produce(9, TOPIC, 0, batch), 3)
    for cut in (1, 5, 40, len(batch) + 3):
        expect_close(
            broker, framed(frame[4:-cut]), "cannot decode Produce v9|produce request: .* runs past the end"
        )
    frame = encode(fetch(12, TOPIC, 0), 4)
    expect_close(broker, framed(frame[4:-9]), "cannot decode Fetch v12")
    no_crash_in_log(broker)


def test_odd_but_decodable_requests_get_error_responses(broker: BrokerProcess) -> None:
    """Requests kio decodes but that make no sense get per-partition errors, never a close."""
    with Raw(broker) as conn:
        assert conn.call(metadata(9, [TOPIC])).topics[0].error_code == ErrorCode.none
        for bad_name in ("x" * 300, "bad name!", "", ".."):
            (topic,) = conn.call(metadata(9, [bad_name])).topics
            assert (topic.name, topic.error_code) == (bad_name, ErrorCode.invalid_topic_exception)
        everything = conn.call(metadata(12, None)).topics  # every topic
        assert sorted(t.name for t in everything) == ["__consumer_offsets", TOPIC]
        # v12 by an unknown topic id
        module = _module(3, 12)
        by_id = build(
            module.MetadataRequest,
            topics=(build(module.MetadataRequestTopic, name=None, topic_id=uuid.uuid4()),),
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        (topic,) = conn.call(by_id).topics
        assert topic.error_code == ErrorCode.unknown_topic_id

        def fetch_error(**kwargs: Any) -> Any:
            (part,) = conn.call(fetch(12, kwargs.pop("topic", TOPIC), **kwargs)).responses[0].partitions
            return part.error_code

        assert fetch_error(partition=-1) == ErrorCode.unknown_topic_or_partition
        assert fetch_error(partition=2**31 - 1) == ErrorCode.unknown_topic_or_partition
        assert fetch_error(partition=0, offset=-5) == ErrorCode.offset_out_of_range
        assert fetch_error(partition=0, offset=2**63 - 1) == ErrorCode.offset_out_of_range
        assert fetch_error(partition=0, max_bytes=-1) == ErrorCode.none
        assert fetch_error(partition=0, max_wait_ms=-1000, min_bytes=-1) == ErrorCode.none
        assert fetch_error(topic="no-such-topic", partition=0) == ErrorCode.unknown_topic_or_partition

        def list_error(partition: int, timestamp: int = -1) -> Any:
            response = conn.call(list_offsets(7, TOPIC, partition, timestamp))
            return response.topics[0].partitions[0].error_code

        assert list_error(-1) == ErrorCode.unknown_topic_or_partition
        assert list_error(0, timestamp=-7) == ErrorCode.invalid_request
        assert list_error(0, timestamp=2**63 - 1) == ErrorCode.none

        def produce_error(partition: int, records: bytes | None, acks: int = 1) -> Any:
            response = conn.call(produce(9, TOPIC, partition, records, acks))
            return response.responses[0].partition_responses[0].error_code

        batch = build_batch([b"odd"])
        assert produce_error(-1, batch) == ErrorCode.unknown_topic_or_partition
        assert produce_error(0, batch, acks=5) == ErrorCode.invalid_required_acks
        assert produce_error(0, None) == ErrorCode.invalid_record
        assert produce_error(0, b"xyz") == ErrorCode.corrupt_message
        assert produce_error(0, batch[:-1] + bytes([batch[-1] ^ 1])) == ErrorCode.corrupt_message
        assert produce_error(0, batch + batch) == ErrorCode.invalid_record
        assert produce_error(0, batch) == ErrorCode.none

        response = conn.call(init_producer_id(4, transactional_id="tx", timeout_s=0))
        assert response.error_code == ErrorCode.invalid_transaction_timeout
        response = conn.call(init_producer_id(4, transactional_id="tx", timeout_s=3600))  # > 15 min
        assert response.error_code == ErrorCode.invalid_transaction_timeout
        response = conn.call(init_producer_id(4, transactional_id=""))
        assert response.error_code == ErrorCode.invalid_request
        response = conn.call(init_producer_id(4, transactional_id="tx"))
        assert (response.error_code, response.producer_epoch) == (ErrorCode.none, 0)
        response = conn.call(
            api_versions(3).__class__(client_software_name="-bad-", client_software_version="1")
        )
        assert response.error_code == ErrorCode.invalid_request
        served(broker, conn)
    no_crash_in_log(broker)


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_v10_v11_topic_by_id(broker: BrokerProcess, version: int) -> None:
    module = _module(3, version)
    request = build(
        module.MetadataRequest,
        topics=(build(module.MetadataRequestTopic, name=None, topic_id=uuid.uuid4()),),
        allow_auto_topic_creation=True,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    with Raw(broker) as conn:
        try:
            (topic,) = conn.call(request).topics
        finally:
            no_crash_in_log(broker)
        assert topic.error_code != ErrorCode.none


def test_one_request_creating_many_topics_does_not_stall_others(broker: BrokerProcess) -> None:
    names = [f"many-{i}" for i in range(1500)]
    with Raw(broker, timeout=120) as creator, Raw(broker) as other:
        served(broker, other)
        creator.send(encode(metadata(9, names), 1))
        time.sleep(0.1)
        started = time.monotonic()
        served(broker, other)
        waited = time.monotonic() - started
        creator.read_frame()
    assert waited < 0.5, f"another client waited {waited:.1f} s"


# -- 5. a client stalled mid-frame -----------------------------------------------


def test_client_stalled_mid_frame(broker_factory: Callable[..., BrokerProcess]) -> None:
    idle_ms = 2000
    broker = broker_factory({"connections.max.idle.ms": str(idle_ms)})
    frame = encode(api_versions(3), 1)
    half_frame = Raw(broker)
    half_frame.send(frame[: len(frame) // 2])
    half_size = Raw(broker)
    half_size.send(frame[:2])
    big_declared = Raw(broker)  # declares 1 MB, sends 10 bytes
    big_declared.send(SIZE.pack(1_000_000) + frame[4:14])
    stalled_at = time.monotonic()
    try:
        # Everyone else is served while they stall, on old and new connections.
        with Raw(broker) as other:
            while time.monotonic() - stalled_at < idle_ms / 1000 * 0.6:
                served(broker, other)
                served(broker)
                time.sleep(0.05)
        for conn in (half_frame, half_size, big_declared):
            assert conn.closed_by_broker(timeout=idle_ms / 1000 * 4)
            elapsed = time.monotonic() - stalled_at
            assert idle_ms / 1000 * 0.95 <= elapsed <= idle_ms / 1000 * 4, elapsed
        assert len(broker.log_text().split(f"idle for more than connections.max.idle.ms={idle_ms}")) >= 4
        served(broker)
    finally:
        for conn in (half_frame, half_size, big_declared):
            conn.close()


def test_stalled_client_does_not_block_others_by_default(broker: BrokerProcess) -> None:
    frame = encode(produce(9, TOPIC, 0, build_batch([b"x" * 1000])), 1)
    stalled = [Raw(broker) for _ in range(20)]
    try:
        for i, conn in enumerate(stalled):
            conn.send(frame[: 1 + i * len(frame) // 21])
        with Raw(broker) as conn:
            assert conn.call(metadata(9, [TOPIC])).topics[0].error_code == ErrorCode.none
            for i in range(20):
                response = conn.call(produce(9, TOPIC, 0, build_batch([b"ok"])))
                assert response.responses[0].partition_responses[0].base_offset == i
        for conn in stalled:  # the rest of each frame still completes it
            conn.send(frame[1 + stalled.index(conn) * len(frame) // 21 :])
        for conn in stalled:
            correlation_id, response = decode_response(0, 9, conn.read_frame())
            assert correlation_id == 1
            assert response.responses[0].partition_responses[0].error_code == ErrorCode.none
    finally:
        for conn in stalled:
            conn.close()


def _rss_mib(broker: BrokerProcess) -> int:
    assert broker.proc is not None
    with open(f"/proc/{broker.proc.pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) // 1024


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads the broker's RSS from /proc")
def test_frames_declared_large_but_never_sent_do_not_pin_memory(broker: BrokerProcess) -> None:
    before = _rss_mib(broker)
    stalled = [Raw(broker) for _ in range(8)]
    try:
        for conn in stalled:
            conn.send(SIZE.pack(64 << 20) + header(18, 0))
        time.sleep(0.5)
        served(broker)
        grown = _rss_mib(broker) - before
    finally:
        for conn in stalled:
            conn.close()
    assert grown < 64, f"8 stalled connections of 4 + 19 bytes each grew the broker by {grown} MiB"


# -- 6. pipelining -----------------------------------------------------------------


def test_pipelined_requests_answer_in_order(broker: BrokerProcess) -> None:
    batch = build_batch([b"pipelined"])
    requests: list[Any] = [metadata(9, [TOPIC])]
    while len(requests) < 50:
        i = len(requests)
        requests.append(
            [
                api_versions(i % 5),
                produce(3 + i % 8, TOPIC, 0, batch),
                # waits 100 ms for a megabyte that never comes: later requests must wait too
                fetch(4 + i % 9, TOPIC, 0, max_wait_ms=100, min_bytes=1 << 20),
                list_offsets(1 + i % 7, TOPIC, 0),
                init_producer_id(i % 5),
                metadata(i % 13, [TOPIC]),
            ][i % 6]
        )
    with Raw(broker) as conn:
        conn.send(b"".join(encode(request, i + 1) for i, request in enumerate(requests)))
        answers = []
        for request in requests:
            cls = type(request)
            answers.append(decode_response(cls.__api_key__, cls.__version__, conn.read_frame()))
    assert [correlation_id for correlation_id, _ in answers] == list(range(1, 51))
    produced = [r for (_, r), q in zip(answers, requests, strict=True) if type(q).__api_key__ == 0]
    offsets = [r.responses[0].partition_responses[0].base_offset for r in produced]
    assert offsets == list(range(9))


# -- 7. fuzz -----------------------------------------------------------------------

FUZZ_SEED = 20_240_611
FUZZ_FRAMES = 20_000
FUZZ_CONNECTIONS = 48
FUZZ_BUDGET_S = 45
STALL_S = 1.0
INTERESTING = (0, 1, -1, 2, 0x7F, 0x80, 0xFF, 0x7FFF, -0x8000, 0xFFFF, 0x7FFFFFFF, -0x80000000, 300)


def fuzz_bases() -> list[tuple[str, bytes]]:
    """Valid frames of several APIs and versions to mutate: (name, frame)."""
    batch = build_batch([b"fuzz", (b"key", b"value"), b"x" * 100])
    idempotent = build_batch([b"idempotent"], producer_id=1, producer_epoch=0, base_sequence=0)
    requests: list[Any] = [api_versions(v) for v in range(5)]
    requests += [metadata(v, [TOPIC]) for v in range(13)]
    requests += [metadata(v, None) for v in (0, 1, 4, 9, 12)]
    requests += [produce(v, TOPIC, 0, batch, acks=(1, -1, 0)[v % 3]) for v in range(3, 11)]
    requests += [produce(v, TOPIC, 0, idempotent) for v in (3, 9)]
    requests += [fetch(v, TOPIC, 0) for v in range(4, 13)]
    requests += [list_offsets(v, TOPIC, 0, (-1, -2, 0)[v % 3]) for v in range(1, 8)]
    requests += [init_producer_id(v) for v in range(5)]
    return [
        (f"{type(r).__name__} v{type(r).__version__}", encode(r, i, client_id="fuzz" if i % 2 else None))
        for i, r in enumerate(requests)
    ]


def mutate(rng: random.Random, frame: bytes) -> tuple[bytes, list[str]]:
    """A mutated copy of ``frame`` and the mutations applied.

    The size prefix is kept true unless the "size" mutation (rarer, and last) corrupts it.
    """
    body = bytearray(frame[4:])
    kinds = []
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        kind = rng.choice(("flip", "flip", "truncate", "insert", "delete", "int", "int", "varint", "api"))
        kinds.append(kind)
        at = rng.randrange(len(body) + 1)
        if kind == "flip" and at < len(body):
            body[at] ^= rng.randrange(1, 256)
        elif kind == "truncate":
            del body[at:]
        elif kind == "insert":
            body[at:at] = rng.randbytes(rng.randint(1, 16))
        elif kind == "delete":
            del body[at : at + rng.randint(1, 8)]
        elif kind == "int":  # a length (or any int) field made odd
            width = rng.choice((1, 2, 4))
            value = rng.choice(INTERESTING) & ((1 << (8 * width)) - 1)
            body[at : at + width] = value.to_bytes(width, "big")
        elif kind == "varint":  # a compact length made huge
            body[at : at + 5] = rng.choice(
                (b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\x7f", b"\x80\x80\x80\x80\x10")
            )
        elif kind == "api" and len(body) >= 4:
            key = rng.choice((0, 1, 2, 3, 18, 22, rng.randint(0, 75), rng.randint(-(2**15), 2**15 - 1)))
            version = rng.choice((rng.randint(0, 13), rng.randint(0, 13), rng.randint(-(2**15), 2**15 - 1)))
            body[0:4] = struct.pack(">hh", key, version)
    size = len(body)
    if rng.random() < 0.02:
        kinds.append("size")
        size = rng.choice((-1, -(2**31), 0, 3, 7, 8, size - 1, size + 1, size + 100, 2**31 - 1, 200 << 20))
    return SIZE.pack(size) + bytes(body), kinds


class FuzzSlot:
    """One pooled connection with at most one mutated frame (and its sentinel) in flight."""

    def __init__(self, broker: BrokerProcess, selector: selectors.BaseSelector) -> None:
        self.broker = broker
        self.selector = selector
        self.sock: socket.socket | None = None
        self.buffer = bytearray()
        self.sentinel = 0
        self.responses = 0
        self.deadline = 0.0
        self.kinds: list[str] = []
        self.connect()

    def connect(self) -> None:
        self.sock = socket.create_connection(("127.0.0.1", self.broker.port), timeout=TIMEOUT_S)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.selector.register(self.sock, selectors.EVENT_READ, self)
        self.buffer.clear()

    def reconnect(self) -> None:
        assert self.sock is not None
        self.selector.unregister(self.sock)
        self.sock.close()
        self.sock = None
        self.connect()

    def send(self, data: bytes) -> bool:
        """Write all of ``data`` (small: fits the socket buffer); False if the broker hung up."""
        assert self.sock is not None
        self.sock.setblocking(True)
        try:
            self.sock.sendall(data)
            return True
        except OSError:
            return False
        finally:
            self.sock.setblocking(False)

    def receive(self) -> Iterator[int] | None:
        """Correlation ids of the whole frames now readable; None when the broker closed."""
        assert self.sock is not None
        try:
            data = self.sock.recv(1 << 20)
        except BlockingIOError:
            return iter(())
        except OSError:
            return None
        if not data:
            return None
        self.buffer += data
        ids = []
        while len(self.buffer) >= 4:
            (size,) = SIZE.unpack_from(self.buffer, 0)
            if len(self.buffer) < 4 + size:
                break
            ids.append(SIZE.unpack_from(self.buffer, 4)[0])
            del self.buffer[: 4 + size]
        return iter(ids)


def run_fuzz(broker: BrokerProcess) -> dict[str, Any]:
    """Send FUZZ_FRAMES mutated frames over a pool of connections; returns the counts.

    Each mutated frame is followed by a valid ApiVersions "sentinel" with its own
    correlation id: the sentinel's answer means the broker processed the mutated frame
    (answering it, or not: Produce with acks=0); a close means it rejected it; neither
    within STALL_S means the frame left the broker waiting (a size prefix larger than the
    bytes sent, or a long-polling fetch), and the connection is dropped from our side.
    A watchdog connection meanwhile measures how long a good client waits for an answer.
    """
    rng = random.Random(FUZZ_SEED)
    bases = fuzz_bases()
    selector = selectors.DefaultSelector()
    stats: dict[str, Any] = dict.fromkeys(
        ("sent", "responses", "answered", "unanswered", "closed", "stalled"), 0
    )
    stalled_kinds: dict[str, int] = {}
    sentinel_ids = iter(range(-2, -(2**31), -1))
    started = time.monotonic()

    def start(slot: FuzzSlot) -> bool:
        """Send the next mutated frame and its sentinel; False when all are sent."""
        while stats["sent"] < FUZZ_FRAMES:
            _, frame = rng.choice(bases)
            mutated, slot.kinds = mutate(rng, frame)
            slot.sentinel = next(sentinel_ids)
            slot.responses = 0
            slot.deadline = time.monotonic() + STALL_S
            stats["sent"] += 1
            if slot.send(mutated + encode(api_versions(0), slot.sentinel)):
                return True
            stats["closed"] += 1  # closed before we finished writing
            slot.reconnect()
        return False

    watchdog = FuzzSlot(broker, selector)
    watchdog_waits: list[float] = []
    watchdog_sent = time.monotonic()
    assert watchdog.send(encode(api_versions(0), 1))
    slots = [FuzzSlot(broker, selector) for _ in range(FUZZ_CONNECTIONS)]
    active = {slot for slot in slots if start(slot)}
    try:
        while active:
            assert time.monotonic() - started < FUZZ_BUDGET_S, f"fuzzing took too long: {stats}"
            finished = set()
            for key, _ in selector.select(timeout=0.05):
                slot = key.data
                ids = slot.receive()
                if slot is watchdog:
                    assert ids is not None, "the broker closed a good client's connection"
                    for correlation_id in ids:
                        assert correlation_id == 1
                        watchdog_waits.append(time.monotonic() - watchdog_sent)
                        watchdog_sent = time.monotonic()
                        assert watchdog.send(encode(api_versions(0), 1))
                    continue
                if ids is None:
                    stats["closed"] += 1
                    slot.reconnect()
                    finished.add(slot)
                    continue
                for correlation_id in ids:
                    if correlation_id == slot.sentinel:
                        stats["answered" if slot.responses else "unanswered"] += 1
                        finished.add(slot)
                    else:
                        slot.responses += 1
                        stats["responses"] += 1
            now = time.monotonic()
            for slot in active - finished:
                if now > slot.deadline:
                    stats["stalled"] += 1
                    for kind in slot.kinds:
                        stalled_kinds[kind] = stalled_kinds.get(kind, 0) + 1
                    slot.reconnect()
                    finished.add(slot)
            for slot in finished:
                if slot in active and not start(slot):
                    active.discard(slot)
            assert now - watchdog_sent < 5, "a good client waited 5 s for ApiVersions"
    finally:
        for slot in [*slots, watchdog]:
            if slot.sock is not None:
                slot.sock.close()
        selector.close()
    stats["seconds"] = round(time.monotonic() - started, 1)
    stats["stalled_kinds"] = stalled_kinds
    stats["watchdog_answers"] = len(watchdog_waits)
    stats["watchdog_max_wait_s"] = round(max(watchdog_waits, default=0), 3)
    return stats


def log_tracebacks(log: str) -> list[tuple[str, str]]:
    """(the line before, the exception line) of each traceback in the broker's log."""
    lines = log.splitlines()
    found = []
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            end = next(
                (j for j in range(i + 1, len(lines)) if lines[j] and not lines[j][0].isspace()),
                len(lines) - 1,
            )
            found.append((lines[i - 1] if i else "", lines[end]))
    return found


def round_trip_confluent(bootstrap: str, topic: str, count: int) -> list[bytes]:
    reports: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(count):
        producer.produce(topic, value=b"after-fuzz-%d" % i, on_delivery=lambda err, msg: reports.append(err))
    assert producer.flush(30) == 0
    assert reports == [None] * count
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=count - len(got), timeout=1):
                assert msg.error() is None, msg.error()
                got.append(msg.value() or b"")
    finally:
        consumer.close()
    return got


def round_trip_kafka_python(bootstrap: str, topic: str, count: int) -> list[bytes]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    futures = [producer.send(topic, value=b"after-fuzz-%d" % i) for i in range(count)]
    producer.flush(30)
    assert [f.get(30).offset for f in futures] == list(range(count))
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, consumer_timeout_ms=5000)
    consumer.assign([KafkaTopicPartition(topic, 0)])
    consumer.seek(KafkaTopicPartition(topic, 0), 0)
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    try:
        for record in consumer:
            got.append(record.value)
            if len(got) >= count or time.monotonic() > deadline:
                break
    finally:
        consumer.close()
    return got


def test_fuzz(broker: BrokerProcess, capsys: pytest.CaptureFixture[str]) -> None:
    with Raw(broker) as conn:
        assert conn.call(metadata(9, [TOPIC])).topics[0].error_code == ErrorCode.none
    stats = run_fuzz(broker)
    with capsys.disabled():
        print(f"\nfuzz: {stats}")
    assert stats["sent"] >= FUZZ_FRAMES >= 10_000
    processed = stats["answered"] + stats["unanswered"]
    assert processed + stats["closed"] + stats["stalled"] == stats["sent"], stats
    assert stats["closed"] > FUZZ_FRAMES // 10 and processed > FUZZ_FRAMES // 10, stats
    # Only a size prefix larger than the bytes sent (or, rarely, a fetch mutated into a long
    # poll) leaves the broker waiting; never does it stop serving the other connections.
    assert stats["stalled"] - stats["stalled_kinds"].get("size", 0) <= 10, stats
    assert stats["stalled"] < FUZZ_FRAMES // 100, stats
    assert stats["watchdog_max_wait_s"] < 2, stats
    assert stats["watchdog_answers"] > 10, stats

    # The broker lives, and logged no traceback.
    assert broker.alive
    log = broker.log_text()
    assert "closing connection from" in log
    assert list(log_tracebacks(log)) == []

    # Real clients still produce and consume.
    served(broker)
    expected = [b"after-fuzz-%d" % i for i in range(100)]
    assert round_trip_confluent(broker.bootstrap, "after-fuzz", 100) == expected
    assert round_trip_kafka_python(broker.bootstrap, "after-fuzz-kp", 100) == expected
    assert broker.alive

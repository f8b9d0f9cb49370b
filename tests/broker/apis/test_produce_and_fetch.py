"""Produce and Fetch at the wire level (broker/apis/produce.py, fetch.py): long-poll fetch, KIP-74
limits, idempotent dedupe, bad batches' error codes, send paths."""

from __future__ import annotations

import datetime
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData

from logstore import build_batch, parse_batches
from logstore.broker import Broker, BrokerConfig
from tests.kit.brokerkit import BrokerProcess, broker_thread, free_port
from tests.kit.wire import WireClient

pytestmark = pytest.mark.integration


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def produce(client: WireClient, topic: str, batch: bytes, acks: int = 1) -> Any:
    request = ProduceRequest(
        acks=acks,
        timeout=ms(5000),
        topic_data=(
            TopicProduceData(name=topic, partition_data=(PartitionProduceData(index=0, records=batch),)),
        ),
    )
    return client.call(request).responses[0].partition_responses[0]


def fetch_request(
    topic: str,
    offset: int,
    max_wait: int,
    min_bytes: int = 1,
    partition_max: int = 1 << 20,
    max_bytes: int = 50 << 20,
) -> FetchRequest:
    return FetchRequest(
        max_wait=ms(max_wait),
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        topics=(
            FetchTopic(
                topic=topic,
                partitions=(
                    FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=partition_max),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def create_topic(client: WireClient, topic: str) -> None:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    assert client.call(request).topics[0].error_code == ErrorCode.none


def test_fetch_waits_for_data_then_returns_at_once(broker: BrokerProcess) -> None:
    with WireClient(broker.bootstrap) as consumer, WireClient(broker.bootstrap) as producer:
        create_topic(consumer, "lp")
        started = time.monotonic()
        empty = consumer.call(fetch_request("lp", 0, max_wait=400))
        waited = time.monotonic() - started
        assert 0.35 <= waited < 3, waited  # nothing came: answered after fetch.max.wait.ms
        assert empty.responses[0].partitions[0].records == b""
        correlation = consumer.send(fetch_request("lp", 0, max_wait=10_000))
        time.sleep(0.3)
        started = time.monotonic()
        assert produce(producer, "lp", build_batch([b"wake up"])).error_code == ErrorCode.none
        response = consumer.receive(FetchRequest, correlation)
        assert time.monotonic() - started < 2  # woken by the append, not by the 10 s timeout
        partition = response.responses[0].partitions[0]
        assert partition.high_watermark == 1
        assert [r.value for b in parse_batches(partition.records) for r in b.records] == [b"wake up"]


def test_fetch_limits_and_whole_first_batch(broker: BrokerProcess) -> None:
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "limits")
        big = build_batch([b"x" * 1000] * 50)  # ~50 KB, one batch
        small = build_batch([b"y"] * 3)
        for batch in (big, small, small):
            assert produce(client, "limits", batch).error_code == ErrorCode.none
        # A partition limit smaller than the first batch still returns that whole batch (KIP-74).
        response = client.call(fetch_request("limits", 10, max_wait=0, partition_max=100))
        batches = list(parse_batches(response.responses[0].partitions[0].records))
        assert [(b.base_offset, b.record_count) for b in batches] == [(0, 50)]
        # From the middle of the small batches: whole batches from the one holding the offset.
        response = client.call(fetch_request("limits", 54, max_wait=0))
        batches = list(parse_batches(response.responses[0].partitions[0].records))
        assert [b.base_offset for b in batches] == [53]
        # Out of range.
        response = client.call(fetch_request("limits", 57, max_wait=0))
        assert response.responses[0].partitions[0].error_code == ErrorCode.offset_out_of_range


def test_idempotent_duplicates_and_gaps(broker: BrokerProcess) -> None:
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "dedupe")
        first = build_batch([b"a", b"b"], producer_id=77, producer_epoch=0, base_sequence=0)
        assert produce(client, "dedupe", first).base_offset == 0
        again = produce(client, "dedupe", first)  # the retry of a batch already stored
        assert (again.error_code, again.base_offset) == (ErrorCode.none, 0)
        gap = build_batch([b"c"], producer_id=77, producer_epoch=0, base_sequence=5)
        assert produce(client, "dedupe", gap).error_code == ErrorCode.out_of_order_sequence_number
        nxt = build_batch([b"c"], producer_id=77, producer_epoch=0, base_sequence=2)
        assert produce(client, "dedupe", nxt).base_offset == 2
        bumped = build_batch([b"d"], producer_id=77, producer_epoch=1, base_sequence=0)
        assert produce(client, "dedupe", bumped).base_offset == 3
        stale = build_batch([b"e"], producer_id=77, producer_epoch=0, base_sequence=3)
        assert produce(client, "dedupe", stale).error_code == ErrorCode.invalid_producer_epoch
        records = client.call(fetch_request("dedupe", 0, max_wait=0)).responses[0].partitions[0].records
        assert [r.value for b in parse_batches(records) for r in b.records] == [b"a", b"b", b"c", b"d"]


def test_bad_batches_get_error_codes(broker_factory: Any) -> None:
    broker = broker_factory({"message.max.bytes": "10000"})
    with WireClient(broker.bootstrap) as client:
        create_topic(client, "bad")
        corrupt = bytearray(build_batch([b"payload"]))
        corrupt[-1] ^= 0xFF
        assert produce(client, "bad", bytes(corrupt)).error_code == ErrorCode.corrupt_message
        two = build_batch([b"1"]) + build_batch([b"2"])
        assert produce(client, "bad", two).error_code == ErrorCode.invalid_record
        assert produce(client, "bad", build_batch([b"z" * 20_000])).error_code == ErrorCode.message_too_large
        assert produce(client, "bad", build_batch([b"fine"])).base_offset == 0  # nothing before was stored


@pytest.fixture(params=["sendfile", "pread"])
def inprocess_broker(request: Any, tmp_path: Any) -> Iterator[str]:
    """A Broker in this process (its loop on a thread): both ways of sending segment bytes."""
    port = free_port()
    config = BrokerConfig.from_dict({"listeners": f"PLAINTEXT://127.0.0.1:{port}"})
    broker = Broker(config, data_dir=str(tmp_path / "data"))
    if request.param == "pread":
        broker.sendfile.lacking()  # as on uvloop: every fetch sends with pread
    with broker_thread(broker):
        yield f"127.0.0.1:{port}"


def test_large_fetches_byte_exact(inprocess_broker: str) -> None:
    """Reads above the copy threshold go through sendfile (or pread): bytes must match what was stored."""
    with WireClient(inprocess_broker) as client:
        create_topic(client, "exact")
        batches = [build_batch([bytes([i]) * 700] * 40) for i in range(30)]  # ~28 KB each
        for batch in batches:
            assert produce(client, "exact", batch).error_code == ErrorCode.none
        offset, seen = 0, []
        for _ in range(100):
            records = (
                client.call(fetch_request("exact", offset, max_wait=0, partition_max=100_000))
                .responses[0]
                .partitions[0]
                .records
            )
            got = list(parse_batches(records))
            if not got:
                break
            seen += got
            offset = got[-1].last_offset + 1
        assert [b.record_count for b in seen] == [40] * 30
        assert [bytes(b.records[0].value[:1]) for b in seen] == [bytes([i]) for i in range(30)]

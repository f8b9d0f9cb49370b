"""A connection pipelines requests: a waiting request does not hold the ones behind it, and the
answers leave in request order (logstore/broker/network/connection.py)."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from kio.schema.api_versions.v3.request import ApiVersionsRequest
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v8.request import PartitionProduceData, ProduceRequest, TopicProduceData

from logstore import build_batch, parse_batches
from tests.kit.brokerkit import BrokerProcess
from tests.kit.wire import WireClient

pytestmark = pytest.mark.integration


def ms(value: int) -> datetime.timedelta:
    return datetime.timedelta(milliseconds=value)


def _produce(topic: str, value: bytes) -> ProduceRequest:
    data = PartitionProduceData(index=0, records=build_batch([value]))
    return ProduceRequest(acks=1, timeout=ms(5000), topic_data=(TopicProduceData(name=topic, partition_data=(data,)),))


def _fetch(topic: str, offset: int, max_wait_ms: int) -> FetchRequest:
    partition = FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
    return FetchRequest(
        max_wait=ms(max_wait_ms),
        min_bytes=1,
        max_bytes=1 << 20,
        topics=(FetchTopic(topic=topic, partitions=(partition,)),),
        forgotten_topics_data=(),
    )


def _create(client: WireClient, topic: str) -> None:
    request = MetadataRequest(
        topics=(MetadataRequestTopic(topic_id=None, name=topic),),
        allow_auto_topic_creation=True,
        include_topic_authorized_operations=False,
    )
    assert client.call(request).topics[0].error_code == ErrorCode.none


def test_a_produce_behind_a_long_poll_on_the_same_connection_wakes_it(broker: BrokerProcess) -> None:
    """Fetch (parked, 10 s), then Produce and ApiVersions on the same socket: the produce is
    appended at once, which wakes the fetch; the three answers come in request order. A
    connection that served one request at a time would answer the fetch empty after 10 s."""
    with WireClient(broker.bootstrap, timeout=30) as client:
        _create(client, "pipe")
        started = time.monotonic()
        fetching = client.send(_fetch("pipe", 0, max_wait_ms=10_000))
        producing = client.send(_produce("pipe", b"behind the fetch"))
        asking = client.send(ApiVersionsRequest(client_software_name="t", client_software_version="1"))
        fetched = client.receive(FetchRequest, fetching)  # receive asserts the correlation id
        produced = client.receive(ProduceRequest, producing)
        versions = client.receive(ApiVersionsRequest, asking)
        elapsed = time.monotonic() - started
    partition = fetched.responses[0].partitions[0]
    values = [r.value for b in parse_batches(partition.records) for r in b.records]
    assert values == [b"behind the fetch"], (values, elapsed)
    assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    assert versions.error_code == ErrorCode.none
    assert elapsed < 8, elapsed  # woken by the append, not by the fetch's 10 s


def test_parked_fetches_wait_together_and_answer_in_order(broker: BrokerProcess) -> None:
    """Fetches of 1.5, 1.0, 0.5 and 0 s on one connection of an empty topic: they wait side by
    side (all answered ~1.5 s after the first was sent, where one at a time takes 3 s), and the
    answers come in request order (``receive`` checks each correlation id)."""
    with WireClient(broker.bootstrap, timeout=30) as client:
        _create(client, "order")
        started = time.monotonic()
        sent = [client.send(_fetch("order", 0, max_wait_ms=wait)) for wait in (1500, 1000, 500, 0)]
        answered: list[Any] = []
        for correlation in sent:
            answered.append((client.receive(FetchRequest, correlation), time.monotonic() - started))
    first, last = answered[0][1], answered[-1][1]
    assert first >= 1.45, first  # the first waited its whole 1.5 s, and none went out before it
    assert last < 2.7, last  # the others waited meanwhile
    assert all(not r.responses[0].partitions[0].records for r, _ in answered)

"""Fetch sessions (KIP-227) against a broker process: the session protocol on the wire, and
kafka-python's consumer (which opens sessions) reading every record exactly once."""

from __future__ import annotations

import datetime
import time
from typing import Any

import pytest
from kio.index import load_payload_module
from kio.schema.errors import ErrorCode
from kio.static.constants import EntityType

from tests.kit.brokerkit import BrokerProcess, create_topic
from tests.kit.wire import WireClient

pytestmark = pytest.mark.integration

FETCH = load_payload_module(1, 12, EntityType.request)


def fetch(client: WireClient, session_id: int, epoch: int, offsets: dict[int, int], forget: tuple[int, ...] = ()) -> Any:
    return client.call(
        FETCH.FetchRequest(
            replica_id=-1, max_wait=datetime.timedelta(milliseconds=10), min_bytes=0, max_bytes=1 << 20,
            isolation_level=0, session_id=session_id, session_epoch=epoch,
            topics=(FETCH.FetchTopic(topic="s", partitions=tuple(
                FETCH.FetchPartition(partition=p, fetch_offset=o, partition_max_bytes=1 << 20)
                for p, o in offsets.items()
            )),) if offsets else (),
            forgotten_topics_data=(FETCH.ForgottenTopic(topic="s", partitions=forget),) if forget else (),
        )
    )  # fmt: skip


def answered(response: Any) -> dict[int, int]:
    """partition -> high watermark, for the partitions in the response."""
    return {p.partition_index: p.high_watermark for t in response.responses for p in t.partitions}


def produce_to(broker: BrokerProcess, partition: int, count: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for _ in range(count):
        producer.produce("s", value=b"v", partition=partition)
    producer.flush(30)


def test_session_on_the_wire(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "s", 3)
    with WireClient(broker.bootstrap) as client:
        full = fetch(client, 0, 0, {0: 0, 1: 0, 2: 0})
        assert full.error_code == ErrorCode.none and full.session_id > 0
        assert answered(full) == {0: 0, 1: 0, 2: 0}
        session = full.session_id
        assert answered(fetch(client, session, 1, {})) == {}  # nothing new: an empty answer
        produce_to(broker, 1, 5)
        assert answered(fetch(client, session, 2, {})) == {1: 5}  # only what changed
        moved = fetch(client, session, 3, {1: 5}, forget=(2,))
        assert answered(moved) == {}  # partition 1 is read from 5 now (nothing there), 2 is forgotten
        produce_to(broker, 2, 1)
        assert answered(fetch(client, session, 4, {})) == {}
        assert fetch(client, session, 4, {}).error_code == ErrorCode.invalid_fetch_session_epoch
        assert fetch(client, 987654, 1, {}).error_code == ErrorCode.fetch_session_id_not_found
        closed = fetch(client, session, -1, {0: 0})
        assert closed.session_id == 0 and answered(closed) == {0: 0}
        assert fetch(client, session, 5, {}).error_code == ErrorCode.fetch_session_id_not_found


def test_kafka_python_consumer_over_sessions(broker: BrokerProcess) -> None:
    kafka = pytest.importorskip("kafka")
    create_topic(broker.bootstrap, "s", 3)
    for partition in range(3):
        produce_to(broker, partition, 2000)
    consumer = kafka.KafkaConsumer(
        bootstrap_servers=broker.bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
        max_partition_fetch_bytes=4096, fetch_max_bytes=16384,  # many fetches: most are incremental
    )  # fmt: skip
    consumer.assign([kafka.TopicPartition("s", p) for p in range(3)])
    seen: set[tuple[int, int]] = set()
    deadline = time.monotonic() + 60
    try:
        while len(seen) < 6000 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    assert (record.partition, record.offset) not in seen
                    seen.add((record.partition, record.offset))
        handlers = consumer._fetcher._session_handlers
        assert any(h.next_metadata.epoch > 1 for h in handlers.values())  # it did use a session
    finally:
        consumer.close()
    assert seen == {(p, o) for p in range(3) for o in range(2000)}

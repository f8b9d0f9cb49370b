"""Produce's per-record errors (KIP-467) with confluent-kafka against a broker process."""

from __future__ import annotations

import pytest

from tests.kit.brokerkit import BrokerProcess

confluent_kafka = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError, Producer  # noqa: E402

pytestmark = pytest.mark.integration


def test_per_record_errors_name_the_keyless_records(broker: BrokerProcess) -> None:
    """KIP-467: a compacted topic refuses a batch with keyless records and lists them; librdkafka
    fails those with INVALID_RECORD and the rest of the batch with _INVALID_DIFFERENT_RECORD."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic("compacted", 1, 1, config={"cleanup.policy": "compact"})])["compacted"].result(30)
    outcomes: list[int] = []
    # One batch of the 20 (the test is about one batch's per-record errors): the topic's metadata
    # known first, and a linger long enough that a loaded machine cannot split it.
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2000})
    producer.list_topics("compacted", timeout=10)
    for i in range(20):
        key = None if i % 10 == 0 else b"k%d" % i
        producer.produce("compacted", key=key, value=b"v", on_delivery=lambda err, msg: outcomes.append(err.code() if err else 0))
    producer.flush(30)
    assert outcomes.count(KafkaError.INVALID_RECORD) == 2
    assert outcomes.count(KafkaError._INVALID_DIFFERENT_RECORD) == 18


def test_per_record_errors_name_the_records_out_of_time(broker_factory: object) -> None:
    broker = broker_factory({"log.message.timestamp.before.max.ms": "3600000"})  # type: ignore[operator]
    import time

    outcomes: list[int] = []
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 2000})  # one batch (see above)
    producer.list_topics("stamps", timeout=10)
    now = int(time.time() * 1000)
    for i in range(10):
        stamp = now - 7_200_000 if i in (3, 7) else now  # two records two hours old
        producer.produce("stamps", value=b"v", timestamp=stamp, on_delivery=lambda err, msg: outcomes.append(err.code() if err else 0))
    producer.flush(30)
    # Both old records are named (librdkafka reports INVALID_RECORD for each of several record
    # errors, whatever the partition's INVALID_TIMESTAMP); the others fail with them.
    other = KafkaError._INVALID_DIFFERENT_RECORD
    assert outcomes == [other] * 3 + [KafkaError.INVALID_RECORD] + [other] * 3 + [KafkaError.INVALID_RECORD] + [other] * 2

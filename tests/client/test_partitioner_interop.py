"""Our partitioners place keyed records where librdkafka (confluent-kafka) does.

confluent-kafka produces to a real broker; each delivery report says which
partition librdkafka chose, and our function must name the same one. librdkafka's
murmur2 (rd_murmur2) is an implementation independent of ours, so this checks
the C hash on every key length mod 4, which Kafka's own test vectors do not.
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from logstore.client.partitioner import get_partitioner, murmur2_partition
from tests.kit.brokerkit import BrokerProcess, create_topic

pytestmark = pytest.mark.integration

DEADLINE_S = 30
PARTITIONS = 7


def distinct_keys(count: int, seed: int) -> list[bytes]:
    """Distinct keys of every length 0..40 (so every tail length of murmur2's
    4-byte words), random bytes and readable ones, the empty key once."""
    rng = random.Random(seed)
    keys = {b""}
    while len(keys) < count:
        i = len(keys)
        keys.add(rng.randbytes(1 + i % 40) if i % 2 else f"user-{i}".encode())
    ordered = sorted(keys)
    rng.shuffle(ordered)
    return ordered


def produce_and_report(
    bootstrap: str, topic: str, keys: list[bytes | None], partitioner: str
) -> list[tuple[bytes | None, int]]:
    """Produces one record per key; returns (key, partition) from every delivery report."""
    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": partitioner, "linger.ms": 5})
    reports: list[tuple[bytes | None, int]] = []
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            reports.append((msg.key(), msg.partition()))

    start = time.monotonic()
    for i, key in enumerate(keys):
        producer.produce(topic, key=key, value=b"v%d" % i, on_delivery=on_delivery)
        if i % 500 == 0:
            producer.poll(0)
    remaining = producer.flush(max(1.0, DEADLINE_S - (time.monotonic() - start)))
    assert remaining == 0, f"{remaining} of {len(keys)} records undelivered after {DEADLINE_S} s"
    assert not errors, f"{len(errors)} delivery errors, the first: {errors[0]}"
    assert not any(isinstance(r, KafkaError) for r in reports)
    assert len(reports) == len(keys)
    return reports


def test_murmur2_random_places_10000_keys_like_librdkafka(broker: BrokerProcess) -> None:
    topic = "murmur2-interop"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    keys = distinct_keys(10_000, seed=480)
    assert {len(k) % 4 for k in keys} == {0, 1, 2, 3}
    reports = produce_and_report(broker.bootstrap, topic, list(keys), "murmur2_random")

    ours = get_partitioner("murmur2_random")
    assert all(key is not None for key, _ in reports)  # librdkafka reports the keys it was given
    placed = [(key, theirs, murmur2_partition(key, PARTITIONS)) for key, theirs in reports if key is not None]
    wrong = [entry for entry in placed if entry[1] != entry[2]]
    assert not wrong, (
        f"{len(wrong)} of {len(reports)} keys placed differently, e.g. (key, librdkafka, ours): {wrong[:5]}"
    )
    assert {key for key, _ in reports} == set(keys)
    assert all(ours.partition(topic, key, PARTITIONS) == p for key, p in reports)
    # Spread over every partition, as a hash should.
    assert {p for _, p in reports} == set(range(PARTITIONS))


@pytest.mark.parametrize("name", ["murmur2", "consistent", "consistent_random"])
def test_other_partitioners_place_keys_like_librdkafka(broker: BrokerProcess, name: str) -> None:
    """Keyed records for the CRC-32 ones; and where librdkafka puts a record
    deterministically without a key (murmur2: NULL -> murmur2(""); consistent:
    NULL and "" -> 0), there too."""
    topic = f"{name}-interop"
    create_topic(broker.bootstrap, topic, PARTITIONS)
    keys: list[bytes | None] = list(distinct_keys(2000, seed=len(name)))
    if name == "consistent_random":
        keys.remove(b"")  # an empty key is sticky (random) there
    else:
        keys += [None] * 20
    reports = produce_and_report(broker.bootstrap, topic, keys, name)

    ours = get_partitioner(name)
    wrong = [
        (key, p, ours.partition(topic, key, PARTITIONS))
        for key, p in reports
        if ours.partition(topic, key, PARTITIONS) != p
    ]
    assert not wrong, (
        f"{name}: {len(wrong)} of {len(reports)} placed differently, e.g. (key, librdkafka, ours): {wrong[:5]}"
    )

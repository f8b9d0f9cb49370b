"""confluent-kafka 2.16's ShareConsumer (librdkafka's KIP-932 client) against a broker process:
competing consumers, explicit accept/release/reject, locks that end when a consumer dies, and the
delivery limit archiving a poison record."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType

from tests.kit.brokerkit import BrokerProcess, create_topic, produce_numbered
from tests.kit.sharekit import LOCK_MS, join_all, poll_until, share_consumer

pytestmark = pytest.mark.integration

SHORT_LOCKS = {"group.share.record.lock.duration.ms": str(LOCK_MS)}


def test_two_consumers_compete_on_one_partition_each_record_once(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "jobs", 1)
    consumers = [share_consumer(broker.bootstrap, "workers", "jobs", max_poll_records=10) for _ in range(2)]
    try:
        join_all(broker.bootstrap, "workers", consumers)
        produce_numbered(broker.bootstrap, "jobs", 1, 300)
        seen: dict[int, list[tuple[int, int]]] = {0: [], 1: []}  # consumer -> (offset, delivery count)
        poll_until(
            consumers, lambda: sum(len(v) for v in seen.values()) >= 300,
            lambda i, m: seen[i].append((m.offset(), m.delivery_count())), 60, "300 records",
        )  # fmt: skip
    finally:
        for consumer in consumers:
            consumer.close()
    offsets = Counter(offset for got in seen.values() for offset, _ in got)
    assert sorted(offsets) == list(range(300)) and set(offsets.values()) == {1}, "a record went to both, or none"
    assert seen[0] and seen[1], f"one consumer got everything: {len(seen[0])} / {len(seen[1])}"
    assert {count for got in seen.values() for _, count in got} == {1}


def test_explicit_accept_release_reject(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "jobs", 1)
    consumer = share_consumer(broker.bootstrap, "explicit", "jobs", share_acknowledgement_mode="explicit")
    try:
        join_all(broker.bootstrap, "explicit", [consumer])
        produce_numbered(broker.bootstrap, "jobs", 1, 6)
        policy = {b"3": AcknowledgeType.RELEASE, b"4": AcknowledgeType.REJECT}
        deliveries: list[tuple[bytes, int]] = []

        def handle(_: int, message: Any) -> None:
            deliveries.append((message.value(), message.delivery_count()))
            kind = policy.get(message.value(), AcknowledgeType.ACCEPT)
            if message.delivery_count() > 1:
                kind = AcknowledgeType.ACCEPT  # the released record, back: done now
            consumer.acknowledge(message, kind)

        def settled() -> bool:
            if len(deliveries) < 7:
                return False
            assert all(error is None for error in consumer.commit_sync(10).values())
            return True

        poll_until([consumer], settled, handle, 30, "6 records and the released one again")
        end = time.monotonic() + 2 * LOCK_MS / 1000  # nothing else comes back
        while time.monotonic() < end:
            for message in consumer.poll(0.3):
                deliveries.append((message.value(), message.delivery_count()))
                consumer.acknowledge(message)
    finally:
        consumer.close()
    assert sorted(deliveries) == sorted([(b"%d" % n, 1) for n in range(6)] + [(b"3", 2)]), deliveries


def _holder_script(bootstrap: str) -> str:
    return textwrap.dedent(f"""
        import sys, time
        from confluent_kafka import ShareConsumer
        c = ShareConsumer({{"bootstrap.servers": "{bootstrap}", "group.id": "crashy",
                            "share.acknowledgement.mode": "explicit"}})
        c.subscribe(["jobs"])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            got = [m.offset() for m in c.poll(0.5) if m.error() is None]
            if got:
                print(" ".join(map(str, got)), flush=True)
                time.sleep(600)
    """)


@pytest.mark.parametrize("ending", ["killed", "closed"])
def test_records_of_a_consumer_that_dies_come_back_with_delivery_count_2(
    broker_factory: Any, ending: str
) -> None:
    broker = broker_factory(SHORT_LOCKS)
    create_topic(broker.bootstrap, "jobs", 1)
    # The share-partition starts at the log's end when first assigned; then the group is left empty,
    # so that only the doomed consumer fetches (librdkafka fetches ahead of poll()).
    first = share_consumer(broker.bootstrap, "crashy", "jobs")
    join_all(broker.bootstrap, "crashy", [first])
    first.close()
    produce_numbered(broker.bootstrap, "jobs", 1, 5)
    if ending == "killed":
        child = subprocess.Popen([sys.executable, "-c", _holder_script(broker.bootstrap)],
                                 stdout=subprocess.PIPE, text=True)  # fmt: skip
        try:
            assert child.stdout is not None
            held = [int(o) for o in child.stdout.readline().split()]  # bounded: the child gives up after 30 s
            assert held, "the doomed consumer got no records"
            os.kill(child.pid, signal.SIGKILL)
        finally:
            child.kill()
            child.wait(10)
    else:
        doomed = share_consumer(broker.bootstrap, "crashy", "jobs", share_acknowledgement_mode="explicit")
        held = []
        poll_until([doomed], lambda: bool(held), lambda _, m: held.append(m.offset()), 30, "records to hold")
        doomed.close()  # unacknowledged: released (a share session's end releases what it holds)
    survivor = share_consumer(broker.bootstrap, "crashy", "jobs", share_acknowledgement_mode="explicit")
    back: dict[int, int] = {}
    try:

        def handle(_: int, message: Any) -> None:
            back[message.offset()] = message.delivery_count()
            survivor.acknowledge(message)

        poll_until([survivor], lambda: set(range(5)) <= set(back), handle, 30, f"records {held} redelivered")
        survivor.commit_sync(10)
    finally:
        survivor.close()
    assert all(back[offset] == 2 for offset in held), (held, back)
    assert all(count == 1 for offset, count in back.items() if offset not in held), back


def test_the_delivery_limit_archives_a_poison_record(broker_factory: Any) -> None:
    broker = broker_factory({**SHORT_LOCKS, "group.share.delivery.count.limit": "3"})
    create_topic(broker.bootstrap, "jobs", 1)
    consumer = share_consumer(broker.bootstrap, "poisoned", "jobs", share_acknowledgement_mode="explicit")
    try:
        join_all(broker.bootstrap, "poisoned", [consumer])
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": broker.bootstrap})
        for value in (b"ok-0", b"poison", b"ok-1"):
            producer.produce("jobs", value=value, partition=0)
        assert producer.flush(30) == 0
        deliveries: list[tuple[bytes, int]] = []

        def handle(_: int, message: Any) -> None:
            deliveries.append((message.value(), message.delivery_count()))
            poison = message.value() == b"poison"
            consumer.acknowledge(message, AcknowledgeType.RELEASE if poison else AcknowledgeType.ACCEPT)

        def poisoned_thrice() -> bool:
            consumer.commit_sync(10)
            return sum(1 for value, _ in deliveries if value == b"poison") >= 3

        poll_until([consumer], poisoned_thrice, handle, 30, "the poison record's 3 deliveries")
        end = time.monotonic() + 2 * LOCK_MS / 1000
        while time.monotonic() < end:  # archived: never again
            for message in consumer.poll(0.3):
                handle(0, message)
            consumer.commit_sync(10)
        producer.produce("jobs", value=b"ok-2", partition=0)
        assert producer.flush(30) == 0
        poll_until([consumer], lambda: (b"ok-2", 1) in deliveries, handle, 30, "a record after the poison one")
        consumer.commit_sync(10)
    finally:
        consumer.close()
    assert [count for value, count in deliveries if value == b"poison"] == [1, 2, 3]
    assert sorted(d for d in deliveries if d[0] != b"poison") == [(b"ok-0", 1), (b"ok-1", 1), (b"ok-2", 1)]


def test_a_broker_restart_keeps_the_share_state(broker_factory: Any) -> None:
    """Killed (-9) in the middle: what was accepted stays done, what was acquired and not yet
    acknowledged comes back with its delivery counted, what was released is delivered again."""
    broker = broker_factory()
    create_topic(broker.bootstrap, "jobs", 1)
    settled = share_consumer(broker.bootstrap, "durable", "jobs", share_acknowledgement_mode="explicit")
    try:
        join_all(broker.bootstrap, "durable", [settled])
        produce_numbered(broker.bootstrap, "jobs", 1, 5)
        seen: list[int] = []

        def handle(_: int, message: Any) -> None:
            seen.append(message.offset())
            kind = AcknowledgeType.ACCEPT if message.offset() < 4 else AcknowledgeType.RELEASE
            settled.acknowledge(message, kind)

        def committed() -> bool:
            if not set(range(5)) <= set(seen):
                return False
            results = settled.commit_sync(10)
            assert all(error is None for error in results.values()), results
            return True

        poll_until([settled], committed, handle, 30, "0-3 accepted, 4 released")
    finally:
        settled.close()
    produce_numbered(broker.bootstrap, "jobs", 1, 5, start=5)
    holder = share_consumer(broker.bootstrap, "durable", "jobs", socket_timeout_ms=5000)
    held: list[int] = []
    try:  # implicit mode: what one poll returns stays acquired, unacknowledged, until the next poll
        poll_until([holder], lambda: bool(held), lambda _, m: held.append(m.offset()), 30, "records to hold")
    finally:
        broker.kill()
        holder.close()
    assert held and set(held) <= set(range(4, 10)), held
    broker.start()
    again = share_consumer(broker.bootstrap, "durable", "jobs")
    back: dict[int, int] = {}
    try:
        poll_until([again], lambda: len(back) >= 6, lambda _, m: back.setdefault(m.offset(), m.delivery_count()),
                   30, "the records not done before the restart")  # fmt: skip
        end = time.monotonic() + 1.5  # and nothing else
        while time.monotonic() < end:
            for message in again.poll(0.3):
                back.setdefault(message.offset(), message.delivery_count())
    finally:
        again.close()
    assert sorted(back) == list(range(4, 10)), back  # 0-3 stayed accepted
    assert all(back[offset] >= 2 for offset in held), (held, back)  # each delivery before the kill counted
    assert back[4] >= 2, back

"""Replication across broker processes (a real ZooKeeper, confluent-kafka as the client).

Partitions with three replicas: followers fetch from leaders and hold
byte-identical logs; acks=all waits for the ISR; a leader killed with -9
hands over to a follower of its ISR with nothing acknowledged lost; a paused
follower leaves the ISR and comes back once caught up; too few in-sync
replicas fail acks=all with NOT_ENOUGH_REPLICAS.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable

import pytest

from tests.kit.brokerkit import wait_until
from tests.kit.clusterkit import (
    BrokerProcess,
    broker_id,
    consume_all,
    create_topic,
    isrs,
    leaders,
    metadata,
    produce_acked,
    segment_bytes,
    three_brokers,
)

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def test_followers_copy_the_leaders_log_byte_for_byte(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster)
    create_topic(brokers[1].bootstrap, "rep", 3, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[2].bootstrap, "rep").values()), "ISR of three")
    found = metadata(brokers[3].bootstrap, "rep").topics["rep"].partitions
    assert {p: sorted(found[p].replicas) for p in found} == {0: [1, 2, 3], 1: [1, 2, 3], 2: [1, 2, 3]}
    assert sorted(found[p].leader for p in found) == [1, 2, 3]  # leaders spread
    values = [b"r%05d" % i for i in range(3000)]
    acked, errors = produce_acked(brokers[1].bootstrap, "rep", values)
    assert errors == [] and sorted(acked) == values
    seen = consume_all(brokers[2].bootstrap, "rep", len(values))
    assert sorted(v for _, _, v in seen) == values
    for p in range(3):  # offsets dense from 0 in each partition
        offsets = sorted(o for q, o, _ in seen if q == p)
        assert offsets == list(range(len(offsets)))
    for broker in brokers.values():
        assert broker.stop() == 0
    total = 0
    for p in range(3):
        copies = {broker_id(b): segment_bytes(b, "rep", p) for b in brokers.values()}
        assert len(set(copies.values())) == 1, {b: len(c) for b, c in copies.items()}
        total += len(copies[1])  # (the sticky partitioner may leave a partition empty)
        for b in brokers.values() if copies[1] else ():  # a follower keeps epochs of batches it has
            with open(os.path.join(b.data_dir, f"rep-{p}", "leader-epoch-checkpoint")) as f:
                lines = f.read().splitlines()  # epoch 0 from offset 0; stopping moved leaders on
            assert lines[0] == "0" and int(lines[1]) == len(lines) - 2 >= 1 and lines[2] == "0 0"
    assert total > 3000 * 10  # every record, in the leaders' batches


def test_a_killed_leader_hands_over_with_nothing_acknowledged_lost(
    cluster: Callable[..., BrokerProcess],
) -> None:
    brokers = three_brokers(cluster)
    create_topic(brokers[1].bootstrap, "fail", 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: len(isrs(brokers[1].bootstrap, "fail")[0]) == 3, "ISR of three")
    first, errors = produce_acked(brokers[1].bootstrap, "fail", [b"a%04d" % i for i in range(1000)])
    assert errors == [] and len(first) == 1000
    old = leaders(brokers[1].bootstrap, "fail")[0]
    brokers[old].kill()
    alive = [b for i, b in brokers.items() if i != old]
    killed_at = time.monotonic()
    wait_until(lambda: leaders(alive[0].bootstrap, "fail")[0] not in (-1, old), "a new leader", timeout=30)
    second, errors = produce_acked(alive[0].bootstrap, "fail", [b"b%04d" % i for i in range(1000)])
    took = time.monotonic() - killed_at
    assert errors == [] and len(second) == 1000
    assert took < 6 + 1 + 10, took  # session timeout + 1 s (+ the produce itself)
    seen = consume_all(alive[1].bootstrap, "fail", 2000)
    values = [v for _, _, v in seen]
    assert sorted(values) == sorted(first + second) and len(set(values)) == len(values)
    assert [o for _, o, _ in sorted(seen)] == list(range(2000))
    brokers[old].restart()  # it truncates to the new leader's log, catches up and rejoins the ISR
    wait_until(lambda: len(isrs(alive[0].bootstrap, "fail")[0]) == 3, "back in the ISR", timeout=30)
    for broker in brokers.values():
        assert broker.stop() == 0
    assert len({segment_bytes(b, "fail", 0) for b in brokers.values()}) == 1


def test_a_paused_follower_leaves_the_isr_and_returns(cluster: Callable[..., BrokerProcess]) -> None:
    brokers = three_brokers(cluster, **{"replica.lag.time.max.ms": "1500"})
    create_topic(brokers[1].bootstrap, "lag", 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: len(isrs(brokers[1].bootstrap, "lag")[0]) == 3, "ISR of three")
    leader = leaders(brokers[1].bootstrap, "lag")[0]
    controller = metadata(brokers[1].bootstrap).controller_id  # (AlterPartition goes to it: keep it awake)
    follower = next(i for i in brokers if i not in (leader, controller))
    other = next(i for i in brokers if i not in (leader, follower))
    assert brokers[follower].proc is not None
    brokers[follower].proc.send_signal(signal.SIGSTOP)  # below the 6 s session: still registered
    try:
        wait_until(lambda: isrs(brokers[other].bootstrap, "lag")[0] == sorted([leader, other]), "ISR shrunk",
                   timeout=5)  # fmt: skip
        acked, errors = produce_acked(
            brokers[leader].bootstrap, "lag", [b"x%03d" % i for i in range(200)], timeout=10
        )
        assert errors == [] and len(acked) == 200  # two in sync meet min.insync.replicas=2
    finally:
        brokers[follower].proc.send_signal(signal.SIGCONT)
    wait_until(lambda: len(isrs(brokers[other].bootstrap, "lag")[0]) == 3, "ISR back to three", timeout=20)


def test_acks_all_fails_with_too_few_in_sync_replicas(cluster: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka import KafkaError, Producer

    brokers = {i: cluster(i) for i in (1, 2)}
    wait_until(lambda: len(metadata(brokers[1].bootstrap).brokers) == 2, "two brokers")
    create_topic(brokers[1].bootstrap, "few", 1, 2, **{"min.insync.replicas": "2"})
    wait_until(lambda: len(isrs(brokers[1].bootstrap, "few")[0]) == 2, "ISR of two")
    leader = leaders(brokers[1].bootstrap, "few")[0]
    brokers[3 - leader].kill()
    wait_until(lambda: isrs(brokers[leader].bootstrap, "few")[0] == [leader], "ISR of one", timeout=30)
    errors: list[int] = []
    producer = Producer({"bootstrap.servers": brokers[leader].bootstrap, "acks": "all",
                         "enable.idempotence": False, "retries": 0, "message.timeout.ms": 5000})  # fmt: skip
    producer.produce("few", b"v", on_delivery=lambda err, msg: errors.append(err.code() if err else 0))
    producer.flush(10)
    assert errors == [KafkaError.NOT_ENOUGH_REPLICAS]


def test_bad_replication_settings_are_refused(cluster: Callable[..., BrokerProcess]) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    brokers = {i: cluster(i) for i in (1, 2)}
    wait_until(lambda: len(metadata(brokers[1].bootstrap).brokers) == 2, "two brokers")
    admin = AdminClient({"bootstrap.servers": brokers[1].bootstrap})
    futures = admin.create_topics([
        NewTopic("too-many", 1, 3),
        NewTopic("too-strict", 1, 2, config={"min.insync.replicas": "3"}),
    ])  # fmt: skip
    with pytest.raises(Exception, match="INVALID_REPLICATION_FACTOR"):
        futures["too-many"].result(10)
    with pytest.raises(Exception, match=r"min\.insync\.replicas=3 is above the replication factor 2"):
        futures["too-strict"].result(10)


def test_a_zombie_leader_is_fenced_and_rejoins(cluster: Callable[..., BrokerProcess]) -> None:
    """A leader paused past its 6 s ZooKeeper session: the others elect a new leader and go on; the
    zombie, woken, registers again, follows, truncates what it alone had, and rejoins the ISR."""
    brokers = three_brokers(cluster)
    create_topic(brokers[1].bootstrap, "zombie", 1, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: len(isrs(brokers[1].bootstrap, "zombie")[0]) == 3, "ISR of three")
    first, errors = produce_acked(brokers[1].bootstrap, "zombie", [b"a%03d" % i for i in range(500)])
    assert errors == [] and len(first) == 500
    old = leaders(brokers[1].bootstrap, "zombie")[0]
    others = [b for i, b in brokers.items() if i != old]
    assert brokers[old].proc is not None
    brokers[old].proc.send_signal(signal.SIGSTOP)
    try:
        wait_until(
            lambda: leaders(others[0].bootstrap, "zombie")[0] not in (-1, old), "a new leader", timeout=30
        )
        second, errors = produce_acked(
            others[0].bootstrap, "zombie", [b"b%03d" % i for i in range(500)], timeout=30
        )
        assert errors == [] and len(second) == 500
    finally:
        brokers[old].proc.send_signal(signal.SIGCONT)
    wait_until(
        lambda: len(metadata(others[1].bootstrap).brokers) == 3, "the zombie registered again", timeout=30
    )
    wait_until(
        lambda: len(isrs(others[1].bootstrap, "zombie")[0]) == 3, "the zombie back in the ISR", timeout=30
    )
    seen = consume_all(others[1].bootstrap, "zombie", 1000)
    values = [v for _, _, v in seen]
    assert sorted(values) == sorted(first + second) and len(set(values)) == 1000
    for broker in brokers.values():
        assert broker.stop() == 0
    assert len({segment_bytes(b, "zombie", 0) for b in brokers.values()}) == 1


def test_sigterm_moves_leaderships_before_the_broker_goes(cluster: Callable[..., BrokerProcess]) -> None:
    """Kafka's controlled shutdown: the stopping broker's leaderships move to in-sync followers
    while it still serves, so producers see no gap of a session timeout."""
    brokers = three_brokers(cluster)
    create_topic(brokers[1].bootstrap, "calm", 3, 3, **{"min.insync.replicas": "2"})
    wait_until(lambda: all(len(v) == 3 for v in isrs(brokers[1].bootstrap, "calm").values()), "ISRs of three")
    led = [p for p, leader in leaders(brokers[1].bootstrap, "calm").items() if leader == 2]
    assert led  # leaders spread: broker 2 leads one
    started = time.monotonic()
    assert brokers[2].stop() == 0
    assert time.monotonic() - started < 6  # well inside the 6 s session: nothing waited for it
    assert "controlled shutdown: leaderships moved" in brokers[2].log_text()
    after = leaders(brokers[1].bootstrap, "calm")
    assert all(after[p] in (1, 3) for p in led), after
    acked, errors = produce_acked(
        brokers[3].bootstrap, "calm", [b"c%03d" % i for i in range(300)], timeout=20
    )
    assert errors == [] and len(acked) == 300

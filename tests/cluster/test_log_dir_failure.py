"""A broker's log dir fails for real in a 3-broker cluster: fsync and fdatasync answer EIO (libfiu),
or one of its several directories sits on a disk that dies (tests/kit/faulty_disk.py).

The broker treats the dir as failed (PostgreSQL's fsyncgate: after a failed
fsync the page cache may have dropped the data), reports it, and the
controller moves leadership and ISR membership off its replicas while the
broker keeps running; an idempotent acks=all producer goes on being
acknowledged by the other two (min.insync.replicas=2); nothing acknowledged
is lost or written twice. Restarted without the fault, the broker tries the
dir again and its replicas rejoin every ISR.
"""

from __future__ import annotations

import errno
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Message, Producer

from tests.kit import fiu
from tests.kit.brokerkit import BrokerProcess, wait_until
from tests.kit.clusterkit import consume_all, create_topic, isrs, leaders, metadata, produce_acked
from tests.kit.faulty_disk import faulty_disk

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def _offline_replicas(bootstrap: str, topic: str) -> dict[int, list[int]]:
    """partition -> its offline replicas, as Metadata v5+ gives them (kafka-python's raw answer)."""
    from kafka.admin import KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=10_000)
    try:
        (found,) = admin.describe_topics([topic])
    finally:
        admin.close()
    return {p["partition_index"]: sorted(p["offline_replicas"]) for p in found["partitions"] if p["offline_replicas"]}

TOPIC = "synced"
PARTITIONS = 3


def test_a_failed_fsync_takes_the_dir_offline_and_leadership_moves(cluster: Callable[..., BrokerProcess]) -> None:
    reason = fiu.unavailable()
    if reason:
        pytest.skip(reason)
    brokers = {i: cluster(i, wrapper=fiu.WRAPPER) for i in (1, 2, 3)}
    wait_until(lambda: all(len(metadata(b.bootstrap).brokers) == 3 for b in brokers.values()), "three brokers")
    bootstrap = ",".join(b.bootstrap for b in brokers.values())
    create_topic(bootstrap, TOPIC, PARTITIONS, 3, **{"min.insync.replicas": "2", "flush.messages": "1"})
    victim = leaders(bootstrap, TOPIC)[0]
    led = {p for p, b in leaders(bootstrap, TOPIC).items() if b == victim}

    acked: dict[bytes, tuple[int, int]] = {}
    failures: dict[str, int] = {}
    acked_at: list[float] = []

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked[msg.value() or b""] = (msg.partition() or 0, msg.offset() or 0)
            acked_at.append(time.monotonic())
        else:
            failures[err.name()] = failures.get(err.name(), 0) + 1

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True,
                         "linger.ms": 2, "delivery.timeout.ms": 30000, "on_delivery": report})  # fmt: skip
    stop = threading.Event()

    def load() -> None:
        n = 0
        while not stop.is_set() and n < 200_000:
            producer.produce(TOPIC, value=b"%d" % n, partition=n % PARTITIONS)
            producer.poll(0)
            n += 1
            time.sleep(0.002)

    loader = threading.Thread(target=load, daemon=True)
    loader.start()
    try:
        wait_until(lambda: len(acked) > 300, "acknowledgements before the fault", timeout=30)
        injector = fiu.Fiu(brokers[victim].proc.pid if brokers[victim].proc else 0)
        faulted = time.monotonic()
        injector.enable("posix/io/sync/fdatasync", errno.EIO)
        injector.enable("posix/io/sync/fsync", errno.EIO)
        others = [b for i, b in brokers.items() if i != victim]
        wait_until(
            lambda: all(victim not in isr for isr in isrs(others[0].bootstrap, TOPIC).values())
            and all(leader != victim for leader in leaders(others[0].bootstrap, TOPIC).values()),
            f"leadership and ISR off broker {victim}",
            timeout=30,
        )
        moved_after = time.monotonic() - faulted
        count = len(acked)
        wait_until(lambda: len(acked) > count + 300, "acknowledgements after the move", timeout=30)
        assert brokers[victim].alive, brokers[victim].log_text()[-3000:]
        assert "offline" in brokers[victim].log_text(), brokers[victim].log_text()[-3000:]
        # Its ZooKeeper worker keeps up: a replica in the failed dir is not made anew elsewhere.
        assert "the next change retries" not in brokers[victim].log_text(), brokers[victim].log_text()[-3000:]
    finally:
        stop.set()
        loader.join(10)
        producer.flush(40)
    # The broker restarts without the fault: it tries the dir again and catches up.
    assert brokers[victim].stop() == 0, brokers[victim].log_text()[-3000:]
    brokers[victim].wrapper = ()
    brokers[victim].start()
    wait_until(lambda: all(victim in isr for isr in isrs(bootstrap, TOPIC).values()), "the replicas back in sync",
               timeout=60)  # fmt: skip
    found = consume_all(bootstrap, TOPIC, len(acked))
    where: dict[bytes, list[tuple[int, int]]] = {}
    for partition, offset, value in found:
        where.setdefault(value, []).append((partition, offset))
    lost = [v for v in acked if v not in where]
    moved = [v for v, at in acked.items() if v in where and where[v] != [at]]
    twice = [v for v, at in where.items() if len(at) > 1]
    assert not lost and not moved and not twice, (lost[:5], moved[:5], twice[:5], failures)
    assert led and moved_after < 30, (led, moved_after)


def test_one_failed_dir_of_several_moves_only_its_partitions(
    cluster: Callable[..., BrokerProcess], zk_connect: str, tmp_path: Path
) -> None:
    """Broker 1 keeps its logs in two directories, one on a disk that dies for real (an ext4 over
    a tmpfs that fills): the controller moves leadership and ISR membership off the replicas in
    that directory only; broker 1 goes on leading and following from the other."""
    good = tmp_path / "good"
    with faulty_disk(tmp_path) as disk:
        settings = {"zookeeper.connect": zk_connect, "broker.id": "1", "zookeeper.session.timeout.ms": "6000"}
        first = BrokerProcess(f"{good},{disk.mount}", settings, log_dir=str(tmp_path)).start()
        try:
            brokers = {1: first, 2: cluster(2), 3: cluster(3)}
            wait_until(lambda: all(len(metadata(b.bootstrap).brokers) == 3 for b in brokers.values()),
                       "three brokers")  # fmt: skip
            bootstrap = ",".join(b.bootstrap for b in brokers.values())
            create_topic(bootstrap, "jbod", 6, 3, **{"min.insync.replicas": "2", "flush.messages": "1"})
            doomed = {int(name.rsplit("-", 1)[1]) for name in os.listdir(disk.mount) if name.startswith("jbod-")}
            kept = set(range(6)) - doomed
            assert doomed and kept, (doomed, kept)
            values = [b"%d" % n + b"." * 4000 for n in range(600)]  # new blocks: the writeback fails
            disk.break_disk()
            acked, errors = produce_acked(bootstrap, "jbod", values)
            wait_until(
                lambda: all(1 not in isrs(bootstrap, "jbod")[p] and leaders(bootstrap, "jbod")[p] != 1 for p in doomed),
                "broker 1 off the partitions of its failed directory", timeout=30,
            )  # fmt: skip
            assert all(1 in isrs(bootstrap, "jbod")[p] for p in kept), isrs(bootstrap, "jbod")
            # Metadata names broker 1's replicas in the failed directory offline (kafka-python shows them).
            wait_until(lambda: _offline_replicas(bootstrap, "jbod") == {p: [1] for p in doomed},
                       "offline_replicas in Metadata", timeout=15)  # fmt: skip
            assert first.alive and "offline" in first.log_text()
            found = consume_all(bootstrap, "jbod", len(acked))
            got = [value for _, _, value in found]
            assert sorted(got) == sorted(acked) and len(set(got)) == len(got), (len(got), len(acked), errors[:3])
            assert len(acked) == len(values), errors[:3]  # acks=all went on through the other replicas
        finally:
            if first.alive:
                first.kill()

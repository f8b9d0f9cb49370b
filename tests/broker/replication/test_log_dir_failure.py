"""A broker with two log directories, one on a disk that fails for real (tests/kit/faulty_disk.py):
the failed directory goes offline alone. Its partitions answer KAFKA_STORAGE_ERROR and acknowledge
nothing more, the other directory keeps serving, DescribeLogDirs (kafka-python's admin) and the
``logstore_log_dir_offline`` metric say so, SIGTERM exits 0, and a restart on the repaired disk
serves every acknowledged record of both directories."""

from __future__ import annotations

import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from kafka.admin import KafkaAdminClient

from tests.kit.brokerkit import BrokerProcess, cli, create_topic, free_port
from tests.kit.faulty_disk import faulty_disk

pytestmark = [pytest.mark.slow, pytest.mark.integration]

PARTITIONS = 4
KAFKA_STORAGE_ERROR = 56


def _produce(bootstrap: str, rounds: int, tag: bytes, size: int) -> tuple[dict[int, list[bytes]], set[str]]:
    """``rounds`` values to each partition (acks=all); the acknowledged ones by partition, and the errors."""
    acked: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    errors: set[str] = set()

    def report(err: KafkaError | None, msg: object) -> None:
        if err is None:
            acked[msg.partition()].append(msg.value()[:16])  # type: ignore[attr-defined]
        else:
            errors.add(err.name())

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "message.timeout.ms": 4000,
                         "max.in.flight": 1, "on_delivery": report})  # fmt: skip
    for i in range(rounds):
        for p in range(PARTITIONS):
            producer.produce("jb", b"%s-%02d-%04d" % (tag, p, i) + b"." * size, partition=p)
        producer.poll(0)
    assert producer.flush(30) == 0
    return acked, errors


def _read(bootstrap: str, partitions: list[int]) -> dict[int, list[bytes]]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    consumer.assign([TopicPartition("jb", p, 0) for p in partitions])
    got: dict[int, list[bytes]] = {p: [] for p in partitions}
    deadline = time.monotonic() + 30
    quiet = 0
    while time.monotonic() < deadline and quiet < 3:
        batch = consumer.consume(1000, 1.0)
        quiet = 0 if batch else quiet + 1
        for message in batch:
            assert message.error() is None, message.error()
            got[message.partition()].append(message.value()[:16])
    consumer.close()
    return got


def _dirs(bootstrap: str) -> dict[str, tuple[int, set[int]]]:
    """DescribeLogDirs through kafka-python: log dir -> (error code, partitions of jb)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=10_000)
    try:
        (answer,) = admin.describe_log_dirs()
    finally:
        admin.close()
    return {
        entry["log_dir"]: (
            entry["error_code"],
            {p["partition_index"] for t in entry["topics"] if t["name"] == "jb" for p in t["partitions"]},
        )
        for entry in answer["log_dirs"]
    }


def test_a_failed_log_dir_goes_offline_alone_and_comes_back_on_restart(tmp_path: Path) -> None:
    good = tmp_path / "good"
    with faulty_disk(tmp_path) as disk:
        metrics_port = free_port()
        broker = BrokerProcess(
            f"{good},{disk.mount}",
            {"log.flush.interval.messages": "1", "metrics.listener": f"http://127.0.0.1:{metrics_port}"},
            log_dir=str(tmp_path),
        ).start()
        try:
            create_topic(broker.bootstrap, "jb", PARTITIONS)
            placed = _dirs(broker.bootstrap)
            assert set(placed) == {str(good), str(disk.mount)} and all(e == 0 for e, _ in placed.values())
            on_disk = sorted(placed[str(disk.mount)][1])
            elsewhere = sorted(placed[str(good)][1])
            assert on_disk and elsewhere and sorted(on_disk + elsewhere) == list(range(PARTITIONS))

            before, errors = _produce(broker.bootstrap, 20, b"before", 100)
            assert not errors and all(len(v) == 20 for v in before.values())
            disk.break_disk()
            after, errors = _produce(broker.bootstrap, 40, b"after", 16 << 10)  # new blocks: writeback fails
            assert errors, "nothing failed on the broken disk"
            assert all(len(after[p]) == 40 for p in elsewhere)  # the other directory keeps serving

            # Metadata: the failed directory's partitions have no leader (offline), the others lead here.
            shown = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("jb", timeout=10).topics["jb"]
            assert {p: shown.partitions[p].leader for p in on_disk} == dict.fromkeys(on_disk, -1)
            assert all(shown.partitions[p].leader == 0 for p in elsewhere)
            assert all(shown.partitions[p].error is not None for p in on_disk)
            described = _dirs(broker.bootstrap)
            assert described[str(disk.mount)] == (KAFKA_STORAGE_ERROR, set())
            assert described[str(good)] == (0, set(elsewhere))
            with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as page:
                text = page.read().decode()
            assert f'logstore_log_dir_offline{{dir="{disk.mount}"}} 1.0' in text
            assert f'logstore_log_dir_offline{{dir="{good}"}} 0.0' in text
            shown = cli("log-dirs", "--bootstrap-server", broker.bootstrap)
            assert shown.returncode == 0 and "KAFKA_STORAGE_ERROR" in shown.stdout, shown.stdout + shown.stderr
            # Nothing more is acknowledged on the failed directory once it failed.
            late, errors = _produce(broker.bootstrap, 3, b"late", 10)
            assert all(late[p] == [] for p in on_disk) and all(len(late[p]) == 3 for p in elsewhere)
            assert _read(broker.bootstrap, elsewhere) == {p: before[p] + after[p] + late[p] for p in elsewhere}
            assert broker.alive and "log directory" in broker.log_text() and "failed" in broker.log_text()
            assert broker.stop() == 0
        finally:
            if broker.alive:
                broker.kill()
        (disk.backing / "filler").unlink()
        subprocess.run(["umount", str(disk.mount)], check=True, timeout=60)
        subprocess.run(["e2fsck", "-f", "-y", str(disk.backing / "disk.img")], capture_output=True, timeout=120)
        subprocess.run(["mount", "-o", "loop", str(disk.backing / "disk.img"), str(disk.mount)], check=True,
                       timeout=60)  # fmt: skip
        again = BrokerProcess(f"{good},{disk.mount}", port=broker.port, log_dir=str(tmp_path)).start()
        try:
            assert all(e == 0 for e, _ in _dirs(again.bootstrap).values())
            got = _read(again.bootstrap, list(range(PARTITIONS)))
            for p in range(PARTITIONS):
                acked = before[p] + after[p] + late[p]
                assert got[p][: len(acked)] == acked  # every acknowledged record, in order, once
                assert len(set(got[p])) == len(got[p])
            assert again.stop() == 0
        finally:
            if again.alive:
                again.kill()

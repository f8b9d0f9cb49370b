"""``logstore log-dirs`` against a broker process: each directory's size, free space and partitions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer

from tests.kit.brokerkit import BrokerProcess, cli, create_topic

pytestmark = pytest.mark.integration


def test_log_dirs_shows_the_directory_its_free_space_and_partitions(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "sized", 2)
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for i in range(200):
        producer.produce("sized", b"x" * 1000, partition=i % 2)
    assert producer.flush(15) == 0

    described = cli("log-dirs", "--bootstrap-server", broker.bootstrap, "--topic-list", "sized", "--json")
    assert described.returncode == 0, described.stderr
    (one,) = json.loads(described.stdout)["brokers"]
    (entry,) = one["logDirs"]
    assert os.path.realpath(entry["logDir"]) == os.path.realpath(broker.data_dir)
    stat = os.statvfs(broker.data_dir)
    assert entry["totalBytes"] == stat.f_blocks * stat.f_frsize
    assert 0 < entry["usableBytes"] <= entry["totalBytes"] and entry["error"] is None
    sizes = {p["partition"]: p["size"] for p in entry["partitions"]}
    assert set(sizes) == {"sized-0", "sized-1"} and all(size > 100 * 1000 for size in sizes.values())

    shown = cli("log-dirs", "--bootstrap-server", broker.bootstrap, "--topic-list", "sized")
    assert shown.returncode == 0, shown.stderr
    first, *partitions = shown.stdout.strip().splitlines()
    assert first.startswith(f"broker {one['broker']}: {entry['logDir']}: ") and "% free" in first
    assert [line.split(":")[0].strip() for line in partitions] == ["sized-0", "sized-1"]


def test_log_dirs_says_what_is_wrong() -> None:
    refused = cli("log-dirs", "--bootstrap-server", "127.0.0.1:1", "--timeout", "2")
    assert refused.returncode != 0 and "Traceback" not in refused.stderr
    assert "127.0.0.1:1" in refused.stderr
    bad = cli("log-dirs", "--broker-list", "one,two")
    assert bad.returncode == 2 and "broker ids" in bad.stderr


def test_log_dirs_says_when_a_broker_refuses_produce_below_its_reserve(tmp_path: Path) -> None:
    free = os.statvfs(tmp_path).f_bavail * os.statvfs(tmp_path).f_frsize
    broker = BrokerProcess(str(tmp_path / "data"), {"log.dir.min.free.bytes": str(free * 4)}).start()
    try:
        refused: list[KafkaError | None] = []
        producer = Producer({"bootstrap.servers": broker.bootstrap, "retries": 0, "message.timeout.ms": 5000,
                             "on_delivery": lambda err, msg: refused.append(err)})  # fmt: skip
        producer.produce("full", b"x")
        producer.flush(10)
        assert refused and refused[0] is not None and refused[0].code() == KafkaError.KAFKA_STORAGE_ERROR, refused
        shown = cli("log-dirs", "--bootstrap-server", broker.bootstrap)
        assert shown.returncode == 0, shown.stderr
        assert "BELOW ITS RESERVE" in shown.stdout and "produce to user topics is refused" in shown.stdout, shown.stdout
        described = cli("log-dirs", "--bootstrap-server", broker.bootstrap, "--json")
        (entry,) = json.loads(described.stdout)["brokers"][0]["logDirs"]
        assert entry["produceRefused"] is True and entry["reserveBytes"] == free * 4
    finally:
        broker.stop()
    healthy = BrokerProcess(str(tmp_path / "data")).start()  # the default reserve: far below the free space
    try:
        shown = cli("log-dirs", "--bootstrap-server", healthy.bootstrap, "--json")
        (entry,) = json.loads(shown.stdout)["brokers"][0]["logDirs"]
        assert entry["produceRefused"] is False and 0 < entry["reserveBytes"] <= 1 << 30
    finally:
        healthy.stop()

"""``logstore log-dirs`` against a broker process: each directory's size, free space and partitions."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer

from tests.kit.brokerkit import BrokerProcess, cli, create_topic, read_values

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


def test_log_dirs_move_a_partition_between_dirs_while_it_is_online(tmp_path: Path) -> None:
    """Two log directories; `log-dirs move` (AlterReplicaLogDirs) copies a partition at a throttled
    rate while the JSON shows the future replica, then the partition serves from the new dir with
    every record, and the errors of moves that cannot be are named."""
    first, second = str(tmp_path / "a"), str(tmp_path / "b")
    broker = BrokerProcess(f"{first},{second}", {"replica.alter.log.dirs.io.max.bytes.per.second": str(1 << 20)},
                           log_dir=str(tmp_path)).start()  # fmt: skip
    try:
        create_topic(broker.bootstrap, "moving", 2)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 20})
        for i in range(3000):
            producer.produce("moving", b"%06d" % i + b"x" * 1000, partition=0)
        assert producer.flush(30) == 0

        def where() -> dict[str, dict[str, Any]]:
            shown = cli("log-dirs", "--bootstrap-server", broker.bootstrap, "--json")
            assert shown.returncode == 0, shown.stderr
            (one,) = json.loads(shown.stdout)["brokers"]
            return {e["logDir"]: {p["partition"]: p for p in e["partitions"]} for e in one["logDirs"]}

        dirs = where()
        source = next(d for d, parts in dirs.items() if "moving-0" in parts)
        target = next(d for d in dirs if d != source)
        started = cli("log-dirs", "move", "moving", "0", target, "--bootstrap-server", broker.bootstrap, "--no-wait")
        assert started.returncode == 0 and "moving moving-0" in started.stdout, started.stderr
        during = where()
        future = during[target].get("moving-0")
        assert future is not None and future["isFuture"] and future["offsetLag"] > 0, during
        assert not during[source]["moving-0"]["isFuture"]  # the current replica still serves from the source
        text = cli("log-dirs", "--bootstrap-server", broker.bootstrap)
        assert "moving here (future replica)" in text.stdout, text.stdout
        for i in range(3000, 3100):  # appends go on meanwhile
            producer.produce("moving", b"%06d" % i, partition=0)
        assert producer.flush(30) == 0
        done = cli("log-dirs", "move", "moving", "0", target, "--bootstrap-server", broker.bootstrap,
                   "--wait-timeout", "60")  # fmt: skip
        assert done.returncode == 0 and f"moving-0 is in {target}" in done.stdout, done.stdout + done.stderr
        after = where()
        assert "moving-0" in after[target] and "moving-0" not in after[source]
        assert not after[target]["moving-0"]["isFuture"]
        values = read_values(broker.bootstrap, "moving", "read_uncommitted", 3100)  # partition 1 is empty
        assert [v[:6] for v in values] == [b"%06d" % i for i in range(3100)]

        nowhere = cli("log-dirs", "move", "moving", "1", str(tmp_path / "c"), "--bootstrap-server", broker.bootstrap)
        assert nowhere.returncode != 0 and "LOG_DIR_NOT_FOUND" in nowhere.stderr, nowhere.stderr
        assert "Traceback" not in nowhere.stderr
        absent = cli("log-dirs", "move", "absent", "0", target, "--bootstrap-server", broker.bootstrap)
        assert absent.returncode != 0 and "REPLICA_NOT_AVAILABLE" in absent.stderr, absent.stderr
        assert broker.stop() == 0
    finally:
        if broker.alive:
            broker.kill()

"""``logstore log-dirs`` against a broker process: each directory's size, free space and partitions."""

from __future__ import annotations

import json
import os

import pytest
from confluent_kafka import Producer

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

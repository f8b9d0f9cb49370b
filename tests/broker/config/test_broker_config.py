"""BrokerConfig (Kafka's KafkaConfig names and defaults): values, files, overrides, listeners."""

from __future__ import annotations

import os

import pytest

from logstore import LogConfig
from logstore.broker.config.broker_config import BrokerConfig, parse_listeners, read_properties
from logstore.errors import InvalidConfigError

pytestmark = pytest.mark.unit


def test_config_defaults_and_log_keys() -> None:
    config = BrokerConfig.from_dict({})
    assert config.node_id == 0
    assert config.num_partitions == 1
    assert config.auto_create_topics_enable is True
    assert config.log_defaults() == {"max.message.bytes": 1_048_588}
    config = BrokerConfig.from_dict(
        {
            "log.retention.hours": "2",
            "log.retention.ms": "5000",
            "log.segment.bytes": "1048576",
            "message.max.bytes": "999",
        }
    )
    topic = LogConfig.from_dict({}, defaults=config.log_defaults())
    # The finest unit wins, as in Kafka, whatever the order.
    assert topic.retention_ms == 5000
    assert topic.segment_bytes == 1_048_576
    assert topic.max_message_bytes == 999
    assert (
        LogConfig.from_dict(
            {}, BrokerConfig.from_dict({"log.retention.hours": "2"}).log_defaults()
        ).retention_ms
        == 7_200_000
    )


def test_config_rejects_bad_values_and_reports_unused_keys() -> None:
    with pytest.raises(InvalidConfigError, match=r"num\.partitions"):
        BrokerConfig.from_dict({"num.partitions": "0"})
    with pytest.raises(InvalidConfigError, match=r"auto\.create\.topics\.enable"):
        BrokerConfig.from_dict({"auto.create.topics.enable": "maybe"})
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        BrokerConfig.from_dict({"log.segment.bytes": "-5"})
    with pytest.raises(InvalidConfigError, match=r"listener\.security\.protocol\.map"):
        BrokerConfig.from_dict({"listeners": "CLIENT://127.0.0.1:9093"})
    assert BrokerConfig.from_dict({"zookeeper.set.acl": "true"}).ignored == ["zookeeper.set.acl"]
    used = BrokerConfig.from_dict({"zookeeper.connect": "127.0.0.1:2181/k", "broker.rack": "r1"})
    assert used.ignored == [] and used.zookeeper_connect == "127.0.0.1:2181/k" and used.broker_rack == "r1"


def test_config_file_and_overrides(tmp_path: object) -> None:
    path = os.path.join(str(tmp_path), "server.properties")
    with open(path, "w") as f:
        f.write("# comment\nbroker.id=4\nnum.partitions : 3\n! other comment\nlog.dirs=/tmp/a,/tmp/b\n")
    assert read_properties(path)["num.partitions"] == "3"
    config = BrokerConfig.load(path, ["num.partitions=5"], {"listeners": "PLAINTEXT://127.0.0.1:0"})
    assert (config.node_id, config.num_partitions, config.data_dir) == (4, 5, "/tmp/a")
    assert config.listeners == [("PLAINTEXT", "127.0.0.1", 0)]
    with pytest.raises(InvalidConfigError, match="key=value"):
        BrokerConfig.load(None, ["no-equals-sign"])


def test_parse_listeners() -> None:
    assert parse_listeners("PLAINTEXT://[::1]:9092, ssl://:9093") == [
        ("PLAINTEXT", "::1", 9092),
        ("SSL", "0.0.0.0", 9093),
    ]
    with pytest.raises(InvalidConfigError, match="twice"):  # Kafka: each listener a different name
        parse_listeners("PLAINTEXT://:9092,PLAINTEXT://:9093")
    with pytest.raises(InvalidConfigError):
        parse_listeners("127.0.0.1:9092")

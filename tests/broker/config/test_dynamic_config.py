"""Dynamic broker configs (Kafka's DynamicBrokerConfig) and the legacy topic keys, without a network."""

from __future__ import annotations

import json
import os
import uuid

import pytest

from logstore.broker.cluster_member import LocalController
from logstore.broker.config.broker_config import BrokerConfig, message_format_version_error
from logstore.broker.config.dynamic_config import (
    DEFAULT_CONFIG,
    DEFAULT_ENTITY,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    STATIC_BROKER_CONFIG,
    DynamicBrokerConfig,
    FileConfigStore,
)
from logstore.broker.config.legacy_topic_configs import LegacyTopicConfigs, checked, split
from logstore.errors import InvalidConfigError
from logstore.storage.store import Store

pytestmark = pytest.mark.unit


def dynamic(tmp_path: os.PathLike[str], node: int = 0, **static: str) -> DynamicBrokerConfig:
    raw = {key.replace("_", "."): value for key, value in static.items()}
    return DynamicBrokerConfig(BrokerConfig.from_dict(raw), node, FileConfigStore(str(tmp_path)))


# -- the message format version --------------------------------------------------------


@pytest.mark.parametrize(
    "version",
    ["0.8.0", "0.10.0", "0.10.0.0", "0.10.0-IV1", "0.11.0", "1.0", "2.8", "2.8.1", "3.0-IV1", "3.7-IV4"],
)
def test_message_format_versions_kafka_3_accepts(version: str) -> None:
    assert message_format_version_error(version) is None


@pytest.mark.parametrize("version", ["0.7", "0.10", "4.1", "3.0-IV9", "abc", ""])
def test_message_format_versions_kafka_3_refuses(version: str) -> None:
    assert message_format_version_error(version) == f"Version {version} is not a valid version"


def test_broker_message_format_version_is_checked() -> None:
    assert (
        BrokerConfig.from_dict({"log.message.format.version": "2.8"}).values["log.message.format.version"]
        == "2.8"
    )
    with pytest.raises(InvalidConfigError, match=r"Version 0\.7 is not a valid version"):
        BrokerConfig.from_dict({"log.message.format.version": "0.7"})


def test_legacy_topic_keys_split_check_and_persist(tmp_path: os.PathLike[str]) -> None:
    regular, legacy = split(
        {"retention.ms": "5", "message.format.version": "0.10.0", "message.downconversion.enable": "FALSE"}
    )
    assert regular == {"retention.ms": "5"}
    assert checked(legacy) == {"message.format.version": "0.10.0", "message.downconversion.enable": "false"}
    with pytest.raises(
        InvalidConfigError, match=r"Invalid value 9\.9 for configuration message\.format\.version"
    ):
        checked({"message.format.version": "9.9"})
    with pytest.raises(InvalidConfigError, match="either true or false"):
        checked({"message.downconversion.enable": "maybe"})
    with pytest.raises(InvalidConfigError, match="Null value"):
        checked({"message.format.version": None})

    store = LegacyTopicConfigs(str(tmp_path))
    first, second = uuid.uuid4(), uuid.uuid4()
    store.set(first, "a", {"message.format.version": "1.0"}, {first})
    store.set(second, "b", {"message.format.version": "2.0"}, {first, second})
    assert LegacyTopicConfigs(str(tmp_path)).get(first) == {"message.format.version": "1.0"}
    # A topic no longer live is dropped at the next write; an unknown id has nothing.
    store.set(second, "b", {}, {second})
    reread = LegacyTopicConfigs(str(tmp_path))
    assert reread.get(first) == {} and reread.get(second) == {} and reread.get(uuid.uuid4()) == {}


# -- which keys may change ---------------------------------------------------------------


def test_static_keys_are_refused_with_kafkas_message(tmp_path: os.PathLike[str]) -> None:
    config = dynamic(tmp_path)
    for name in ("num.partitions", "broker.id", "log.dirs", "log.retention.hours", "listeners",
                 "log.message.format.version", "zookeeper.connect"):  # fmt: skip
        with pytest.raises(
            InvalidConfigError, match=rf"^Cannot update these configs dynamically: Set\({name}\)$"
        ):
            config.alter("0", {name: "1"})
    with pytest.raises(InvalidConfigError, match=r"Set\(broker\.id, num\.partitions\)"):
        config.alter("", {"num.partitions": "2", "broker.id": "3", "log.retention.ms": "5"})
    assert config.props("0") == {} and config.props("") == {}
    assert not os.path.exists(os.path.join(str(tmp_path), FileConfigStore.FILE))


def test_security_password_and_per_broker_rules(tmp_path: os.PathLike[str]) -> None:
    config = dynamic(tmp_path)
    with pytest.raises(
        InvalidConfigError,
        match=r"only per-listener using the listener prefix: Set\(ssl\.keystore\.location\)",
    ):
        config.alter("0", {"ssl.keystore.location": "/k"})
    with pytest.raises(
        InvalidConfigError, match=r"broker id must be specified: Set\(sasl\.enabled\.mechanisms\)"
    ):
        config.alter("", {"sasl.enabled.mechanisms": "PLAIN"})
    with pytest.raises(InvalidConfigError, match="broker id must be specified"):
        config.alter("", {"listener.name.plaintext.ssl.protocol": "TLSv1.3"})
    with pytest.raises(InvalidConfigError, match="Password encoder secret not configured"):
        config.alter("0", {"listener.name.plaintext.ssl.keystore.password": "secret"})
    config.alter(
        "0", {"sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256", "listener.name.x.max.connections": "9"}
    )
    config.alter("", {"max.connections": "100", "listener.name.x.max.connections": "9"})
    assert config.config.values["sasl.enabled.mechanisms"] == "PLAIN,SCRAM-SHA-256"
    assert config.config.values["max.connections"] == 100


def test_thread_counts_move_by_at_most_a_factor_of_two(tmp_path: os.PathLike[str]) -> None:
    config = dynamic(tmp_path)
    assert (
        config.alter("0", {"background.threads": "9", "num.io.threads": "16"}).values["num.io.threads"] == 16
    )
    with pytest.raises(
        InvalidConfigError,
        match=r"num\.io\.threads=40, value should not be greater than double the current value 16",
    ):
        config.alter("0", {"num.io.threads": "40"})
    with pytest.raises(InvalidConfigError, match="at least half the current value 9"):
        config.alter("0", {"background.threads": "4"})
    with pytest.raises(InvalidConfigError, match=r"background\.threads"):
        config.alter("0", {"background.threads": "many"})


def test_custom_keys_are_kept_and_validate_only_changes_nothing(tmp_path: os.PathLike[str]) -> None:
    config = dynamic(tmp_path)
    assert config.alter("0", {"my.own.key": "x"}, validate_only=True) is config.config
    assert config.props("0") == {}
    config.alter("0", {"my.own.key": "x"})
    entry = {e.name: e for e in config.describe("0")}["my.own.key"]
    assert (entry.value, entry.source, entry.read_only) == ("x", DYNAMIC_BROKER_CONFIG, True)


# -- layers, persistence, description ----------------------------------------------------------


def test_layers_precedence_and_persistence(tmp_path: os.PathLike[str]) -> None:
    config = dynamic(tmp_path, log_retention_hours="2")
    assert config.config.log_defaults()["retention.ms"] == 7_200_000
    config.alter("", {"log.retention.ms": "60000", "log.segment.bytes": "2097152"})
    assert config.config.log_defaults()["retention.ms"] == "60000"
    config.alter("0", {"log.retention.ms": "30000"})
    assert config.config.log_defaults()["retention.ms"] == "30000"  # per broker over the cluster default
    with open(os.path.join(str(tmp_path), FileConfigStore.FILE), encoding="utf-8") as f:
        assert json.load(f)["entities"] == {
            DEFAULT_ENTITY: {"log.retention.ms": "60000", "log.segment.bytes": "2097152"},
            "0": {"log.retention.ms": "30000"},
        }
    # Another broker sharing the file (a test) sees the default, not broker 0's own set.
    assert dynamic(tmp_path, node=1).config.log_defaults()["retention.ms"] == "60000"
    again = dynamic(tmp_path, log_retention_hours="2")
    assert again.config.log_defaults() == config.config.log_defaults()
    config.alter("0", {})
    assert config.config.log_defaults()["retention.ms"] == "60000" and config.props("0") == {}


def test_an_unparsable_dynamic_set_is_ignored_at_start(tmp_path: os.PathLike[str]) -> None:
    FileConfigStore(str(tmp_path)).save("0", {"log.retention.ms": "soon"})
    config = dynamic(tmp_path)
    assert config.props("0") == {} and config.config.log_defaults() == {"max.message.bytes": 1_048_588}
    with open(os.path.join(str(tmp_path), FileConfigStore.FILE), "w", encoding="utf-8") as f:
        f.write("{not json")
    with pytest.raises(InvalidConfigError, match="cannot read"):
        dynamic(tmp_path)


def test_describe_sources_synonyms_and_read_only(tmp_path: os.PathLike[str]) -> None:
    config = dynamic(tmp_path, log_retention_hours="2", delete_topic_enable="false")
    entries = {e.name: e for e in config.describe("0")}
    retention = entries["log.retention.ms"]
    assert (retention.value, retention.source, retention.read_only) == (
        "7200000",
        STATIC_BROKER_CONFIG,
        False,
    )
    assert retention.synonyms == (
        ("log.retention.hours", "2", STATIC_BROKER_CONFIG),
        ("log.retention.hours", "168", DEFAULT_CONFIG),
    )
    assert entries["broker.id"].read_only and entries["broker.id"].source == DEFAULT_CONFIG
    assert entries["delete.topic.enable"].source == STATIC_BROKER_CONFIG
    assert (
        entries["log.message.format.version"].value == "3.0-IV1"
        and entries["log.message.format.version"].read_only
    )
    assert entries["log.segment.bytes"].value == "1073741824" and not entries["log.segment.bytes"].read_only

    config.alter("", {"log.retention.ms": "60000"})
    config.alter("0", {"log.retention.ms": "30000", "num.io.threads": "10"})
    entries = {e.name: e for e in config.describe("0")}
    assert entries["log.retention.ms"].value == "30000"
    assert [s[2] for s in entries["log.retention.ms"].synonyms] == [
        DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, STATIC_BROKER_CONFIG, DEFAULT_CONFIG,
    ]  # fmt: skip
    assert entries["num.io.threads"].source == DYNAMIC_BROKER_CONFIG
    # The cluster default lists what it sets, and no per-broker layer.
    (only,) = config.describe("")
    assert (only.name, only.value, only.source) == (
        "log.retention.ms",
        "60000",
        DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert DYNAMIC_BROKER_CONFIG not in [s[2] for s in only.synonyms]


# -- changed defaults reach the topics -------------------------------------------------------


def test_new_log_defaults_reach_topics_without_overrides(tmp_path: os.PathLike[str]) -> None:
    with Store(str(tmp_path), {"retention.ms": "7200000"}, scheduler=False) as store:
        store.create_topic("plain", 1)
        store.create_topic("own", 1, {"retention.ms": "1000"})
        controller = LocalController(store)
        controller.set_defaults({"retention.ms": "60000", "max.message.bytes": "2048"})
        assert store.topic_config("plain").retention_ms == 60_000
        assert store.topic_config("plain").max_message_bytes == 2048
        assert store.log("plain", 0).config.retention_ms == 60_000
        assert (
            store.topic_config("own").retention_ms == 1000
            and store.topic_config("own").max_message_bytes == 2048
        )
        assert dict(store.topic_config("own").overrides) == {"retention.ms": 1000}
        store.create_topic("later", 1)
        assert store.topic_config("later").retention_ms == 60_000
        with pytest.raises(InvalidConfigError):
            controller.set_defaults({"retention.ms": "soon"})
        assert store.topic_config("plain").retention_ms == 60_000

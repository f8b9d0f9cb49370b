"""Client configs: Kafka's names, values as their type or as strings, errors that say what would do."""

from __future__ import annotations

import re

import pytest

from logstore.client.config import KEYS, ClientConfig, ConfigError

pytestmark = pytest.mark.unit


def parse(role: str, **values: object) -> ClientConfig:
    return ClientConfig.parse(
        {"bootstrap.servers": "127.0.0.1:9092", **{k.replace("_", "."): v for k, v in values.items()}}, role
    )


@pytest.mark.parametrize(
    ("role", "given", "nearest"),
    [
        ("producer", "linger.msx", "linger.ms"),
        ("producer", "lingr.ms", "linger.ms"),
        ("producer", "batch.sizes", "batch.size"),
        ("consumer", "group.idd", "group.id"),
        ("consumer", "auto.offset.rest", "auto.offset.reset"),
        ("consumer", "enable.autocommit", "enable.auto.commit"),
        ("admin", "request.timeout", "request.timeout.ms"),
    ],
)
def test_a_mistyped_key_names_the_nearest_valid_one(role: str, given: str, nearest: str) -> None:
    with pytest.raises(ConfigError, match=f"unknown {role} config key '{given}'; did you mean '{nearest}'"):
        ClientConfig.parse({"bootstrap.servers": "h:1", given: "1"}, role)


def test_a_key_of_another_client_says_whose_it_is() -> None:
    with pytest.raises(ConfigError, match=r"'group.id' \(a consumer key\)"):
        ClientConfig.parse({"bootstrap.servers": "h:1", "group.id": "g"}, "producer")


def test_values_are_checked_with_the_key_and_what_is_allowed() -> None:
    with pytest.raises(ConfigError, match=re.escape("linger.ms must be a number, not 'soon'")):
        parse("producer", linger_ms="soon")
    with pytest.raises(ConfigError, match=r"batch.size=0 is out of range \[1, "):
        parse("producer", batch_size=0)
    with pytest.raises(
        ConfigError, match=re.escape("compression.type='brotli' is not one of none, gzip, snappy, lz4, zstd")
    ):
        parse("producer", compression_type="brotli")
    with pytest.raises(ConfigError, match=re.escape("enable.auto.commit must be true or false")):
        parse("consumer", enable_auto_commit="perhaps")
    with pytest.raises(ConfigError, match=re.escape("bootstrap.servers is required")):
        ClientConfig.parse({}, "admin")


def test_strings_types_and_librdkafka_spellings_mean_the_same() -> None:
    a = parse("producer", linger_ms="7", acks="all", enable_idempotence="false")
    assert (a["linger.ms"], a["acks"], a["enable.idempotence"]) == (7.0, -1, False)
    b = ClientConfig.parse({"bootstrap.servers": "h:1", "queue.buffering.max.ms": 7, "request.required.acks": 1,
                            "message.timeout.ms": 1000, "queue.buffering.max.kbytes": 2}, "producer")  # fmt: skip
    assert (b["linger.ms"], b["acks"], b["delivery.timeout.ms"], b["buffer.memory"]) == (7.0, 1, 1000, 2048)
    c = parse("consumer", auto_offset_reset="smallest")
    assert c["auto.offset.reset"] == "earliest"


def test_every_key_has_a_role_and_its_default_passes_its_own_check() -> None:
    for role in ("producer", "consumer", "admin"):
        config = ClientConfig.parse({"bootstrap.servers": "h:1"}, role)
        for name, key in KEYS.items():
            assert key.roles, name
            if role in key.roles:
                assert name in config

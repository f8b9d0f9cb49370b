"""Replacing a topic's overrides: LogConfig.with_overrides_replaced and Store.set_topic_overrides."""

from __future__ import annotations

import os

import pytest

from logstore import Store
from logstore.errors import InvalidConfigError
from logstore.storage.config import LogConfig, render_value
from logstore.storage.store import UnknownTopicError

pytestmark = pytest.mark.unit


def test_replacing_overrides_drops_the_keys_left_out() -> None:
    config = LogConfig.from_dict(
        {"retention.ms": "1000", "cleanup.policy": "compact"}, defaults={"segment.bytes": 4096}
    )
    replaced = config.with_overrides_replaced({"cleanup.policy": "compact,delete"})
    assert dict(replaced.overrides) == {"cleanup.policy": ("compact", "delete")}
    assert replaced.retention_ms == 604_800_000  # back to the built-in default
    assert replaced.segment_bytes == 4096  # the defaults layer is kept
    assert dict(replaced.defaults) == {"segment.bytes": 4096}
    empty = config.with_overrides_replaced({})
    assert dict(empty.overrides) == {} and empty.cleanup_policy == ("delete",)


def test_replacing_overrides_checks_every_key() -> None:
    config = LogConfig.from_dict({"retention.ms": "1000"})
    with pytest.raises(InvalidConfigError, match=r"segment\.bytes"):
        config.with_overrides_replaced({"segment.bytes": "1"})
    with pytest.raises(InvalidConfigError, match="unknown topic config"):
        config.with_overrides_replaced({"no.such.key": "1"})


def test_render_value_is_kafkas_text() -> None:
    assert render_value(("compact", "delete")) == "compact,delete"
    assert render_value(True) == "true"
    assert render_value(0.25) == "0.25"
    assert render_value(-1) == "-1"


def test_set_topic_overrides_applies_to_logs_and_survives_reopen(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, {"retention.ms": 5000}, scheduler=False) as store:
        store.create_topic("t", partitions=2, config={"segment.bytes": 4096, "flush.messages": 1})
        new = store.set_topic_overrides("t", {"flush.messages": "10", "cleanup.policy": "compact"})
        assert dict(new.overrides) == {"flush.messages": 10, "cleanup.policy": ("compact",)}
        assert new.segment_bytes == 1_073_741_824 and new.retention_ms == 5000
        assert store.topic_config("t") is new
        assert all(store.log("t", p).config is new for p in range(2))
    with Store(data, {"retention.ms": 5000}, scheduler=False) as store:
        config = store.topic_config("t")
        assert dict(config.overrides) == {"flush.messages": 10, "cleanup.policy": ("compact",)}
        assert config.segment_bytes == 1_073_741_824
        assert store.partitions("t") == 2
        store.set_topic_overrides("t", {})
    with Store(data, scheduler=False) as store:
        assert dict(store.topic_config("t").overrides) == {}


def test_set_topic_overrides_rejects_without_changing_anything(tmp_path: os.PathLike[str]) -> None:
    data = str(tmp_path)
    with Store(data, scheduler=False) as store:
        store.create_topic("t", config={"retention.ms": 1000})
        before = store.topic_config("t")
        with pytest.raises(InvalidConfigError):
            store.set_topic_overrides("t", {"retention.ms": "soon"})
        assert store.topic_config("t") is before and store.log("t", 0).config is before
        with pytest.raises(UnknownTopicError):
            store.set_topic_overrides("missing", {})
    with Store(data, scheduler=False) as store:
        assert dict(store.topic_config("t").overrides) == {"retention.ms": 1000}

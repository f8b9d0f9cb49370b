"""LogConfig (storage/config.py): Kafka's topic config keys, defaults, parsing, overrides, errors."""

from __future__ import annotations

import pytest

from logstore.errors import InvalidConfigError
from logstore.storage.config import LogConfig

pytestmark = pytest.mark.unit


def test_defaults_are_kafkas() -> None:
    config = LogConfig.from_dict()
    assert config.segment_bytes == 1_073_741_824
    assert config.segment_index_bytes == 10_485_760
    assert config.index_interval_bytes == 4096
    assert config.retention_ms == 604_800_000 and config.retention_bytes == -1
    assert config.max_message_bytes == 1_048_588
    assert config.message_timestamp_type == "CreateTime"
    assert config.cleanup_policy == ("delete",)
    assert config.overrides == {}


def test_strings_are_parsed_like_properties() -> None:
    config = LogConfig.from_dict(
        {"flush.messages": "1", "preallocate": "TRUE", "cleanup.policy": "compact, delete"}
    )
    assert config.flush_messages == 1 and config.preallocate is True
    assert config.cleanup_policy == ("compact", "delete")
    assert config.to_properties() == {
        "cleanup.policy": "compact,delete",
        "flush.messages": "1",
        "preallocate": "true",
    }


@pytest.mark.parametrize(
    ("config", "fragment"),
    [
        ({"segment.byte": 1}, "unknown topic config 'segment.byte'"),
        ({"segment.bytes": 10}, "must be >= 14"),
        ({"segment.bytes": "big"}, "expected a int"),
        ({"segment.bytes": 2**31}, "expected a int"),
        ({"message.timestamp.type": "Now"}, "CreateTime, LogAppendTime"),
        ({"cleanup.policy": "shred"}, "[delete, compact]"),
        ({"flush.messages": 0}, ">= 1"),
        ({"preallocate": "yes"}, "true or false"),
    ],
)
def test_bad_config_is_a_clear_error(config: dict[str, object], fragment: str) -> None:
    with pytest.raises(InvalidConfigError) as info:
        LogConfig.from_dict(config)
    assert fragment in str(info.value)


def test_overrides_layer_over_defaults() -> None:
    base = LogConfig.from_dict({"retention.ms": 5}, defaults={"segment.bytes": 1000, "retention.ms": 9})
    assert base.retention_ms == 5 and base.segment_bytes == 1000
    assert base.overrides == {"retention.ms": 5}
    assert base.with_overrides({"segment.ms": 7}).overrides == {"retention.ms": 5, "segment.ms": 7}

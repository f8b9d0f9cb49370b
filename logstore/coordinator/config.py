"""The coordinator's broker settings (Kafka's names and defaults).

>>> CoordinatorConfig.from_properties({"group.max.size": "3", "log.dirs": "/x"}).group_max_size
3
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from logstore.errors import InvalidConfigError

INT_MAX = 2**31 - 1

_CONFIG_NAMES = {
    "group.min.session.timeout.ms": "group_min_session_timeout_ms",
    "group.max.session.timeout.ms": "group_max_session_timeout_ms",
    "group.initial.rebalance.delay.ms": "group_initial_rebalance_delay_ms",
    "group.max.size": "group_max_size",
    "offsets.retention.minutes": "offsets_retention_minutes",
    "offsets.retention.check.interval.ms": "offsets_retention_check_interval_ms",
    "offset.metadata.max.bytes": "offset_metadata_max_bytes",
    "offsets.topic.num.partitions": "offsets_topic_num_partitions",
}


@dataclass(frozen=True)
class CoordinatorConfig:
    """The coordinator's broker settings; defaults are Kafka's.

    Invariants (checked on construction): every value is an int >= 0;
    ``group_max_size`` and ``offsets_topic_num_partitions`` are >= 1.
    """

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT_MAX
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, int) or value < 0:
                raise InvalidConfigError(f"{item.name} must be an integer >= 0, not {value!r}")
        if self.group_max_size < 1 or self.offsets_topic_num_partitions < 1:
            raise InvalidConfigError("group.max.size and offsets.topic.num.partitions must be >= 1")

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> CoordinatorConfig:
        """The config from Kafka's names (``group.max.size`` ...); other keys are ignored. O(1)."""
        values = {}
        for name, attribute in _CONFIG_NAMES.items():
            if name in properties:
                try:
                    values[attribute] = int(properties[name])
                except (TypeError, ValueError) as exc:
                    raise InvalidConfigError(f"{name} must be an integer, not {properties[name]!r}") from exc
        return cls(**values)

    @property
    def offsets_retention_ms(self) -> int:
        """``offsets.retention.minutes`` in milliseconds. O(1)."""
        return self.offsets_retention_minutes * 60_000

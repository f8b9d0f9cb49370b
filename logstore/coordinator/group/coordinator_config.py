"""The coordinator's broker settings (Kafka's names and defaults).

>>> CoordinatorConfig.from_properties({"group.max.size": "3", "log.dirs": "/x"}).group_max_size
3
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from logstore.coordinator.group.server_assignors import make_assignors
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
    # The consumer group protocol (KIP-848).
    "group.consumer.session.timeout.ms": "group_consumer_session_timeout_ms",
    "group.consumer.min.session.timeout.ms": "group_consumer_min_session_timeout_ms",
    "group.consumer.max.session.timeout.ms": "group_consumer_max_session_timeout_ms",
    "group.consumer.heartbeat.interval.ms": "group_consumer_heartbeat_interval_ms",
    "group.consumer.min.heartbeat.interval.ms": "group_consumer_min_heartbeat_interval_ms",
    "group.consumer.max.heartbeat.interval.ms": "group_consumer_max_heartbeat_interval_ms",
    "group.consumer.max.size": "group_consumer_max_size",
}
_LIST_NAMES = {"group.consumer.assignors": "group_consumer_assignors"}


@dataclass(frozen=True)
class CoordinatorConfig:
    """The coordinator's broker settings; defaults are Kafka's.

    Invariants (checked on construction, :class:`InvalidConfigError` otherwise,
    as Kafka's ``GroupCoordinatorConfig``): every int is >= 0;
    ``group_max_size``, ``group_consumer_max_size`` and
    ``offsets_topic_num_partitions`` are >= 1; the consumer protocol's session
    timeout and heartbeat interval lie within their min and max, and the
    interval is below the session timeout; ``group_consumer_assignors`` names
    known assignors ("uniform", "range" or Kafka's class names), the first
    being the default.
    """

    group_min_session_timeout_ms: int = 6_000
    group_max_session_timeout_ms: int = 1_800_000
    group_initial_rebalance_delay_ms: int = 3_000
    group_max_size: int = INT_MAX
    offsets_retention_minutes: int = 10_080
    offsets_retention_check_interval_ms: int = 600_000
    offset_metadata_max_bytes: int = 4_096
    offsets_topic_num_partitions: int = 50
    group_consumer_session_timeout_ms: int = 45_000
    group_consumer_min_session_timeout_ms: int = 45_000
    group_consumer_max_session_timeout_ms: int = 60_000
    group_consumer_heartbeat_interval_ms: int = 5_000
    group_consumer_min_heartbeat_interval_ms: int = 5_000
    group_consumer_max_heartbeat_interval_ms: int = 15_000
    group_consumer_max_size: int = INT_MAX
    group_consumer_assignors: tuple[str, ...] = ("uniform", "range")

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if item.name == "group_consumer_assignors":
                continue
            if not isinstance(value, int) or value < 0:
                raise InvalidConfigError(f"{item.name} must be an integer >= 0, not {value!r}")
        if (
            self.group_max_size < 1
            or self.offsets_topic_num_partitions < 1
            or self.group_consumer_max_size < 1
        ):
            raise InvalidConfigError(
                "group.max.size, group.consumer.max.size and offsets.topic.num.partitions must be >= 1"
            )
        self._check_consumer_protocol()

    def _check_consumer_protocol(self) -> None:
        """Kafka's ``require``s on the group.consumer.* settings."""
        for what, low, value, high in (
            ("heartbeat.interval.ms", self.group_consumer_min_heartbeat_interval_ms,
             self.group_consumer_heartbeat_interval_ms, self.group_consumer_max_heartbeat_interval_ms),
            ("session.timeout.ms", self.group_consumer_min_session_timeout_ms,
             self.group_consumer_session_timeout_ms, self.group_consumer_max_session_timeout_ms),
        ):  # fmt: skip
            if not low <= value <= high:
                raise InvalidConfigError(
                    f"group.consumer.{what}={value} must lie within group.consumer.min.{what}={low} "
                    f"and group.consumer.max.{what}={high}"
                )
        if self.group_consumer_heartbeat_interval_ms >= self.group_consumer_session_timeout_ms:
            raise InvalidConfigError(
                "group.consumer.heartbeat.interval.ms must be less than group.consumer.session.timeout.ms"
            )
        try:
            make_assignors(self.group_consumer_assignors)
        except ValueError as e:
            raise InvalidConfigError(f"group.consumer.assignors: {e}") from None

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> CoordinatorConfig:
        """The config from Kafka's names (``group.max.size`` ...); other keys are ignored. O(1)."""
        values: dict[str, Any] = {}
        for name, attribute in _CONFIG_NAMES.items():
            if name in properties:
                try:
                    values[attribute] = int(properties[name])
                except (TypeError, ValueError) as exc:
                    raise InvalidConfigError(f"{name} must be an integer, not {properties[name]!r}") from exc
        for name, attribute in _LIST_NAMES.items():
            if name in properties:
                raw = properties[name]
                items = raw.split(",") if isinstance(raw, str) else list(raw)
                values[attribute] = tuple(str(item).strip() for item in items if str(item).strip())
        return cls(**values)

    @property
    def offsets_retention_ms(self) -> int:
        """``offsets.retention.minutes`` in milliseconds. O(1)."""
        return self.offsets_retention_minutes * 60_000

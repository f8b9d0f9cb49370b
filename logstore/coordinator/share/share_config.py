"""The share groups' broker settings (KIP-932; Kafka 4.2's names and defaults).

>>> ShareConfig.from_properties({"group.share.record.lock.duration.ms": "2000"}).record_lock_duration_ms
2000
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from logstore.errors import InvalidConfigError

NAMES = {
    "group.share.record.lock.duration.ms": "record_lock_duration_ms",
    "group.share.delivery.count.limit": "delivery_count_limit",
    "group.share.session.timeout.ms": "session_timeout_ms",
    "group.share.heartbeat.interval.ms": "heartbeat_interval_ms",
    "group.share.partition.max.record.locks": "partition_max_record_locks",
    "group.share.max.size": "max_size",
    "group.share.max.share.sessions": "max_share_sessions",
}
"""Kafka's broker key -> the attribute of :class:`ShareConfig`."""


@dataclass(frozen=True)
class ShareConfig:
    """The share coordinator's settings; defaults are Kafka 4.2's.

    Invariants (checked on construction, InvalidConfigError otherwise): every
    value >= 1; the delivery count limit within Kafka's 2..10; the heartbeat
    interval below the session timeout. The lock duration may be as short as
    100 ms here (Kafka: 1 s) so that tests can watch locks expire.
    """

    record_lock_duration_ms: int = 30_000
    delivery_count_limit: int = 5
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 5_000
    partition_max_record_locks: int = 2_000
    max_size: int = 200
    max_share_sessions: int = 2_000

    def __post_init__(self) -> None:
        for item in fields(self):
            value = getattr(self, item.name)
            if not isinstance(value, int) or value < 1:
                raise InvalidConfigError(f"share group setting {item.name} must be an integer >= 1, not {value!r}")
        if not 2 <= self.delivery_count_limit <= 10:
            raise InvalidConfigError(
                f"group.share.delivery.count.limit={self.delivery_count_limit} must lie within 2 and 10"
            )
        if self.record_lock_duration_ms < 100:
            raise InvalidConfigError("group.share.record.lock.duration.ms must be at least 100")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidConfigError(
                "group.share.heartbeat.interval.ms must be less than group.share.session.timeout.ms"
            )

    @classmethod
    def from_properties(cls, properties: Mapping[str, Any]) -> ShareConfig:
        """The config from Kafka's names; other keys are ignored. O(1)."""
        values: dict[str, int] = {}
        for name, attribute in NAMES.items():
            if properties.get(name) is not None:
                try:
                    values[attribute] = int(properties[name])
                except (TypeError, ValueError) as exc:
                    raise InvalidConfigError(f"{name} must be an integer, not {properties[name]!r}") from exc
        return cls(**values)

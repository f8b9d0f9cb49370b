"""Topic configuration with Kafka's names, defaults and validation.

``LogConfig`` accepts Kafka's dotted topic config names (``segment.bytes``,
``retention.ms``, ...); an unknown name or an invalid value raises
:class:`InvalidConfigError` saying what is allowed. The table is Kafka's
``TopicConfig`` set, so DescribeConfigs can list it whole.

>>> config = LogConfig.from_dict({"segment.bytes": "1048576", "cleanup.policy": "compact,delete"})
>>> config.segment_bytes, config.cleanup_policy, config.retention_ms
(1048576, ('compact', 'delete'), 604800000)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from logstore.errors import InvalidConfigError

LONG_MAX = 2**63 - 1
INT_MAX = 2**31 - 1


@dataclass(frozen=True)
class ConfigKey:
    """One config key: its type, default, and the check its value must pass."""

    name: str
    kind: str  # int | long | double | boolean | string | list
    default: Any
    check: Callable[[Any], bool] | None = None
    allowed: str = ""
    doc: str = ""


def _at_least(low: float) -> Callable[[Any], bool]:
    return lambda v: v >= low


def _one_of(*values: str) -> Callable[[Any], bool]:
    return lambda v: v in values


def _list_of(*values: str) -> Callable[[Any], bool]:
    return lambda v: len(v) > 0 and all(item in values for item in v)


_KEYS = [
    ConfigKey(
        "cleanup.policy",
        "list",
        ("delete",),
        _list_of("delete", "compact"),
        "[delete, compact]",
        "delete old segments by retention, and/or compact to the latest record per key",
    ),
    ConfigKey(
        "compression.type",
        "string",
        "producer",
        _one_of("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"),
        "[uncompressed, zstd, lz4, snappy, gzip, producer]",
        "the topic's final compression",
    ),
    ConfigKey(
        "delete.retention.ms",
        "long",
        86_400_000,
        _at_least(0),
        ">= 0",
        "how long tombstones of a compacted topic are kept",
    ),
    ConfigKey(
        "file.delete.delay.ms",
        "long",
        60_000,
        _at_least(0),
        ">= 0",
        "delay before a .deleted file is removed",
    ),
    ConfigKey(
        "flush.messages",
        "long",
        LONG_MAX,
        _at_least(1),
        ">= 1",
        "fsync after this many records (1: every append is durable when it returns)",
    ),
    ConfigKey("flush.ms", "long", LONG_MAX, _at_least(0), ">= 0", "fsync at least this often"),
    ConfigKey(
        "index.interval.bytes", "int", 4096, _at_least(0), ">= 0", "bytes between two offset index entries"
    ),
    ConfigKey(
        "max.compaction.lag.ms",
        "long",
        LONG_MAX,
        _at_least(1),
        ">= 1",
        "longest time a record stays ineligible for compaction",
    ),
    ConfigKey(
        "max.message.bytes", "int", 1_048_588, _at_least(0), ">= 0", "largest record batch the log accepts"
    ),
    ConfigKey(
        "message.timestamp.after.max.ms",
        "long",
        LONG_MAX,
        _at_least(0),
        ">= 0",
        "how far ahead of the broker's clock a record timestamp may be",
    ),
    ConfigKey(
        "message.timestamp.before.max.ms",
        "long",
        LONG_MAX,
        _at_least(0),
        ">= 0",
        "how far behind the broker's clock a record timestamp may be",
    ),
    ConfigKey(
        "message.timestamp.type",
        "string",
        "CreateTime",
        _one_of("CreateTime", "LogAppendTime"),
        "[CreateTime, LogAppendTime]",
        "which timestamp records carry",
    ),
    ConfigKey(
        "min.cleanable.dirty.ratio",
        "double",
        0.5,
        lambda v: 0 <= v <= 1,
        "[0,...,1]",
        "dirty share of the log that triggers compaction",
    ),
    ConfigKey(
        "min.compaction.lag.ms", "long", 0, _at_least(0), ">= 0", "shortest time a record stays uncompacted"
    ),
    ConfigKey(
        "min.insync.replicas",
        "int",
        1,
        _at_least(1),
        ">= 1",
        "replicas that must acknowledge an acks=all write",
    ),
    ConfigKey(
        "preallocate",
        "boolean",
        False,
        None,
        "true or false",
        "accepted for Kafka compatibility, no effect: on Linux Kafka's only sets the file length "
        "(docs/benchmarks.md measures a zero-filled preallocation)",
    ),
    ConfigKey(
        "retention.bytes",
        "long",
        -1,
        None,
        "any; -1 for no limit",
        "largest the log may grow before old segments are deleted",
    ),
    ConfigKey(
        "retention.ms",
        "long",
        604_800_000,
        _at_least(-1),
        ">= -1; -1 for no limit",
        "how long a segment is kept after its last record",
    ),
    ConfigKey("segment.bytes", "int", 1_073_741_824, _at_least(14), ">= 14", "size at which a segment rolls"),
    ConfigKey(
        "segment.index.bytes",
        "int",
        10_485_760,
        _at_least(4),
        ">= 4",
        "size of a segment's preallocated offset and time index files",
    ),
    ConfigKey(
        "segment.jitter.ms", "long", 0, _at_least(0), ">= 0", "random jitter subtracted from segment.ms"
    ),
    ConfigKey("segment.ms", "long", 604_800_000, _at_least(1), ">= 1", "age at which a segment rolls"),
    ConfigKey(
        "unclean.leader.election.enable",
        "boolean",
        False,
        None,
        "true or false",
        "whether an out-of-sync replica may become leader",
    ),
]
# Schema validation on produce (docs/schemas.md): Confluent Server's keys and Redpanda's synonyms. Storage
# only keeps them: the broker (broker/schema_validation.py) checks a produced batch's schema ids.
SUBJECT_NAME_STRATEGIES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
for _part in ("key", "value"):
    _KEYS.append(
        ConfigKey(
            f"confluent.{_part}.schema.validation",
            "boolean",
            False,
            None,
            "true or false",
            f"refuse a record whose {_part} does not carry the id of a schema registered under the topic's "
            f"subject (Confluent's wire format; the broker's schema registry)",
        )
    )
    _KEYS.append(
        ConfigKey(
            f"redpanda.{_part}.schema.id.validation",
            "boolean",
            False,
            None,
            "true or false",
            f"Redpanda's name for confluent.{_part}.schema.validation (either turns it on)",
        )
    )
    _KEYS.append(
        ConfigKey(
            f"confluent.{_part}.subject.name.strategy",
            "string",
            "TopicNameStrategy",
            lambda v: v.rsplit(".", 1)[-1] in SUBJECT_NAME_STRATEGIES,
            "[TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy] (or Confluent's class names, "
            "io.confluent.kafka.serializers.subject.TopicNameStrategy, ...)",
            f"the subject a {_part}'s schema id must be registered under, as the serializers name it",
        )
    )
    _KEYS.append(
        ConfigKey(
            f"redpanda.{_part}.subject.name.strategy",
            "string",
            "TopicNameStrategy",
            lambda v: v.rsplit(".", 1)[-1] in SUBJECT_NAME_STRATEGIES,
            "[TopicNameStrategy, RecordNameStrategy, TopicRecordNameStrategy]",
            f"Redpanda's name for confluent.{_part}.subject.name.strategy (that one wins when both are set)",
        )
    )
_KEYS.sort(key=lambda key: key.name)
CONFIG_KEYS: dict[str, ConfigKey] = {key.name: key for key in _KEYS}


def _parse(key: ConfigKey, value: Any) -> Any:
    try:
        if key.kind in ("int", "long"):
            if isinstance(value, bool):
                raise ValueError
            parsed: Any = int(value)
            limit = INT_MAX if key.kind == "int" else LONG_MAX
            if not -limit - 1 <= parsed <= limit:
                raise ValueError
            return parsed
        if key.kind == "double":
            return float(value)
        if key.kind == "boolean":
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError
        if key.kind == "list":
            items = value.split(",") if isinstance(value, str) else list(value)
            return tuple(item.strip() for item in items if item.strip())
        return str(value)
    except (TypeError, ValueError):
        raise InvalidConfigError(
            f"invalid value {value!r} for {key.name}: expected a {key.kind} ({key.allowed})"
        ) from None


@dataclass(frozen=True)
class LogConfig:
    """A topic's configuration: Kafka's keys, parsed and checked.

    Attributes mirror the keys with dots as underscores (``segment_bytes``).
    ``overrides`` holds the keys set for the topic; ``defaults`` the layer
    below them (the broker's ``log.*`` settings).
    """

    values: Mapping[str, Any]
    overrides: Mapping[str, Any]
    defaults: Mapping[str, Any]

    @classmethod
    def from_dict(
        cls, config: Mapping[str, Any] | None = None, defaults: Mapping[str, Any] | None = None
    ) -> LogConfig:
        """Parse ``config`` over ``defaults`` (both Kafka names); raise on any bad key."""
        values = {name: key.default for name, key in CONFIG_KEYS.items()}
        overrides: dict[str, Any] = {}
        for source in (defaults or {}, config or {}):
            for name, raw in source.items():
                key = CONFIG_KEYS.get(name)
                if key is None:
                    raise InvalidConfigError(
                        f"unknown topic config {name!r}; known keys: {', '.join(sorted(CONFIG_KEYS))}"
                    )
                value = _parse(key, raw)
                if key.check is not None and not key.check(value):
                    raise InvalidConfigError(f"invalid value {raw!r} for {name}: must be {key.allowed}")
                values[name] = value
                if source is config:
                    overrides[name] = value
        result = cls(values, overrides, dict(defaults or {}))
        for name, value in values.items():  # plain attributes: read on every append
            object.__setattr__(result, name.replace(".", "_"), value)
        return result

    def __getattr__(self, attribute: str) -> Any:
        # Reached only for names from_dict did not set: not a config key.
        raise AttributeError(f"LogConfig has no key {attribute.replace('_', '.')!r}")

    def with_overrides(self, config: Mapping[str, Any]) -> LogConfig:
        """A new config with more keys set (AlterConfigs)."""
        return LogConfig.from_dict({**self.overrides, **config}, defaults=self.defaults)

    def with_overrides_replaced(self, config: Mapping[str, Any]) -> LogConfig:
        """A new config whose overrides are exactly ``config``, over the same defaults.

        A key left out falls back to its default: this is how an override is
        dropped (Kafka's AlterConfigs replaces the whole set; IncrementalAlterConfigs
        DELETE removes one key).

        >>> config = LogConfig.from_dict({"retention.ms": "1000", "segment.bytes": "4096"})
        >>> smaller = config.with_overrides_replaced({"segment.bytes": 8192})
        >>> dict(smaller.overrides), smaller.retention_ms
        ({'segment.bytes': 8192}, 604800000)
        """
        return LogConfig.from_dict(config, defaults=self.defaults)

    def to_properties(self) -> dict[str, str]:
        """The explicit keys as Kafka-style strings (what is persisted)."""
        return {name: render_value(value) for name, value in sorted(self.overrides.items())}


def render_value(value: Any) -> str:
    """A parsed config value as Kafka writes it: ``true``, ``delete,compact``, ``0.5``.

    >>> render_value(("compact", "delete")), render_value(False), render_value(60000)
    ('compact,delete', 'false', '60000')
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)

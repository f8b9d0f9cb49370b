"""Broker configuration with Kafka's names (``server.properties``).

``BrokerConfig`` reads a ``server.properties`` file and ``key=value``
overrides; keys are Kafka's broker config names. The ``log.*`` keys become the
default topic config of every log (``log.segment.bytes`` -> ``segment.bytes``).
A known key with a bad value raises :class:`InvalidConfigError`; a key this
broker does not use is reported by :attr:`BrokerConfig.ignored` (Kafka logs
those too), so a stock Kafka ``server.properties`` loads.

>>> config = BrokerConfig.from_dict({"broker.id": "3", "log.retention.hours": "1"})
>>> config.broker_id, config.log_defaults()["retention.ms"]
(3, 3600000)
>>> config.listeners
[('PLAINTEXT', '127.0.0.1', 9092)]
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from logstore.errors import InvalidConfigError

INT_MAX = 2**31 - 1

# name: (kind, default, minimum). Defaults are Kafka's unless noted.
_KEYS: dict[str, tuple[str, Any, int | None]] = {
    "broker.id": ("int", 0, 0),
    "node.id": ("int", None, 0),
    "listeners": ("string", "PLAINTEXT://127.0.0.1:9092", None),
    "advertised.listeners": ("string", None, None),
    "log.dirs": ("string", None, None),
    "log.dir": ("string", "./data", None),  # Kafka: /tmp/kafka-logs
    "num.partitions": ("int", 1, 1),
    "default.replication.factor": ("int", 1, 1),
    "auto.create.topics.enable": ("boolean", True, None),
    "delete.topic.enable": ("boolean", True, None),
    "message.max.bytes": ("int", 1_048_588, 0),
    "socket.request.max.bytes": ("int", 104_857_600, 1),
    "connections.max.idle.ms": ("long", 600_000, 1),
    "log.retention.check.interval.ms": ("long", 300_000, 1),
    "log.flush.scheduler.interval.ms": ("long", 1_000, 1),  # Kafka: Long.MAX
    "log.flush.offset.checkpoint.interval.ms": ("int", 60_000, 1),
    "producer.id.expiration.ms": ("int", 86_400_000, 1),
    "cluster.id": ("string", None, None),
    "offsets.topic.num.partitions": ("int", 50, 1),
    "offsets.topic.replication.factor": ("int", 3, 1),  # in a cluster (alone: 1)
    "group.initial.rebalance.delay.ms": ("int", 3_000, 0),
    "group.min.session.timeout.ms": ("int", 6_000, 0),
    "group.max.session.timeout.ms": ("int", 1_800_000, 0),
    "group.max.size": ("int", INT_MAX, 1),
    "offsets.retention.minutes": ("int", 10_080, 1),
    "offsets.retention.check.interval.ms": ("long", 600_000, 1),
    "offset.metadata.max.bytes": ("int", 4096, 0),
    "offsets.commit.timeout.ms": ("int", 5_000, 1),  # in a cluster: how long a commit waits for the ISR
    # The cluster (docs/cluster.md): without zookeeper.connect the broker runs alone.
    "zookeeper.connect": ("string", None, None),
    "zookeeper.session.timeout.ms": ("int", 18_000, 1),
    "zookeeper.connection.timeout.ms": ("int", None, 1),  # Kafka: the session timeout
    "broker.rack": ("string", None, None),
    "unclean.leader.election.enable": ("boolean", False, None),
    "auto.leader.rebalance.enable": ("boolean", True, None),
    "leader.imbalance.check.interval.seconds": ("long", 300, 1),
    "leader.imbalance.per.broker.percentage": ("int", 10, 0),
    # Replication (docs/cluster.md), Kafka's names and defaults.
    "replica.lag.time.max.ms": ("long", 30_000, 1),
    "replica.fetch.wait.max.ms": ("int", 500, 0),
    "replica.fetch.min.bytes": ("int", 1, 1),
    "replica.fetch.max.bytes": ("int", 1_048_576, 0),
    "replica.fetch.response.max.bytes": ("int", 10_485_760, 0),
    "replica.fetch.backoff.ms": ("int", 1_000, 0),
    "replica.socket.timeout.ms": ("int", 30_000, 1),
}

# Broker log.* keys -> the topic key they default, with a unit factor.
_LOG_DEFAULTS: dict[str, tuple[str, int]] = {
    "log.segment.bytes": ("segment.bytes", 1),
    "log.roll.ms": ("segment.ms", 1),
    "log.roll.hours": ("segment.ms", 3_600_000),
    "log.roll.jitter.ms": ("segment.jitter.ms", 1),
    "log.index.size.max.bytes": ("segment.index.bytes", 1),
    "log.index.interval.bytes": ("index.interval.bytes", 1),
    "log.retention.ms": ("retention.ms", 1),
    "log.retention.minutes": ("retention.ms", 60_000),
    "log.retention.hours": ("retention.ms", 3_600_000),
    "log.retention.bytes": ("retention.bytes", 1),
    "log.flush.interval.messages": ("flush.messages", 1),
    "log.flush.interval.ms": ("flush.ms", 1),
    "log.cleanup.policy": ("cleanup.policy", 1),
    "log.message.timestamp.type": ("message.timestamp.type", 1),
    "log.message.timestamp.before.max.ms": ("message.timestamp.before.max.ms", 1),
    "log.message.timestamp.after.max.ms": ("message.timestamp.after.max.ms", 1),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", 1),
    "log.preallocate": ("preallocate", 1),
    "compression.type": ("compression.type", 1),
    "min.insync.replicas": ("min.insync.replicas", 1),
    "message.max.bytes": ("max.message.bytes", 1),
}
# Of several keys for one topic key, Kafka lets the finest unit win.
_PRECEDENCE = {"log.retention.ms": 3, "log.retention.minutes": 2, "log.retention.hours": 1,
               "log.roll.ms": 2, "log.roll.hours": 1}  # fmt: skip

_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


def parse_listeners(value: str, key: str = "listeners") -> list[tuple[str, str, int]]:
    """``PLAINTEXT://127.0.0.1:9092,...`` -> [(name, host, port)]; only PLAINTEXT is served."""
    result = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        match = _LISTENER.match(item)
        if match is None:
            raise InvalidConfigError(
                f"{key}: {item!r} is not NAME://host:port (e.g. PLAINTEXT://127.0.0.1:9092)"
            )
        name, host, port = match["name"].upper(), match["host"].strip("[]"), int(match["port"])
        if name != "PLAINTEXT":
            raise InvalidConfigError(f"{key}: listener {name} is not supported; use PLAINTEXT")
        if not 0 <= port <= 65535:
            raise InvalidConfigError(f"{key}: port {port} is out of range")
        result.append((name, host or "0.0.0.0", port))
    if not result:
        raise InvalidConfigError(f"{key} is empty; give at least one PLAINTEXT://host:port")
    return result


def _parse(name: str, kind: str, raw: Any, minimum: int | None) -> Any:
    if raw is None:
        return None
    try:
        if kind in ("int", "long"):
            value: Any = int(raw)
        elif kind == "boolean":
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            value = text == "true"
        else:
            value = str(raw).strip()
    except ValueError:
        raise InvalidConfigError(f"invalid value {raw!r} for {name}: expected a {kind}") from None
    if minimum is not None and value < minimum:
        raise InvalidConfigError(f"invalid value {raw!r} for {name}: must be >= {minimum}")
    return value


def read_properties(path: str) -> dict[str, str]:
    """A Java properties file (``key=value`` or ``key: value``, ``#``/``!`` comments)."""
    result: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise InvalidConfigError(f"cannot read config file {path}: {e.strerror}") from None
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line[0] in "#!":
            continue
        match = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if match is None:
            raise InvalidConfigError(f"{path}:{number}: expected key=value, got {line!r}")
        result[match[1]] = match[2]
    return result


@dataclass
class BrokerConfig:
    """The broker's settings; attributes mirror the keys with dots as underscores."""

    values: dict[str, Any]
    log_values: dict[str, Any] = field(default_factory=dict)
    ignored: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> BrokerConfig:
        values = {name: spec[1] for name, spec in _KEYS.items()}
        log_values: dict[str, tuple[int, Any]] = {}
        ignored = []
        for name, value in raw.items():
            if name in _LOG_DEFAULTS:
                topic_key, factor = _LOG_DEFAULTS[name]
                rank = _PRECEDENCE.get(name, 0)
                if topic_key not in log_values or log_values[topic_key][0] <= rank:
                    scaled = value if factor == 1 else _parse(name, "long", value, 0) * factor
                    log_values[topic_key] = (rank, scaled)
            if name in _KEYS:
                kind, _, minimum = _KEYS[name]
                values[name] = _parse(name, kind, value, minimum)
            elif name not in _LOG_DEFAULTS:
                ignored.append(name)
        config = cls(values, {k: v for k, (_, v) in log_values.items()}, sorted(ignored))
        config.log_defaults()  # fail now on a bad log.* value
        parse_listeners(config.values["listeners"])
        if config.values["advertised.listeners"]:
            parse_listeners(config.values["advertised.listeners"], "advertised.listeners")
        return config

    @classmethod
    def load(
        cls, path: str | None = None, overrides: Iterable[str] = (), extra: Mapping[str, Any] | None = None
    ) -> BrokerConfig:
        """A ``server.properties`` file, then ``key=value`` overrides, then ``extra``."""
        raw: dict[str, Any] = read_properties(path) if path else {}
        for item in overrides:
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise InvalidConfigError(f"override {item!r} is not key=value (e.g. broker.id=1)")
            raw[key.strip()] = value.strip()
        raw.update(extra or {})
        return cls.from_dict(raw)

    def __getattr__(self, attribute: str) -> Any:
        key = attribute.replace("_", ".")
        if key in self.values:
            return self.values[key]
        raise AttributeError(f"BrokerConfig has no key {key!r}")

    @property
    def node_id(self) -> int:
        node = self.values["node.id"]
        return int(node if node is not None else self.values["broker.id"])

    @property
    def data_dir(self) -> str:
        dirs = self.values["log.dirs"] or self.values["log.dir"]
        first = str(dirs).split(",")[0].strip()
        return first

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.values["listeners"])

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        value = self.values["advertised.listeners"]
        return parse_listeners(value, "advertised.listeners") if value else self.listeners

    def log_defaults(self) -> dict[str, Any]:
        """The topic config defaults from the ``log.*`` keys, checked by LogConfig."""
        from logstore.storage.config import LogConfig

        defaults = dict(self.log_values)
        defaults.setdefault("max.message.bytes", self.values["message.max.bytes"])
        LogConfig.from_dict({}, defaults=defaults)
        return defaults

    def describe(self) -> dict[str, str]:
        """Every key with its value as a string (DescribeConfigs of the broker)."""
        result = {
            k: "" if v is None else str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in self.values.items()
        }
        for key in _LOG_DEFAULTS:
            topic_key = _LOG_DEFAULTS[key][0]
            if topic_key in self.log_values and _LOG_DEFAULTS[key][1] == 1:
                result[key] = str(self.log_values[topic_key])
        return result

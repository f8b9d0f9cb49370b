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
from logstore.security.listeners import BrokerSecurity
from logstore.storage.config import LogConfig

INT_MAX = 2**31 - 1
LONG_MAX = 2**63 - 1
SHORT_MAX = 2**15 - 1

# Kafka's default message format (log.message.format.version, topic message.format.version):
# MetadataVersion IBP_3_0_IV1. Kafka 3.x accepts and ignores the key (deprecated by KIP-724).
DEFAULT_MESSAGE_FORMAT_VERSION = "3.0-IV1"
# Kafka 3.x's MetadataVersion ids: (release, sub-versions); a release alone is valid too.
_MESSAGE_FORMAT_VERSIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("0.8.0", ()), ("0.8.1", ()), ("0.8.2", ()), ("0.9.0", ()),
    ("0.10.0", ("IV0", "IV1")), ("0.10.1", ("IV0", "IV1", "IV2")), ("0.10.2", ("IV0",)),
    ("0.11.0", ("IV0", "IV1", "IV2")), ("1.0", ("IV0",)), ("1.1", ("IV0",)), ("2.0", ("IV0", "IV1")),
    ("2.1", ("IV0", "IV1", "IV2")), ("2.2", ("IV0", "IV1")), ("2.3", ("IV0", "IV1")),
    ("2.4", ("IV0", "IV1")), ("2.5", ("IV0",)), ("2.6", ("IV0",)), ("2.7", ("IV0", "IV1", "IV2")),
    ("2.8", ("IV0", "IV1")), ("3.0", ("IV0", "IV1")), ("3.1", ("IV0",)), ("3.2", ("IV0",)),
    ("3.3", ("IV0", "IV1", "IV2", "IV3")), ("3.4", ("IV0",)), ("3.5", ("IV0", "IV1", "IV2")),
    ("3.6", ("IV0", "IV1", "IV2")), ("3.7", ("IV0", "IV1", "IV2", "IV3", "IV4")), ("3.8", ("IV0",)),
    ("3.9", ("IV0",)),
)  # fmt: skip
MESSAGE_FORMAT_VERSIONS = frozenset(
    [release for release, _ in _MESSAGE_FORMAT_VERSIONS]
    + [f"{release}-{sub}" for release, subs in _MESSAGE_FORMAT_VERSIONS for sub in subs]
)


def message_format_version_error(value: str) -> str | None:
    """None if ``value`` is a version Kafka 3.x's MetadataVersion accepts, else Kafka's complaint.

    Kafka keeps the first three parts of a 0.x version and the first two of later ones, so
    ``0.10.0.0`` and ``2.8.1`` are valid, as are the sub-versions (``3.0-IV1``).

    >>> [message_format_version_error(v) for v in ("0.10.0.0", "2.8.1", "3.0-IV1", "3.0")]
    [None, None, None, None]
    >>> message_format_version_error("0.7")
    'Version 0.7 is not a valid version'
    """
    parts = value.split(".")
    keep = 3 if value.startswith("0.") else 2
    key = value if len(parts) <= keep else ".".join(parts[:keep])
    return None if key in MESSAGE_FORMAT_VERSIONS else f"Version {value} is not a valid version"


_DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"

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
    "max.incremental.fetch.session.cache.slots": ("int", 1000, 0),  # KIP-227 fetch sessions
    "log.retention.check.interval.ms": ("long", 300_000, 1),
    # Free bytes kept in the log dir: below them produce to user topics is refused (storage/disk_space.py);
    # -1: the smaller of 5% of the filesystem and 1 GiB (Redpanda's storage_min_free_bytes; not in Kafka).
    "log.dir.min.free.bytes": ("long", -1, -1),
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
    # The consumer group protocol (KIP-848; logstore/coordinator/group/consumer_membership.py).
    "group.consumer.session.timeout.ms": ("int", 45_000, 1),
    "group.consumer.min.session.timeout.ms": ("int", 45_000, 1),
    "group.consumer.max.session.timeout.ms": ("int", 60_000, 1),
    "group.consumer.heartbeat.interval.ms": ("int", 5_000, 1),
    "group.consumer.min.heartbeat.interval.ms": ("int", 5_000, 1),
    "group.consumer.max.heartbeat.interval.ms": ("int", 15_000, 1),
    "group.consumer.max.size": ("int", INT_MAX, 1),
    "group.consumer.assignors": ("string", "uniform,range", None),
    # Share groups (KIP-932; logstore/coordinator/share/share_config.py checks them together).
    "group.share.record.lock.duration.ms": ("int", 30_000, 100),
    "group.share.delivery.count.limit": ("int", 5, 2),
    "group.share.session.timeout.ms": ("int", 45_000, 1),
    "group.share.heartbeat.interval.ms": ("int", 5_000, 1),
    "group.share.partition.max.record.locks": ("int", 2_000, 1),
    "group.share.max.size": ("int", 200, 1),
    "group.share.max.share.sessions": ("int", 2_000, 1),
    "share.coordinator.state.topic.num.partitions": ("int", 50, 1),
    # Transactions (KIP-98; logstore/coordinator/txn/transaction_coordinator.py), Kafka's names and defaults.
    "transaction.max.timeout.ms": ("int", 900_000, 1),
    "transaction.state.log.num.partitions": ("int", 50, 1),
    "transaction.state.log.replication.factor": ("int", 3, 1),  # in a cluster (alone: 1)
    "transaction.state.log.min.isr": ("int", 2, 1),
    "transaction.state.log.segment.bytes": ("int", 104_857_600, 1),
    "transactional.id.expiration.ms": ("int", 604_800_000, 1),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": ("int", 10_000, 1),
    "transaction.remove.expired.transaction.cleanup.interval.ms": ("int", 3_600_000, 1),
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
    # Deprecated in Kafka 3.x and ignored there (KIP-724): accepted, validated and reported.
    "log.message.format.version": ("version", DEFAULT_MESSAGE_FORMAT_VERSION, None),
    "log.message.downconversion.enable": ("boolean", True, None),
    # Keys Kafka changes at runtime (DynamicBrokerConfig) that this broker accepts and reports
    # but does not act on (one asyncio loop: no thread pools to size; no quotas).
    "num.io.threads": ("int", 8, 1),
    "num.network.threads": ("int", 3, 1),
    "num.replica.fetchers": ("int", 1, 1),
    "num.recovery.threads.per.data.dir": ("int", 1, 1),
    "background.threads": ("int", 10, 1),
    "log.cleaner.threads": ("int", 1, 0),
    "log.cleaner.dedupe.buffer.size": ("long", 134_217_728, None),
    "log.cleaner.io.buffer.size": ("int", 524_288, 0),
    "log.cleaner.io.buffer.load.factor": ("double", 0.9, None),
    "log.cleaner.io.max.bytes.per.second": ("double", 1.7976931348623157e308, None),
    "log.cleaner.backoff.ms": ("long", 15_000, 0),
    "max.connections": ("int", INT_MAX, 0),  # these four are acted on: connection_limits.py
    "max.connections.per.ip": ("int", INT_MAX, 0),
    "max.connections.per.ip.overrides": ("string", "", None),
    "max.connection.creation.rate": ("int", INT_MAX, 0),
    "quota.window.num": ("int", 11, 1),  # client quotas (client_quotas.py): the rate's samples
    "quota.window.size.seconds": ("int", 1, 1),  # ... and their length (read-only, as in Kafka)
    "transaction.partition.verification.enable": ("boolean", True, None),  # KIP-890: txn_verification.py
    "metric.reporters": ("list", "", None),
    "leader.replication.throttled.rate": ("long", LONG_MAX, 0),
    "follower.replication.throttled.rate": ("long", LONG_MAX, 0),
    "replica.alter.log.dirs.io.max.bytes.per.second": ("long", LONG_MAX, 0),
    # Authorization (docs/acls.md): empty = none; Kafka's AclAuthorizer/StandardAuthorizer names enable ACLs.
    "authorizer.class.name": ("string", "", None),
    "super.users": ("string", None, None),
    "allow.everyone.if.no.acl.found": ("boolean", False, None),
    # Listeners, TLS and SASL (logstore/security; docs/security.md). Kafka's names and defaults;
    # TLS reads PEM only (ssl.keystore.type / ssl.truststore.type must be PEM where SSL is used).
    "listener.security.protocol.map": ("string", _DEFAULT_PROTOCOL_MAP, None),
    "inter.broker.listener.name": ("string", None, None),
    "security.inter.broker.protocol": ("string", "PLAINTEXT", None),
    "connections.max.reauth.ms": ("long", 0, 0),
    "sasl.server.max.receive.size": ("int", 524_288, 1),  # the largest frame before SASL completes
    "ssl.keystore.type": ("string", "JKS", None),
    "ssl.keystore.location": ("string", None, None),
    "ssl.keystore.password": ("string", None, None),
    "ssl.key.password": ("string", None, None),
    "ssl.keystore.certificate.chain": ("string", None, None),
    "ssl.keystore.key": ("string", None, None),
    "ssl.truststore.type": ("string", "JKS", None),
    "ssl.truststore.location": ("string", None, None),
    "ssl.truststore.password": ("string", None, None),
    "ssl.truststore.certificates": ("string", None, None),
    "ssl.client.auth": ("string", "none", None),
    "ssl.protocol": ("string", "TLSv1.3", None),
    "ssl.enabled.protocols": ("list", "TLSv1.2,TLSv1.3", None),
    "ssl.cipher.suites": ("list", "", None),
    "sasl.enabled.mechanisms": ("list", "GSSAPI", None),
    "sasl.mechanism.inter.broker.protocol": ("string", "GSSAPI", None),
    "sasl.kerberos.service.name": ("string", None, None),
    "sasl.kerberos.kinit.cmd": ("string", "/usr/bin/kinit", None),
    "sasl.kerberos.ticket.renew.window.factor": ("double", 0.8, None),
    "sasl.kerberos.ticket.renew.jitter": ("double", 0.05, None),
    "sasl.kerberos.min.time.before.relogin": ("long", 60_000, None),
    "sasl.kerberos.principal.to.local.rules": ("list", "DEFAULT", None),
    "sasl.login.refresh.window.factor": ("double", 0.8, None),
    "sasl.login.refresh.window.jitter": ("double", 0.05, None),
    "sasl.login.refresh.min.period.seconds": ("short", 60, 0),
    "sasl.login.refresh.buffer.seconds": ("short", 300, 0),
    # logstore's own: the Prometheus endpoint, http://host:port (empty: off; docs/metrics.md).
    "metrics.listener": ("string", "", None),
    # The schema registry (Confluent's API; logstore/broker/schema_registry.py): http://host:port[,...]
    # (empty: off), and the largest request body it reads.
    "schema.registry.listeners": ("string", "", None),
    "schema.registry.max.request.bytes": ("int", 8 * 1024 * 1024, 1024),
    # NONE, or BASIC: HTTP basic auth against the SASL PLAIN users and SCRAM credentials. https://
    # listeners take the ssl.* keys (PEM), listener.name.schema_registry.ssl.* overriding them.
    "schema.registry.authentication.method": ("string", "NONE", None),
    # logstore's own: the web console served beside the broker, http://host:port (empty: off;
    # started by the `logstore broker` command, docs/console.md).
    "console.listeners": ("string", "", None),
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
    "log.roll.jitter.hours": ("segment.jitter.ms", 3_600_000),
    "log.segment.delete.delay.ms": ("file.delete.delay.ms", 1),
    "log.cleaner.min.compaction.lag.ms": ("min.compaction.lag.ms", 1),
    "log.cleaner.max.compaction.lag.ms": ("max.compaction.lag.ms", 1),
    "unclean.leader.election.enable": ("unclean.leader.election.enable", 1),
    "log.cleaner.delete.retention.ms": ("delete.retention.ms", 1),
    "log.cleaner.min.cleanable.ratio": ("min.cleanable.dirty.ratio", 1),
    "log.preallocate": ("preallocate", 1),
    "compression.type": ("compression.type", 1),
    "min.insync.replicas": ("min.insync.replicas", 1),
    "message.max.bytes": ("max.message.bytes", 1),
}
# Of several keys for one topic key, Kafka lets the finest unit win.
_PRECEDENCE = {"log.retention.ms": 3, "log.retention.minutes": 2, "log.retention.hours": 1,
               "log.roll.ms": 2, "log.roll.hours": 1,
               "log.roll.jitter.ms": 2, "log.roll.jitter.hours": 1}  # fmt: skip

# Each topic key's first broker synonym (Kafka's ServerTopicConfigSynonyms.TOPIC_CONFIG_SYNONYMS):
# the broker key whose value is the default of topics that do not override the topic key.
TOPIC_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
    "message.downconversion.enable": "log.message.downconversion.enable",
    "message.format.version": "log.message.format.version",
    "message.timestamp.after.max.ms": "log.message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms": "log.message.timestamp.before.max.ms",
    "message.timestamp.type": "log.message.timestamp.type",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "min.insync.replicas": "min.insync.replicas",
    "preallocate": "log.preallocate",
    "retention.bytes": "log.retention.bytes",
    "retention.ms": "log.retention.ms",
    "segment.bytes": "log.segment.bytes",
    "segment.index.bytes": "log.index.size.max.bytes",
    "segment.jitter.ms": "log.roll.jitter.ms",
    "segment.ms": "log.roll.ms",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
}
# Broker keys that set one value in several units, finest first (Kafka's brokerConfigSynonyms).
BROKER_KEY_FAMILIES = {
    "log.retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "log.roll.ms": ("log.roll.ms", "log.roll.hours"),
    "log.roll.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
}
# Kafka's defaults of the coarse keys (the fine ones default to null there).
COARSE_KEY_DEFAULTS = {"log.retention.hours": "168", "log.roll.hours": "168", "log.roll.jitter.hours": "0"}

_LISTENER = re.compile(r"^(?P<name>[A-Za-z_][A-Za-z0-9_]*)://(?P<host>\[[^\]]*\]|[^:]*):(?P<port>\d+)$")


def parse_listeners(value: str, key: str = "listeners") -> list[tuple[str, str, int]]:
    """``PLAINTEXT://127.0.0.1:9092,SSL://:9093`` -> [(name, host, port)], names upper-cased.

    A name is a listener name; its security protocol comes from
    ``listener.security.protocol.map`` (:func:`parse_protocol_map`). Names must be unique.
    """
    result: list[tuple[str, str, int]] = []
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        match = _LISTENER.match(item)
        if match is None:
            raise InvalidConfigError(
                f"{key}: {item!r} is not NAME://host:port (e.g. PLAINTEXT://127.0.0.1:9092)"
            )
        name, host, port = match["name"].upper(), match["host"].strip("[]"), int(match["port"])
        if not 0 <= port <= 65535:
            raise InvalidConfigError(f"{key}: port {port} is out of range")
        if any(name == seen for seen, _, _ in result):
            raise InvalidConfigError(f"{key}: listener name {name} is given twice; each name once")
        result.append((name, host or "0.0.0.0", port))
    if not result:
        raise InvalidConfigError(f"{key} is empty; give at least one PLAINTEXT://host:port")
    return result


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def parse_protocol_map(value: str) -> dict[str, str]:
    """``listener.security.protocol.map``: ``NAME:PROTOCOL,...`` -> {NAME: PROTOCOL}.

    >>> parse_protocol_map("PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL")
    {'PLAINTEXT': 'PLAINTEXT', 'CLIENT': 'SASL_SSL'}
    """
    result: dict[str, str] = {}
    for item in (part.strip() for part in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not name or protocol not in SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"listener.security.protocol.map: {item!r} is not NAME:PROTOCOL with PROTOCOL one of "
                f"{', '.join(SECURITY_PROTOCOLS)}"
            )
        result[name] = protocol
    return result


def _security_key(name: str) -> bool:
    """Keys read per listener (BrokerConfig.listener_value): ``listener.name.<l>.*``, ``sasl.jaas.config``."""
    return name.startswith("listener.name.") or name == "sasl.jaas.config"


_LIMITS = {"short": SHORT_MAX, "int": INT_MAX, "long": LONG_MAX}


def _parse(name: str, kind: str, raw: Any, minimum: int | None) -> Any:
    if raw is None:
        return None
    try:
        if kind in _LIMITS:
            value: Any = int(raw)
            if not -_LIMITS[kind] - 1 <= value <= _LIMITS[kind]:
                raise ValueError
        elif kind == "double":
            value = float(raw)
        elif kind == "list":
            value = ",".join(item.strip() for item in str(raw).split(",") if item.strip())
        elif kind == "boolean":
            text = str(raw).strip().lower()
            if text not in ("true", "false"):
                raise ValueError
            value = text == "true"
        else:
            value = str(raw).strip()
    except ValueError:
        raise InvalidConfigError(f"invalid value {raw!r} for {name}: expected a {kind}") from None
    if kind == "version":
        problem = message_format_version_error(value)
        if problem is not None:
            raise InvalidConfigError(f"Invalid value {raw} for configuration {name}: {problem}")
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
    # The keys as given (file, overrides), before parsing: the layer a dynamic config goes over.
    raw: dict[str, Any] = field(default_factory=dict)

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
            elif name not in _LOG_DEFAULTS and not _security_key(name):
                ignored.append(name)
        config = cls(values, {k: v for k, (_, v) in log_values.items()}, sorted(ignored), dict(raw))
        config.log_defaults()  # fail now on a bad log.* value
        config.listener_protocols()  # fail now on a listener the map does not name
        if config.values["advertised.listeners"]:
            parse_listeners(config.values["advertised.listeners"], "advertised.listeners")
        parse_metrics_listener(config.values["metrics.listener"])
        parse_schema_registry_listeners(config.values["schema.registry.listeners"])
        method = str(config.values["schema.registry.authentication.method"]).upper()
        if method not in ("NONE", "BASIC"):
            raise InvalidConfigError(
                f"schema.registry.authentication.method={method}: use NONE or BASIC (HTTP basic auth "
                "against the broker's SASL PLAIN and SCRAM users)"
            )
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
        """The first log directory: what is not a partition lives there (topic registry, broker files)."""
        return self.log_dirs[0]

    @property
    def log_dirs(self) -> list[str]:
        """``log.dirs`` (comma-separated; Kafka's JBOD), else ``log.dir``: partitions spread over them."""
        dirs = self.values["log.dirs"] or self.values["log.dir"]
        found = [item.strip() for item in str(dirs).split(",") if item.strip()]
        return found or [str(self.values["log.dir"])]

    @property
    def listeners(self) -> list[tuple[str, str, int]]:
        return parse_listeners(self.values["listeners"])

    @property
    def advertised_listeners(self) -> list[tuple[str, str, int]]:
        value = self.values["advertised.listeners"]
        return parse_listeners(value, "advertised.listeners") if value else self.listeners

    def listener_protocols(self) -> dict[str, str]:
        """Each listener's security protocol (``listener.security.protocol.map``), by listener name."""
        protocols = parse_protocol_map(self.values["listener.security.protocol.map"])
        result = {}
        for name, _, _ in self.listeners:
            if name not in protocols:
                raise InvalidConfigError(
                    f"listeners: listener {name} has no security protocol; add {name}:<PROTOCOL> to "
                    f"listener.security.protocol.map (protocols: {', '.join(SECURITY_PROTOCOLS)})"
                )
            result[name] = protocols[name]
        return result

    def listener_security(self) -> BrokerSecurity:
        """The listeners' TLS contexts and SASL settings from these values (fails on a bad one)."""
        return BrokerSecurity(
            self.listener_protocols(),
            self.listener_value,
            self.values["inter.broker.listener.name"],
            self.values["security.inter.broker.protocol"],
        )

    def listener_value(self, listener: str, key: str) -> Any:
        """``key`` for one listener: Kafka's ``listener.name.<listener>.<key>`` override, else ``key``."""
        prefixed = f"listener.name.{listener.lower()}.{key}"
        if prefixed in self.raw:
            spec = _KEYS.get(key)
            return _parse(prefixed, spec[0], self.raw[prefixed], spec[2]) if spec else self.raw[prefixed]
        return self.values[key] if key in self.values else self.raw.get(key)

    def log_defaults(self) -> dict[str, Any]:
        """The topic config defaults from the ``log.*`` keys, checked by LogConfig."""
        defaults = dict(self.log_values)
        defaults.setdefault("max.message.bytes", self.values["message.max.bytes"])
        LogConfig.from_dict({}, defaults=defaults)
        return defaults


_METRICS_LISTENER = re.compile(r"^http://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+):(?P<port>\d{1,5})/?$")


def parse_metrics_listener(value: str | None) -> tuple[str, int] | None:
    """``http://host:port`` -> (host, port); empty or None -> None (no endpoint).

    >>> parse_metrics_listener("http://127.0.0.1:9404"), parse_metrics_listener("")
    (('127.0.0.1', 9404), None)
    >>> parse_metrics_listener("https://0.0.0.0:9404")
    Traceback (most recent call last):
    ...
    logstore.errors.InvalidConfigError: metrics.listener: 'https://0.0.0.0:9404' is not http://host:port (e.g. http://127.0.0.1:9404; only http is served); leave it empty to turn the endpoint off
    """
    text = (value or "").strip()
    if not text:
        return None
    match = _METRICS_LISTENER.match(text)
    if match is None:
        raise InvalidConfigError(
            f"metrics.listener: {text!r} is not http://host:port (e.g. http://127.0.0.1:9404; "
            "only http is served); leave it empty to turn the endpoint off"
        )
    port = int(match["port"])
    if port > 65535:
        raise InvalidConfigError(f"metrics.listener: port {port} is out of range (0-65535)")
    return match["host"].strip("[]"), port


_REGISTRY_LISTENER = re.compile(r"^(?P<scheme>https?)://(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-]+):(?P<port>\d{1,5})/?$")


def parse_schema_registry_listeners(value: str | None) -> list[tuple[str, str, int]]:
    """``schema.registry.listeners``: comma-separated ``http(s)://host:port`` -> [(scheme, host,
    port)]; empty -> [].

    >>> parse_schema_registry_listeners("http://127.0.0.1:8081,https://[::1]:8082")
    [('http', '127.0.0.1', 8081), ('https', '::1', 8082)]
    >>> parse_schema_registry_listeners("")
    []
    >>> parse_schema_registry_listeners("127.0.0.1:8081")
    Traceback (most recent call last):
    ...
    logstore.errors.InvalidConfigError: schema.registry.listeners: '127.0.0.1:8081' is not http://host:port or https://host:port (e.g. http://127.0.0.1:8081); leave it empty to turn the registry off
    """
    found = []
    for text in (value or "").split(","):
        text = text.strip()
        if not text:
            continue
        match = _REGISTRY_LISTENER.match(text)
        if match is None:
            raise InvalidConfigError(
                f"schema.registry.listeners: {text!r} is not http://host:port or https://host:port "
                "(e.g. http://127.0.0.1:8081); leave it empty to turn the registry off"
            )
        port = int(match["port"])
        if port > 65535:
            raise InvalidConfigError(f"schema.registry.listeners: port {port} is out of range (0-65535)")
        found.append((match["scheme"], match["host"].strip("[]"), port))
    return found

"""Dynamic broker configs, Kafka's ``DynamicBrokerConfig``: broker keys changed at runtime.

Kafka keeps broker configs in four layers, highest precedence first::

    DYNAMIC_BROKER_CONFIG (2)          this broker's dynamic set   (ZooKeeper /config/brokers/<id>)
    DYNAMIC_DEFAULT_BROKER_CONFIG (3)  the cluster-wide dynamic set (ZooKeeper /config/brokers/<default>)
    STATIC_BROKER_CONFIG (4)           server.properties and --override
    DEFAULT_CONFIG (5)                 the built-in default

AlterConfigs and IncrementalAlterConfigs on a BROKER resource change one of the two dynamic
sets: the resource name is a broker id for the first, empty for the second. Alone, a broker keeps
both in ``<data-dir>/dynamic-broker-configs.json`` (:class:`FileConfigStore`); in a ZooKeeper
cluster they are Kafka's znodes, written and watched by the cluster layer, which hands in its
own :class:`ConfigStore`. The effective config is the four layers merged, parsed by
:class:`~logstore.broker.config.broker_config.BrokerConfig` as at start; a broker that starts reads its dynamic
sets first, so they survive restarts. In a cluster each broker watches its two znodes and
applies a change made through any broker (the cluster default reaches every broker).

Which keys may change is Kafka 3.7's answer (``DynamicBrokerConfig.AllDynamicConfigs``): the
``log.*`` defaults of topic configs (each topic key's first broker synonym, e.g.
``log.retention.ms`` but not ``log.retention.hours``; ``log.message.format.version`` excluded, as
in Kafka), ``message.max.bytes``, thread counts, the log cleaner's settings, connection limits,
replication throttles, ``producer.id.expiration.ms``, ``metric.reporters`` and the listener
security settings. A key Kafka knows as static (``broker.id``, ``num.partitions``,
``log.dirs``, ...) is refused with Kafka's message, "Cannot update these configs dynamically:
Set(...)"; a key Kafka does not know at all is a custom config, stored and shown (Kafka allows
those too). Departures: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map`` are static here (this broker does not rebind at runtime), and
password keys are refused as Kafka refuses them without ``password.encoder.secret``.

What acts at once: the topic defaults (``log.*``, ``message.max.bytes``, ``compression.type``,
``min.insync.replicas``, ...) reach every topic without its own override at once, as in Kafka.
The other accepted keys are stored and reported; this broker has no thread pools to size, no
SASL listener and no quotas, so they change nothing here (``producer.id.expiration.ms`` is read
at the next start).

Errors: a refused change raises :class:`~logstore.errors.InvalidConfigError` with Kafka's
message; the handlers answer it INVALID_REQUEST, as Kafka's KRaft brokers do (KAFKA-13609).
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from logstore.broker.config.broker_config import (
    _KEYS,
    _LOG_DEFAULTS,
    BROKER_KEY_FAMILIES,
    COARSE_KEY_DEFAULTS,
    TOPIC_SYNONYMS,
    BrokerConfig,
)
from logstore.errors import InvalidConfigError
from logstore.storage.checkpoints import read_json, write_atomically
from logstore.storage.config import CONFIG_KEYS, LogConfig, render_value

_log = logging.getLogger("logstore.broker")

DYNAMIC_BROKER_CONFIG = 2
DYNAMIC_DEFAULT_BROKER_CONFIG = 3
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
DEFAULT_ENTITY = "<default>"  # Kafka's ConfigEntityName.Default
CONFIG_TYPES = {
    "boolean": 1, "string": 2, "version": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7,
    "password": 9,
}  # fmt: skip

# -- which keys may change (Kafka 3.7's DynamicBrokerConfig) -----------------------------------

# The first broker synonym of every topic key (DynamicLogConfig), but the message format.
DYNAMIC_LOG_KEYS = frozenset(TOPIC_SYNONYMS.values()) - {"log.message.format.version"}
THREAD_KEYS = ("num.io.threads", "num.network.threads", "num.replica.fetchers",
               "num.recovery.threads.per.data.dir", "background.threads")  # fmt: skip
_OTHER_DYNAMIC = frozenset({
    # LogCleaner.ReconfigurableConfigs (message.max.bytes is a log key too)
    "log.cleaner.threads", "log.cleaner.dedupe.buffer.size", "log.cleaner.io.buffer.load.factor",
    "log.cleaner.io.buffer.size", "log.cleaner.io.max.bytes.per.second", "log.cleaner.backoff.ms",
    # SocketServer.ReconfigurableConfigs
    "max.connections.per.ip", "max.connections.per.ip.overrides", "max.connections",
    "max.connection.creation.rate",
    # ProducerStateManagerConfig, metrics, remote log, DynamicConfig.Broker
    "producer.id.expiration.ms", "transaction.partition.verification.enable", "metric.reporters",
    "remote.log.index.file.cache.total.size.bytes", "leader.replication.throttled.rate",
    "follower.replication.throttled.rate", "replica.alter.log.dirs.io.max.bytes.per.second",
})  # fmt: skip
# SslConfigs.RECONFIGURABLE_CONFIGS: only with a listener prefix (listener.name.<l>.<key>).
SECURITY_KEYS = frozenset({
    "ssl.keystore.type", "ssl.keystore.location", "ssl.keystore.password", "ssl.key.password",
    "ssl.truststore.type", "ssl.truststore.location", "ssl.truststore.password",
    "ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates",
})  # fmt: skip
# DynamicListenerConfig's SSL and SASL keys: per broker only (not at the cluster default).
LISTENER_KEYS = frozenset({
    "principal.builder.class", "ssl.protocol", "ssl.provider", "ssl.cipher.suites",
    "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
    "ssl.endpoint.identification.algorithm", "ssl.secure.random.implementation", "ssl.client.auth",
    "ssl.engine.factory.class", "sasl.mechanism.inter.broker.protocol", "sasl.jaas.config",
    "sasl.enabled.mechanisms", "sasl.kerberos.service.name", "sasl.kerberos.kinit.cmd",
    "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter",
    "sasl.kerberos.min.time.before.relogin", "sasl.kerberos.principal.to.local.rules",
    "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
    "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
})  # fmt: skip
PASSWORD_KEYS = frozenset({"ssl.keystore.password", "ssl.key.password", "ssl.truststore.password",
                           "ssl.keystore.key", "sasl.jaas.config"})  # fmt: skip
DYNAMIC_KEYS = DYNAMIC_LOG_KEYS | frozenset(THREAD_KEYS) | _OTHER_DYNAMIC | SECURITY_KEYS | LISTENER_KEYS
# Kafka's cluster-level listener keys: allowed at the cluster default too.
_CLUSTER_LEVEL_LISTENER_KEYS = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
PER_BROKER_KEYS = (SECURITY_KEYS | LISTENER_KEYS) - _CLUSTER_LEVEL_LISTENER_KEYS
_LISTENER_PREFIXED = re.compile(r"^listener\.name\.[^.]*\.(.*)$")
# Known to Kafka, static there (or here: no rebinding at runtime).
STATIC_KEYS = (
    frozenset(_KEYS) | frozenset(_LOG_DEFAULTS) | frozenset(COARSE_KEY_DEFAULTS)
    | frozenset({"listeners", "advertised.listeners", "listener.security.protocol.map",
                 "inter.broker.listener.name", "inter.broker.protocol.version", "process.roles",
                 "controller.quorum.voters", "transaction.state.log.replication.factor",
                 "transaction.state.log.min.isr", "transaction.state.log.num.partitions"})
) - DYNAMIC_KEYS  # fmt: skip


def _scala_set(names: Iterable[str]) -> str:
    """Kafka's rendering of a Scala Set in its messages: ``Set(a, b)``."""
    return f"Set({', '.join(sorted(names))})"


_FINE_KEYS = frozenset(name for family in BROKER_KEY_FAMILIES.values() for name in family[:-1])


def key_kind(name: str) -> str:
    """A broker key's type name (``int``, ``list``, ...); ``string`` for custom keys."""
    if name in PASSWORD_KEYS:
        return "password"
    if name in _KEYS:
        return _KEYS[name][0]
    topic_key = _LOG_DEFAULTS.get(name, ("", 1))[0]
    if topic_key in CONFIG_KEYS:
        return CONFIG_KEYS[topic_key].kind if _LOG_DEFAULTS[name][1] == 1 else "long"
    return "string"


def key_default(name: str) -> str | None:
    """A broker key's built-in default as Kafka writes it, or None (no default)."""
    if name in _KEYS:
        default = _KEYS[name][1]
        return None if default is None else render_value(default)
    if name in COARSE_KEY_DEFAULTS:
        return COARSE_KEY_DEFAULTS[name]
    if name in _FINE_KEYS:  # log.retention.ms and the like: null in Kafka, the coarse key has the default
        return None
    topic_key, factor = _LOG_DEFAULTS.get(name, ("", 1))
    if topic_key in CONFIG_KEYS and factor == 1:
        return render_value(CONFIG_KEYS[topic_key].default)
    return None


# -- where the dynamic sets live ------------------------------------------------------------------


class ConfigStore(Protocol):
    """Where the dynamic sets are kept: entity (a broker id or ``<default>``) -> {key: value}."""

    def load(self) -> dict[str, dict[str, str]]: ...

    def save(self, entity: str, props: Mapping[str, str]) -> None: ...


class FileConfigStore:
    """The dynamic sets of a broker alone: ``<data-dir>/dynamic-broker-configs.json``, written
    atomically (tmp, fsync, rename)::

        {"version": 1, "entities": {"<default>": {"log.retention.ms": "60000"}, "0": {...}}}
    """

    FILE = "dynamic-broker-configs.json"

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, self.FILE)
        self._lock = threading.Lock()

    def load(self) -> dict[str, dict[str, str]]:
        data = read_json(self.path, "dynamic broker configs")
        if data is None:
            return {}
        entities = data.get("entities") if isinstance(data, dict) else None
        if not isinstance(entities, dict):
            raise InvalidConfigError(f'{self.path}: no "entities" object')
        return {str(k): {str(n): str(v) for n, v in dict(props).items()} for k, props in entities.items()}

    def save(self, entity: str, props: Mapping[str, str]) -> None:
        with self._lock:
            entities = self.load()
            if props:
                entities[entity] = dict(props)
            else:
                entities.pop(entity, None)
            text = json.dumps({"version": 1, "entities": entities}, indent=1, sort_keys=True)
            write_atomically(self.path, text.encode())


# -- the layers -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ConfigEntry:
    """One described key; ``synonyms`` are (name, value, source), highest precedence first."""

    name: str
    value: str | None
    source: int
    read_only: bool
    synonyms: tuple[tuple[str, str | None, int], ...]
    config_type: int
    documentation: str | None
    sensitive: bool = False


class DynamicBrokerConfig:
    """This broker's config layers (see the module doc): the effective :attr:`config`, changes
    to the two dynamic sets, and their description.

    >>> import tempfile
    >>> dynamic = DynamicBrokerConfig(BrokerConfig.from_dict({}), 0, FileConfigStore(tempfile.mkdtemp()))
    >>> dynamic.alter("", {"log.retention.ms": "60000"}).log_defaults()["retention.ms"]
    '60000'
    >>> dynamic.alter("0", {"num.partitions": "3"})
    Traceback (most recent call last):
    ...
    logstore.errors.InvalidConfigError: Cannot update these configs dynamically: Set(num.partitions)
    """

    def __init__(self, static: BrokerConfig, node_id: int, store: ConfigStore) -> None:
        self.static = static
        self.node_id = node_id
        self.store = store
        self._lock = threading.Lock()
        self.entities: dict[str, dict[str, str]] = {}
        self.config = static
        self.reload()

    def use_store(self, store: ConfigStore) -> None:
        """Keep the dynamic configs in ``store`` from now on (a cluster's ZooKeeper)."""
        self.store = store

    def reload(self) -> BrokerConfig:
        """Read the dynamic sets again (at start, or when another broker changed them); a set
        that no longer parses is left out with a warning, as Kafka does."""
        entities = self.store.load()
        mine = {k: v for k, v in entities.items() if k in (DEFAULT_ENTITY, str(self.node_id))}
        with self._lock:
            try:
                config = self._merge(mine)
            except InvalidConfigError as e:
                _log.warning("dynamic broker configs ignored (%s): %s", e, mine)
                mine, config = {}, self.static
            self.entities = mine
            self.config = config
        return config

    def entity(self, resource_name: str) -> str:
        """The dynamic set a BROKER resource name names: ``<default>`` for "", else the id."""
        return DEFAULT_ENTITY if resource_name == "" else str(int(resource_name))

    def props(self, resource_name: str) -> dict[str, str]:
        """A copy of the dynamic set ``resource_name`` names (empty when none is set)."""
        return dict(self.entities.get(self.entity(resource_name), {}))

    def _merge(self, entities: Mapping[str, Mapping[str, str]]) -> BrokerConfig:
        raw = dict(self.static.raw)
        raw.update(entities.get(DEFAULT_ENTITY, {}))
        raw.update(entities.get(str(self.node_id), {}))
        return BrokerConfig.from_dict(raw)

    def validate(self, resource_name: str, props: Mapping[str, str]) -> BrokerConfig:
        """The effective config if ``props`` became the named dynamic set; InvalidConfigError
        with Kafka's message if it may not."""
        per_broker = resource_name != ""
        names = set(props)
        static = {n for n in names if n in STATIC_KEYS}
        if static:
            raise InvalidConfigError(f"Cannot update these configs dynamically: {_scala_set(static)}")
        unprefixed = names & SECURITY_KEYS
        if unprefixed:
            raise InvalidConfigError(
                "These security configs can be dynamically updated only per-listener using the "
                f"listener prefix: {_scala_set(unprefixed)}"
            )
        if not per_broker:
            only_per_broker = {n for n in names if n in PER_BROKER_KEYS or self._per_broker_listener_key(n)}
            if only_per_broker:
                raise InvalidConfigError(
                    "Cannot update these configs at default cluster level, broker id must be "
                    f"specified: {_scala_set(only_per_broker)}"
                )
        if any(self._base_name(n) in PASSWORD_KEYS for n in names):
            # Kafka encrypts dynamic passwords with password.encoder.secret; there is none here.
            raise InvalidConfigError("Password encoder secret not configured")
        entities = {k: dict(v) for k, v in self.entities.items()}
        entities[self.entity(resource_name)] = dict(props)
        new = self._merge(entities)
        self._check_thread_counts(new)
        return new

    @staticmethod
    def _base_name(name: str) -> str:
        match = _LISTENER_PREFIXED.match(name)
        return match[1] if match else name

    @staticmethod
    def _per_broker_listener_key(name: str) -> bool:
        match = _LISTENER_PREFIXED.match(name)
        return match is not None and match[1] not in _CLUSTER_LEVEL_LISTENER_KEYS

    def _check_thread_counts(self, new: BrokerConfig) -> None:
        """Kafka's DynamicThreadPool rule: a thread count moves to at least half and at most
        double the current one."""
        for name in THREAD_KEYS:
            old, value = int(self.config.values[name]), int(new.values[name])
            if value == old:
                continue
            failed = f"Dynamic thread count update validation failed for {name}={value}"
            if value < old / 2:
                raise InvalidConfigError(f"{failed}, value should be at least half the current value {old}")
            if value > old * 2:
                raise InvalidConfigError(
                    f"{failed}, value should not be greater than double the current value {old}"
                )

    def alter(
        self, resource_name: str, props: Mapping[str, str], validate_only: bool = False
    ) -> BrokerConfig:
        """Make ``props`` the named dynamic set (checked, persisted); returns the new effective
        config (unchanged when ``validate_only``)."""
        with self._lock:
            new = self.validate(resource_name, props)
            if validate_only:
                return self.config
            entity = self.entity(resource_name)
            self.store.save(entity, {k: str(v) for k, v in props.items()})
            if props:
                self.entities[entity] = dict(props)
            else:
                self.entities.pop(entity, None)
            self.config = new
        _log.info("dynamic broker config %s is now %s", entity, dict(props) or "empty")
        return new

    # -- describing --------------------------------------------------------------------------

    def layers(self, per_broker: bool = True) -> list[tuple[int, Mapping[str, Any]]]:
        """(source, raw keys) of each layer that may set a key, highest precedence first."""
        result: list[tuple[int, Mapping[str, Any]]] = []
        if per_broker:
            result.append((DYNAMIC_BROKER_CONFIG, self.entities.get(str(self.node_id), {})))
        result.append((DYNAMIC_DEFAULT_BROKER_CONFIG, self.entities.get(DEFAULT_ENTITY, {})))
        result.append((STATIC_BROKER_CONFIG, self.static.raw))
        return result

    def topic_layers(self) -> list[tuple[int, dict[str, Any]]]:
        """(source, topic defaults that layer sets, in topic keys and units), highest first:
        the broker synonyms of a topic key, for DescribeConfigs of a topic."""
        result = []
        for source, raw in self.layers():
            known = {k: v for k, v in raw.items() if k in _LOG_DEFAULTS or k in _KEYS}
            try:
                result.append((source, dict(BrokerConfig.from_dict(known).log_values)))
            except InvalidConfigError:  # a layer alone may not parse (a listener pair): skip it
                continue
        return result

    def _names(self) -> list[str]:
        names = set(_KEYS) | set(_LOG_DEFAULTS) | set(COARSE_KEY_DEFAULTS)
        for props in self.entities.values():
            names |= set(props)
        return sorted(names)

    def _value(self, name: str) -> str | None:
        config = self.config
        if name in _LOG_DEFAULTS and _LOG_DEFAULTS[name][1] == 1 and name not in _KEYS:
            topic_key = _LOG_DEFAULTS[name][0]
            effective = LogConfig.from_dict({}, defaults=config.log_defaults()).values[topic_key]
            return render_value(effective)
        if name in _KEYS:
            value = config.values[name]
            return None if value is None else render_value(value)
        for _, raw in self.layers():
            if name in raw:
                return str(raw[name])
        return key_default(name)

    def entry(self, name: str, per_broker: bool = True) -> ConfigEntry:
        """One broker key described: its value, source, synonyms, read-only flag and type."""
        synonyms: list[tuple[str, str | None, int]] = []
        sensitive = self._base_name(name) in PASSWORD_KEYS
        for synonym in BROKER_KEY_FAMILIES.get(name, (name,)):
            for source, raw in self.layers(per_broker):
                if synonym in raw:
                    synonyms.append((synonym, None if sensitive else str(raw[synonym]), source))
        for synonym in BROKER_KEY_FAMILIES.get(name, (name,)):
            default = key_default(synonym)
            if default is not None:
                synonyms.append((synonym, default, DEFAULT_CONFIG))
                break
        topic_key = _LOG_DEFAULTS.get(name, ("",))[0]
        doc = CONFIG_KEYS[topic_key].doc if topic_key in CONFIG_KEYS else None
        if sensitive:
            value = None
        elif not per_broker and synonyms and synonyms[0][2] == DYNAMIC_DEFAULT_BROKER_CONFIG:
            value = synonyms[0][1]  # the cluster default's own value, as Kafka lists it
        else:
            value = self._value(name)
        return ConfigEntry(
            name,
            value,
            synonyms[0][2] if synonyms else DEFAULT_CONFIG,
            name not in DYNAMIC_KEYS,
            tuple(synonyms),
            CONFIG_TYPES.get(key_kind(name), 0),
            doc or None,
            sensitive,
        )

    def describe(self, resource_name: str) -> list[ConfigEntry]:
        """DescribeConfigs of a BROKER resource: every key for this broker's id; for "" (the
        cluster default) only the keys set there, as Kafka answers."""
        if resource_name == "":
            names = sorted(self.entities.get(DEFAULT_ENTITY, {}))
            return [self.entry(name, per_broker=False) for name in names]
        return [self.entry(name) for name in self._names()]


# -- applying a change to a broker ----------------------------------------------------------------


class _BrokerLike(Protocol):
    """What :func:`alter_broker_config` needs of a Broker."""

    @property
    def dynamic_config(self) -> DynamicBrokerConfig: ...

    def use_config(self, new: BrokerConfig) -> None:
        """Make ``new`` the broker's config (changed log defaults reach every topic)."""
        ...


def alter_broker_config(
    broker: _BrokerLike, resource_name: str, props: Mapping[str, str], validate_only: bool
) -> None:
    """Make ``props`` the dynamic set of a BROKER resource (our id or "") and apply the result:
    the broker's config is the new effective one, and changed log defaults reach every topic.
    InvalidConfigError (Kafka's message) when refused; nothing changes then."""
    new = broker.dynamic_config.alter(resource_name, props, validate_only)
    if not validate_only:
        broker.use_config(new)

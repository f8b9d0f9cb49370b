"""DescribeConfigs (key 32): the configs of topics (resource type 2) and of this broker (4).

A topic lists every topic key (``LogConfig``) with its effective value. Its
source is DYNAMIC_TOPIC_CONFIG (1) when the topic overrides the key,
STATIC_BROKER_CONFIG (4) when ``server.properties`` sets the broker synonym
(``log.retention.ms`` for ``retention.ms``; Kafka's ServerTopicConfigSynonyms),
else DEFAULT_CONFIG (5); topic keys are never read-only. Synonyms (when
asked for) follow Kafka's order: the topic override, the static broker key,
the default. The broker key of a synonym is always Kafka's first synonym and
its value is in the topic's unit (``log.retention.ms=3600000`` also when
``log.retention.hours=1`` set it).

The broker resource lists ``BrokerConfig.describe()``: every key is
read-only (this broker has no dynamic configs), STATIC_BROKER_CONFIG when its
value differs from the default, else DEFAULT_CONFIG; an unset key has a null
value. As in Kafka, the resource name must be our node id or empty (the
cluster-wide dynamic defaults: none here, so no entries); any other name is
INVALID_REQUEST. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal
topic name INVALID_TOPIC_EXCEPTION, other resource types INVALID_REQUEST.
Nothing is sensitive. ``configuration_keys`` null or empty means every key.
v3+ adds each key's type and, when asked for, its documentation. v0 (no
config sources) is not in kio, so v1 is the floor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.config import _KEYS as _BROKER_KEYS
from logstore.broker.config import BrokerConfig
from logstore.broker.server import Broker, RequestContext
from logstore.errors import InvalidArgumentError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.storage.config import CONFIG_KEYS, LogConfig, render_value
from logstore.storage.manager import validate_topic_name

TOPIC = 2
BROKER = 4
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5
# DescribeConfigsResponse.ConfigType ids.
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "long": 5, "double": 6, "list": 7}

# Each topic key's first broker synonym (Kafka's ServerTopicConfigSynonyms).
BROKER_SYNONYMS = {
    "cleanup.policy": "log.cleanup.policy",
    "compression.type": "compression.type",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "file.delete.delay.ms": "log.segment.delete.delay.ms",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "index.interval.bytes": "log.index.interval.bytes",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "max.message.bytes": "message.max.bytes",
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
_TOPIC_OF_BROKER_KEY = {broker_key: topic_key for topic_key, broker_key in BROKER_SYNONYMS.items()}


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


def topic_entries(broker: Broker, config: LogConfig) -> list[ConfigEntry]:
    """Every topic key of ``config`` with its source and synonyms, sorted by name."""
    static = broker.config.log_values
    broker_layer = LogConfig.from_dict({}, defaults=config.defaults)
    entries = []
    for name in sorted(CONFIG_KEYS):
        key = CONFIG_KEYS[name]
        synonym = BROKER_SYNONYMS.get(name, name)
        synonyms: list[tuple[str, str | None, int]] = []
        if name in config.overrides:
            synonyms.append((name, render_value(config.values[name]), DYNAMIC_TOPIC_CONFIG))
        if name in static:
            synonyms.append((synonym, render_value(broker_layer.values[name]), STATIC_BROKER_CONFIG))
        synonyms.append((synonym, render_value(key.default), DEFAULT_CONFIG))
        entries.append(
            ConfigEntry(
                name,
                render_value(config.values[name]),
                synonyms[0][2],
                False,
                tuple(synonyms),
                CONFIG_TYPES.get(key.kind, 0),
                key.doc or None,
            )
        )
    return entries


@functools.cache
def _broker_defaults() -> dict[str, str]:
    return BrokerConfig.from_dict({}).describe()


def broker_entries(broker: Broker) -> list[ConfigEntry]:
    """Every key of ``BrokerConfig.describe()``, read-only, sorted by name."""
    defaults = _broker_defaults()
    entries = []
    for name, text in sorted(broker.config.describe().items()):
        value = text or None
        default = defaults.get(name) or None
        synonyms: list[tuple[str, str | None, int]] = []
        if name not in defaults or value != default:
            synonyms.append((name, value, STATIC_BROKER_CONFIG))
        if default is not None:
            synonyms.append((name, default, DEFAULT_CONFIG))
        topic_key = CONFIG_KEYS.get(_TOPIC_OF_BROKER_KEY.get(name, ""))
        kind = _BROKER_KEYS[name][0] if name in _BROKER_KEYS else topic_key.kind if topic_key else ""
        entries.append(
            ConfigEntry(
                name,
                value,
                synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                True,
                tuple(synonyms),
                CONFIG_TYPES.get(kind, 0),
                topic_key.doc if topic_key else None,
            )
        )
    return entries


def broker_resource_error(broker: Broker, name: str) -> tuple[ErrorCode, str | None]:
    """NONE if a BROKER resource name is ours ("" is the cluster default), else why not."""
    if name == "":
        return ErrorCode.none, None
    try:
        node = int(name)
    except ValueError:
        return ErrorCode.invalid_request, f"Broker id must be an integer, but it is: {name}"
    if node != broker.node_id:
        return (
            ErrorCode.invalid_request,
            f"Unexpected broker id, expected {broker.node_id} or empty string, but received {name}",
        )
    return ErrorCode.none, None


def topic_resource_error(broker: Broker, name: str) -> tuple[ErrorCode, str | None]:
    """NONE if the TOPIC resource exists, else INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION."""
    try:
        validate_topic_name(name)
    except InvalidArgumentError as e:
        return ErrorCode.invalid_topic_exception, str(e)
    if not broker.metadata.has_topic(name):
        return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist."
    return ErrorCode.none, None


def _describe(broker: Broker, resource: Any) -> tuple[ErrorCode, str | None, list[ConfigEntry]]:
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        error, message = topic_resource_error(broker, name)
        if error != ErrorCode.none:
            return error, message, []
        return ErrorCode.none, None, topic_entries(broker, broker.metadata.topic_config(name))
    if resource.resource_type == BROKER:
        error, message = broker_resource_error(broker, name)
        if error != ErrorCode.none or name == "":
            return error, message, []
        return ErrorCode.none, None, broker_entries(broker)
    return ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}", []


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(32, ctx.version).response_module
    synonyms_wanted = request.include_synonyms
    docs_wanted = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        error, message, entries = _describe(ctx.broker, resource)
        keys = resource.configuration_keys
        if keys:
            entries = [entry for entry in entries if entry.name in keys]
        configs = tuple(
            build(
                module.DescribeConfigsResourceResult,
                name=entry.name,
                value=entry.value,
                read_only=entry.read_only,
                config_source=entry.source,
                is_sensitive=False,
                synonyms=tuple(
                    build(module.DescribeConfigsSynonym, name=name, value=value, source=source)
                    for name, value, source in (entry.synonyms if synonyms_wanted else ())
                ),
                config_type=entry.config_type,
                documentation=entry.documentation if docs_wanted else None,
            )
            for entry in entries
        )
        results.append(
            build(
                module.DescribeConfigsResult,
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return build(module.DescribeConfigsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


API = Api(key=32, name="DescribeConfigs", min_version=1, max_version=4, handle=handle)

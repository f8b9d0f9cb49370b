"""DescribeConfigs (key 32): the configs of topics (resource type 2) and of brokers (4).

A topic lists every topic key (``LogConfig``, and the legacy keys Kafka 3.x still shows:
``message.format.version``, ``message.downconversion.enable``, see legacy_topic_configs.py) with
its effective value. Its source is DYNAMIC_TOPIC_CONFIG (1) when the topic overrides the key,
else the highest broker layer that sets the broker synonym (``log.retention.ms`` for
``retention.ms``; Kafka's ServerTopicConfigSynonyms): DYNAMIC_BROKER_CONFIG (2),
DYNAMIC_DEFAULT_BROKER_CONFIG (3) or STATIC_BROKER_CONFIG (4), else DEFAULT_CONFIG (5); topic
keys are never read-only. Synonyms (when asked for) follow Kafka's order: the topic override,
then the broker layers, then the default. The broker key of a synonym is always Kafka's first
synonym and its value is in the topic's unit (``log.retention.ms=3600000`` also when
``log.retention.hours=1`` set it).

A broker resource named by our node id lists every broker key (dynamic_config.py): its value,
the source of the layer that sets it, its synonyms (``log.retention.ms`` has
``log.retention.minutes`` and ``log.retention.hours``), and ``read_only`` unless Kafka lets it
change at runtime; password keys are sensitive (null values). The empty name is the cluster-wide
dynamic default: only the keys set there, as in Kafka. Any other name is INVALID_REQUEST. An
unknown topic is UNKNOWN_TOPIC_OR_PARTITION, an illegal topic name INVALID_TOPIC_EXCEPTION, other
resource types INVALID_REQUEST. ``configuration_keys`` null or empty means every key. v3+ adds
each key's type and, when asked for, its documentation. v0 (no config sources) is not in kio, so
v1 is the floor.

With an authorizer (security/operations.py): DESCRIBE_CONFIGS on the topic, the
cluster (BROKER, BROKER_LOGGER) or the group, else TOPIC_, CLUSTER_ or
GROUP_AUTHORIZATION_FAILED for that resource.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.config.broker_config import TOPIC_SYNONYMS
from logstore.broker.config.dynamic_config import CONFIG_TYPES, DEFAULT_CONFIG, ConfigEntry
from logstore.broker.config.group_config_resources import describe_group_resource
from logstore.broker.config.legacy_topic_configs import LEGACY_TOPIC_KEYS
from logstore.broker.context import RequestContext, Services
from logstore.errors import InvalidArgumentError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.storage.config import CONFIG_KEYS, LogConfig, render_value
from logstore.storage.store import validate_topic_name

TOPIC = 2
BROKER = 4
DYNAMIC_TOPIC_CONFIG = 1

# Each topic key's first broker synonym (Kafka's ServerTopicConfigSynonyms).
BROKER_SYNONYMS = TOPIC_SYNONYMS


def _legacy_entry(broker: Services, name: str, legacy: dict[str, str]) -> ConfigEntry:
    key = LEGACY_TOPIC_KEYS[name]
    synonyms: list[tuple[str, str | None, int]] = []
    if name in legacy:
        synonyms.append((name, legacy[name], DYNAMIC_TOPIC_CONFIG))
    for source, raw in broker.dynamic_config.layers():
        if key.broker_key in raw:
            synonyms.append((key.broker_key, key.normalized(str(raw[key.broker_key])), source))
    synonyms.append((key.broker_key, key.default, DEFAULT_CONFIG))
    return ConfigEntry(
        name, synonyms[0][1], synonyms[0][2], False, tuple(synonyms), CONFIG_TYPES[key.kind], key.doc
    )


def topic_entries(
    broker: Services, config: LogConfig, legacy: dict[str, str] | None = None
) -> list[ConfigEntry]:
    """Every topic key of ``config`` (and the legacy keys, ``legacy`` the topic's own values)
    with its source and synonyms, sorted by name."""
    layers = [
        (source, LogConfig.from_dict({}, defaults=values).values, set(values))
        for source, values in broker.dynamic_config.topic_layers()
    ]
    entries = []
    for name in sorted(set(CONFIG_KEYS) | set(LEGACY_TOPIC_KEYS)):
        if name in LEGACY_TOPIC_KEYS:
            entries.append(_legacy_entry(broker, name, legacy or {}))
            continue
        key = CONFIG_KEYS[name]
        synonym = BROKER_SYNONYMS.get(name, name)
        synonyms: list[tuple[str, str | None, int]] = []
        if name in config.overrides:
            synonyms.append((name, render_value(config.values[name]), DYNAMIC_TOPIC_CONFIG))
        for source, values, keys in layers:
            if name in keys:
                synonyms.append((synonym, render_value(values[name]), source))
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


def broker_entries(broker: Services, name: str) -> list[ConfigEntry]:
    """The keys of a BROKER resource (our id: every key; "": the cluster default's), by name."""
    return broker.dynamic_config.describe(name)


def legacy_values(broker: Services, topic: str) -> dict[str, str]:
    """The legacy keys ``topic`` sets (message.format.version, ...)."""
    return broker.legacy_topic_configs.get(broker.metadata.topic_id(topic))


def broker_resource_error(broker: Services, name: str) -> tuple[ErrorCode, str | None]:
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


def topic_resource_error(broker: Services, name: str) -> tuple[ErrorCode, str | None]:
    """NONE if the TOPIC resource exists, else INVALID_TOPIC_EXCEPTION or UNKNOWN_TOPIC_OR_PARTITION."""
    try:
        validate_topic_name(name)
    except InvalidArgumentError as e:
        return ErrorCode.invalid_topic_exception, str(e)
    if not broker.metadata.has_topic(name):
        return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist."
    return ErrorCode.none, None


def _describe(broker: Services, resource: Any) -> tuple[ErrorCode, str | None, list[ConfigEntry]]:
    name = resource.resource_name
    if resource.resource_type == TOPIC:
        error, message = topic_resource_error(broker, name)
        if error != ErrorCode.none:
            return error, message, []
        config = broker.metadata.topic_config(name)
        return ErrorCode.none, None, topic_entries(broker, config, legacy_values(broker, name))
    if resource.resource_type == BROKER:
        error, message = broker_resource_error(broker, name)
        if error != ErrorCode.none:
            return error, message, []
        return ErrorCode.none, None, broker_entries(broker, name)
    if resource.resource_type == 32:  # GROUP (KIP-848): logstore/broker/config/group_config_resources.py
        return describe_group_resource(broker, name)
    return ErrorCode.invalid_request, f"Unsupported resource type: {resource.resource_type}", []


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(32, ctx.version).response_module
    synonyms_wanted = request.include_synonyms
    docs_wanted = getattr(request, "include_documentation", False)
    results = []
    for resource in request.resources:
        denied = operations.config_resource_denied(ctx, resource.resource_type, resource.resource_name)
        described: tuple[ErrorCode, str | None, list[Any]] = (
            (denied[0], denied[1], []) if denied is not None else _describe(ctx.broker, resource)
        )
        error, message, entries = described
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
                is_sensitive=entry.sensitive,
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

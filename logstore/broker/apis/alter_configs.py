"""AlterConfigs (key 33): Kafka's legacy config change, which replaces a resource's whole set.

For a TOPIC the given keys become the topic's overrides and every key left
out returns to its default (Kafka's semantics for this API; clients that
want to change one key use IncrementalAlterConfigs). The new set is checked
whole (an unknown key or bad value is INVALID_CONFIG with the reason, a null
value INVALID_CONFIG as in Kafka), then persisted through the Store, so it
survives a restart; ``validate_only`` checks and changes nothing. The legacy
keys Kafka 3.x accepts and ignores (``message.format.version``,
``message.downconversion.enable``; legacy_topic_configs.py) are checked and
kept beside them. An unknown topic is UNKNOWN_TOPIC_OR_PARTITION.

For a BROKER (our node id, or "" for the cluster-wide default) the given keys
become that dynamic set (dynamic_config.py; null values are dropped, as Kafka
drops them): keys Kafka lets change at runtime are stored, persisted and
applied, a static key is INVALID_REQUEST "Cannot update these configs
dynamically: Set(...)" (Kafka's KRaft answer), as is a bad value. Another
broker id is INVALID_REQUEST, as is any other resource type, and a resource
named twice in one request ("Duplicate resource.").

With an authorizer (security/operations.py, for this API and IncrementalAlterConfigs):
ALTER_CONFIGS on the topic, the cluster (BROKER, BROKER_LOGGER) or the group, else
TOPIC_, CLUSTER_ or GROUP_AUTHORIZATION_FAILED for that resource.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.describe_configs import (
    BROKER,
    TOPIC,
    broker_resource_error,
    topic_resource_error,
)
from logstore.broker.config.dynamic_config import alter_broker_config
from logstore.broker.config.group_config_resources import alter_group_resource
from logstore.broker.config.legacy_topic_configs import checked, split
from logstore.broker.context import RequestContext, Services
from logstore.errors import InvalidConfigError, LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for
from logstore.security import operations

Outcome = tuple[ErrorCode, str | None]


def duplicates(resources: Any) -> set[tuple[int, str]]:
    """The (type, name) pairs a request names more than once."""
    counts = Counter((resource.resource_type, resource.resource_name) for resource in resources)
    return {key for key, count in counts.items() if count > 1}


def null_values_error(keys: list[str]) -> Outcome:
    return ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(keys)}"


def set_topic_overrides(
    broker: Services, name: str, overrides: Mapping[str, Any], validate_only: bool
) -> Outcome:
    """Check ``overrides`` as the topic's whole set (legacy keys included), and install it
    unless ``validate_only``: the Store's keys through the controller, the legacy ones beside."""
    regular, legacy = split(overrides)
    try:
        legacy = checked(legacy, "" if validate_only else name)
        if validate_only:
            broker.metadata.topic_config(name).with_overrides_replaced(regular)
            return ErrorCode.none, None
        broker.controller.set_topic_overrides(name, regular)
        set_legacy(broker, name, legacy)
    except InvalidConfigError as e:
        return ErrorCode.invalid_config, str(e)
    except (LogstoreError, OSError) as e:
        return error_for(e), str(e)
    return ErrorCode.none, None


def set_legacy(broker: Services, name: str, legacy: Mapping[str, str]) -> None:
    """Make ``legacy`` the legacy keys of topic ``name`` (persisted by topic ID)."""
    metadata = broker.metadata
    live = {metadata.topic_id(topic) for topic in metadata.topic_names()}
    broker.legacy_topic_configs.set(metadata.topic_id(name), name, legacy, live)


def legacy_of(broker: Services, name: str) -> dict[str, str]:
    """The legacy keys topic ``name`` sets."""
    return broker.legacy_topic_configs.get(broker.metadata.topic_id(name))


def alter_broker(broker: Services, name: str, props: Mapping[str, str], validate_only: bool) -> Outcome:
    """Make ``props`` the dynamic set of BROKER resource ``name``: NONE, or why not."""
    error, message = broker_resource_error(broker, name)
    if error != ErrorCode.none:
        return error, message
    try:
        alter_broker_config(broker, name, props, validate_only)
    except InvalidConfigError as e:
        return ErrorCode.invalid_request, str(e)
    except (LogstoreError, OSError) as e:
        return error_for(e), str(e)
    return ErrorCode.none, None


def unsupported_type(resource_type: int) -> Outcome:
    return ErrorCode.invalid_request, f"Unexpected resource type {resource_type}."


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    broker = ctx.broker
    name = resource.resource_name
    if resource.resource_type == BROKER:
        props = {config.name: config.value for config in resource.configs if config.value is not None}
        return alter_broker(broker, name, props, validate_only)
    if resource.resource_type == 32:  # GROUP (KIP-848): logstore/broker/config/group_config_resources.py
        return alter_group_resource(broker, name, resource.configs, validate_only)
    if resource.resource_type != TOPIC:
        return unsupported_type(resource.resource_type)
    error, message = topic_resource_error(broker, name)
    if error != ErrorCode.none:
        return error, message
    nulls = [config.name for config in resource.configs if config.value is None]
    if nulls:
        return null_values_error(nulls)
    overrides = {config.name: config.value for config in resource.configs}
    return set_topic_overrides(broker, name, overrides, validate_only)


def outcomes(resources: Any, alter: Callable[[Any], Outcome]) -> list[tuple[Any, ErrorCode, str | None]]:
    """(resource, error, message) per resource; a resource named twice is one INVALID_REQUEST."""
    repeated = duplicates(resources)
    reported: set[tuple[int, str]] = set()
    result: list[tuple[Any, ErrorCode, str | None]] = []
    for resource in resources:
        key = (resource.resource_type, resource.resource_name)
        if key in repeated:
            if key not in reported:
                reported.add(key)
                result.append((resource, ErrorCode.invalid_request, "Duplicate resource."))
            continue
        result.append((resource, *alter(resource)))
    return result


def _authorized(ctx: RequestContext, alter: Callable[[Any], Outcome]) -> Callable[[Any], Outcome]:
    """``alter`` behind the ALTER_CONFIGS check of the resource (security/operations.py)."""
    if ctx.broker.authorizer is None:
        return alter

    def checked(resource: Any) -> Outcome:
        denied = operations.config_resource_denied(ctx, resource.resource_type, resource.resource_name)
        return denied if denied is not None else alter(resource)

    return checked


def respond(
    ctx: RequestContext, request: Any, api_key: int, response_class: str, alter: Callable[[Any], Outcome]
) -> Any:
    """The response of AlterConfigs or IncrementalAlterConfigs: one entry per resource."""
    module = codec(api_key, ctx.version).response_module
    responses = tuple(
        build(
            module.AlterConfigsResourceResponse,
            error_code=error,
            error_message=message,
            resource_type=resource.resource_type,
            resource_name=resource.resource_name,
        )
        for resource, error, message in outcomes(request.resources, _authorized(ctx, alter))
    )
    return build(getattr(module, response_class), throttle_time=NO_THROTTLE, responses=responses)


async def handle(ctx: RequestContext, request: Any) -> Any:
    return respond(
        ctx,
        request,
        33,
        "AlterConfigsResponse",
        lambda resource: _alter(ctx, resource, request.validate_only),
    )


API = Api(key=33, name="AlterConfigs", min_version=0, max_version=2, handle=handle)

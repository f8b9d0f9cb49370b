"""AlterConfigs (key 33): Kafka's legacy config change, which replaces a resource's whole set.

For a TOPIC the given keys become the topic's overrides and every key left
out returns to its default (Kafka's semantics for this API; clients that
want to change one key use IncrementalAlterConfigs). The new set is checked
whole (an unknown key or bad value is INVALID_CONFIG with the reason, a null
value INVALID_CONFIG as in Kafka), then persisted through the Store, so it
survives a restart; ``validate_only`` checks and changes nothing. An unknown
topic is UNKNOWN_TOPIC_OR_PARTITION.

This broker has no dynamic broker configs: a BROKER resource (our node id,
or "" for the cluster default) with any key is INVALID_REQUEST, "Cannot
update these configs dynamically" (Kafka's answer for a static key); with no
keys there is nothing to change and it succeeds. Another broker id is
INVALID_REQUEST, as is any other resource type, and a resource named twice
in one request ("Duplicate resource.").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.apis.describe_configs import (
    BROKER,
    TOPIC,
    broker_resource_error,
    topic_resource_error,
)
from logstore.broker.server import Broker, RequestContext
from logstore.errors import InvalidConfigError, LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for

Outcome = tuple[ErrorCode, str | None]


def duplicates(resources: Any) -> set[tuple[int, str]]:
    """The (type, name) pairs a request names more than once."""
    counts = Counter((resource.resource_type, resource.resource_name) for resource in resources)
    return {key for key, count in counts.items() if count > 1}


def null_values_error(keys: list[str]) -> Outcome:
    return ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(keys)}"


def set_topic_overrides(
    broker: Broker, name: str, overrides: Mapping[str, Any], validate_only: bool
) -> Outcome:
    """Check ``overrides`` as the topic's whole set, and install it unless ``validate_only``."""
    try:
        if validate_only:
            broker.metadata.topic_config(name).with_overrides_replaced(overrides)
        else:
            broker.controller.set_topic_overrides(name, overrides)
    except InvalidConfigError as e:
        return ErrorCode.invalid_config, str(e)
    except (LogstoreError, OSError) as e:
        return error_for(e), str(e)
    return ErrorCode.none, None


def broker_change_error(broker: Broker, name: str, keys: list[str]) -> Outcome:
    """Why a change to a BROKER resource is refused (NONE when it changes nothing)."""
    error, message = broker_resource_error(broker, name)
    if error != ErrorCode.none or not keys:
        return error, message
    return (
        ErrorCode.invalid_request,
        f"Cannot update these configs dynamically: {sorted(set(keys))} "
        "(this broker has no dynamic configs: set them in server.properties and restart)",
    )


def unsupported_type(resource_type: int) -> Outcome:
    return ErrorCode.invalid_request, f"Unexpected resource type {resource_type}."


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    broker = ctx.broker
    name = resource.resource_name
    if resource.resource_type == BROKER:
        return broker_change_error(broker, name, [config.name for config in resource.configs])
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
        for resource, error, message in outcomes(request.resources, alter)
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

"""IncrementalAlterConfigs (key 44): change single config keys of a topic or a broker.

Operations, per key: SET (0) gives it a value, DELETE (1) drops the override so the layer
below applies again, APPEND (2) and SUBTRACT (3) add or remove comma-separated items of a list
key (``cleanup.policy``, ``log.cleanup.policy``, ``sasl.enabled.mechanisms``, ...; any other key
is INVALID_CONFIG "its type is not LIST", as in Kafka). A key named twice in one resource or an
unknown operation is INVALID_REQUEST.

TOPIC: APPEND and SUBTRACT start from the key's current effective value (Kafka starts from the
override, else the key's built-in default, ignoring a broker-level ``log.*`` setting; we take
that setting into account). The resulting set of overrides is checked whole (unknown key, bad
value, a null value for SET/APPEND/SUBTRACT: INVALID_CONFIG with the reason) and then persisted
through the Store; the legacy keys (``message.format.version``, ...) are checked and kept beside
them. ``validate_only`` checks and changes nothing.

BROKER (our node id, or "" for the cluster-wide default): the operations apply to that dynamic
set (dynamic_config.py), APPEND and SUBTRACT starting from the set's value, else the key's
built-in default, as Kafka does; the result is then checked, persisted and applied as
AlterConfigs does (a static key: INVALID_REQUEST "Cannot update these configs dynamically").
Other resource types and duplicate resources are answered as AlterConfigs answers them.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.alter_configs import (
    Outcome,
    alter_broker,
    legacy_of,
    null_values_error,
    respond,
    set_topic_overrides,
    unsupported_type,
)
from logstore.broker.apis.describe_configs import BROKER, TOPIC, broker_resource_error, topic_resource_error
from logstore.broker.config.dynamic_config import key_default, key_kind
from logstore.broker.config.group_config_resources import incremental_alter_group_resource
from logstore.broker.config.legacy_topic_configs import LEGACY_TOPIC_KEYS
from logstore.broker.context import RequestContext, Services
from logstore.storage.config import CONFIG_KEYS

SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}


def _apply(overrides: dict[str, Any], current: Any, change: Any) -> Outcome:
    """Apply one operation to ``overrides`` in place; ``current`` is the key's effective value."""
    name, op, value = change.name, change.config_operation, change.value
    if op == DELETE:
        overrides.pop(name, None)
        return ErrorCode.none, None
    if value is None:
        return null_values_error([name])
    if op == SET:
        overrides[name] = value
        return ErrorCode.none, None
    key = CONFIG_KEYS.get(name)
    if key is None and name not in LEGACY_TOPIC_KEYS:
        return ErrorCode.invalid_config, f"unknown topic config {name!r}"
    if key is None or key.kind != "list":
        return ErrorCode.invalid_config, f"Can't {_NAMES[op]} to key {name} because its type is not LIST."
    items = list(overrides.get(name, current))  # a parsed tuple: each key comes once per resource
    for item in (part.strip() for part in value.split(",")):
        if op == APPEND and item and item not in items:
            items.append(item)
        elif op == SUBTRACT and item in items:
            items.remove(item)
    overrides[name] = ",".join(items)
    return ErrorCode.none, None


def _alter(ctx: RequestContext, resource: Any, validate_only: bool) -> Outcome:
    broker = ctx.broker
    name = resource.resource_name
    changes = resource.configs
    repeated = sorted(key for key, count in Counter(c.name for c in changes).items() if count > 1)
    if repeated:
        return ErrorCode.invalid_request, f"Error due to duplicate config keys: {', '.join(repeated)}"
    unknown_ops = sorted({c.config_operation for c in changes} - set(_NAMES))
    if unknown_ops:
        return ErrorCode.invalid_request, f"Unknown alter config operation type {unknown_ops[0]}"
    if resource.resource_type == BROKER:
        return _alter_broker(broker, name, changes, validate_only)
    if resource.resource_type == 32:  # GROUP (KIP-848): logstore/broker/config/group_config_resources.py
        return incremental_alter_group_resource(broker, name, changes, validate_only)
    if resource.resource_type != TOPIC:
        return unsupported_type(resource.resource_type)
    error, message = topic_resource_error(broker, name)
    if error != ErrorCode.none:
        return error, message
    config = broker.metadata.topic_config(name)
    overrides: dict[str, Any] = {**config.overrides, **legacy_of(broker, name)}
    for change in changes:
        error, message = _apply(overrides, config.values.get(change.name, ()), change)
        if error != ErrorCode.none:
            return error, message
    return set_topic_overrides(broker, name, overrides, validate_only)


def _alter_broker(broker: Services, name: str, changes: Any, validate_only: bool) -> Outcome:
    """Apply the operations to the dynamic set of BROKER resource ``name``, then install it."""
    error, message = broker_resource_error(broker, name)
    if error != ErrorCode.none:
        return error, message
    props = broker.dynamic_config.props(name)
    for change in changes:
        key, op, value = change.name, change.config_operation, change.value
        if op == DELETE:
            props.pop(key, None)
            continue
        if value is None:
            return ErrorCode.invalid_config, f"Null value not supported for broker config {key}"
        if op == SET:
            props[key] = value
            continue
        if key_kind(key) != "list":
            return (
                ErrorCode.invalid_config,
                f"Config value {_NAMES[op].lower()} is not allowed for config key: {key}",
            )
        start = props.get(key, key_default(key) or "")
        items = [item.strip() for item in start.split(",") if item.strip()]
        for item in (part.strip() for part in value.split(",")):
            if op == APPEND and item and item not in items:
                items.append(item)
            elif op == SUBTRACT and item in items:
                items.remove(item)
        props[key] = ",".join(items)
    return alter_broker(broker, name, props, validate_only)


async def handle(ctx: RequestContext, request: Any) -> Any:
    return respond(
        ctx,
        request,
        44,
        "IncrementalAlterConfigsResponse",
        lambda resource: _alter(ctx, resource, request.validate_only),
    )


API = Api(key=44, name="IncrementalAlterConfigs", min_version=0, max_version=1, handle=handle)

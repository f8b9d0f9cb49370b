"""FindCoordinator (key 10): which broker coordinates a group or a transactional id.

Key type 0 (a consumer group) answers, alone, this broker's advertised
address; in a cluster, the leader of the group's ``__consumer_offsets``
partition (the topic is created on first use, off the event loop;
COORDINATOR_NOT_AVAILABLE while it cannot be, or the partition has no
leader). Key
type 1 (a transactional id) answers the same way for ``__transaction_state``
(created on first use in a cluster). Key type 2 (v6: a share-partition,
"group:topicId:partition") answers the coordinator of its group, which keeps
the share-partitions' state here (Kafka: the leader of its ``__share_group_state``
partition); an unknown key type is INVALID_REQUEST. From v4 one request asks for several keys
(``coordinator_keys``) and gets one result each. v1-v3 carry Kafka's
``Errors.message()`` ("NONE" on success) in ``error_message``.

With an authorizer (security/operations.py): DESCRIBE on the group (key type 0,
else GROUP_AUTHORIZATION_FAILED) or on the transactional id (key type 1, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import ERROR_MESSAGES, ensure_offsets_topic
from logstore.broker.metadata_cache import NO_LEADER
from logstore.broker.transactions.state_topic import ensure_transaction_topic_async
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, partition_for
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

_log = logging.getLogger("logstore.broker")

GROUP, TRANSACTION, SHARE = 0, 1, 2


Node = tuple[int, str, int]


async def _group_coordinator(ctx: RequestContext, group_id: str) -> tuple[ErrorCode, str | None, Node | None]:
    broker = ctx.broker
    if broker.coordinator is None:
        return ErrorCode.coordinator_not_available, None, None
    if broker.cluster_link is None:
        return ErrorCode.none, None, (broker.node_id, *broker.advertised_for(ctx.connection.listener_name))
    if not broker.metadata.has_topic(OFFSETS_TOPIC):
        try:
            await asyncio.get_running_loop().run_in_executor(None, ensure_offsets_topic, broker)
        except (LogstoreError, OSError) as e:
            _log.info("cannot create %s yet: %s", OFFSETS_TOPIC, e)
            return ErrorCode.coordinator_not_available, None, None
    return _leader_of(ctx, OFFSETS_TOPIC, group_id)


def _leader_of(ctx: RequestContext, topic: str, key: str) -> tuple[ErrorCode, str | None, Node | None]:
    """The leader of ``key``'s partition of ``topic`` (hash(key) % partitions): the coordinator."""
    metadata = ctx.broker.metadata
    count = metadata.partition_count(topic) or 0
    state = metadata.partition_state(topic, partition_for(key, count)) if count else None
    leader = metadata.broker(state.leader) if state is not None and state.leader != NO_LEADER else None
    endpoint = leader.for_listener(ctx.connection.listener_name) if leader is not None else None
    if leader is None or endpoint is None:
        return ErrorCode.coordinator_not_available, None, None
    return ErrorCode.none, None, (leader.node_id, *endpoint)


async def _transaction_coordinator(ctx: RequestContext, txn_id: str) -> tuple[ErrorCode, str | None, Node | None]:
    broker = ctx.broker
    if broker.transactions is None:
        return ErrorCode.coordinator_not_available, None, None
    if broker.cluster_link is None:
        return ErrorCode.none, None, (broker.node_id, *broker.advertised_for(ctx.connection.listener_name))
    error = await ensure_transaction_topic_async(broker)
    if error != ErrorCode.none:
        return error, None, None
    return _leader_of(ctx, TRANSACTION_STATE_TOPIC, txn_id)


async def _lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, str | None, Node | None]:
    """(error, message, the coordinator's node id, host and port) for one key."""
    if ctx.broker.authorizer is not None:
        kind = {GROUP: ResourceType.GROUP, TRANSACTION: ResourceType.TRANSACTIONAL_ID}.get(key_type)
        if kind is not None and not operations.allowed(ctx, kind, key):
            return operations.error(kind), None, None
    if key_type == GROUP:
        return await _group_coordinator(ctx, key)
    if key_type == TRANSACTION:
        return await _transaction_coordinator(ctx, key)
    if key_type == SHARE:  # "group:topicId:partition": the share coordinator of that share-partition
        group_id, sep, _ = key.rpartition(":")
        group_id = group_id.rpartition(":")[0] if sep else ""
        if not group_id:
            return ErrorCode.invalid_request, f"Invalid share coordinator key {key!r}", None
        return await _group_coordinator(ctx, group_id)
    return ErrorCode.invalid_request, f"Unknown coordinator type received: {key_type}", None


def _where(node: Node | None) -> dict[str, Any]:
    if node is None:
        return {"node_id": -1, "host": "", "port": -1}
    return {"node_id": node[0], "host": node[1], "port": node[2]}


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(10, ctx.version).response_module
    key_type = int(getattr(request, "key_type", GROUP))
    if ctx.version < 4:
        error, message, node = await _lookup(ctx, key_type, request.key)
        return build(
            module.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message or ERROR_MESSAGES.get(error, error.name),
            **_where(node),
        )
    coordinators = []
    for key in request.coordinator_keys:
        error, message, node = await _lookup(ctx, key_type, key)
        if error != ErrorCode.none and message is None:
            message = ERROR_MESSAGES.get(error, error.name)
        coordinators.append(
            build(module.Coordinator, key=key, error_code=error, error_message=message, **_where(node))
        )
    return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))


API = Api(key=10, name="FindCoordinator", min_version=0, max_version=6, handle=handle)

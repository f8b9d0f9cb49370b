"""Metadata (key 3): brokers, topics and partition leaders; auto-creates topics.

Brokers, leaders, replicas, ISR and leader epochs come from the broker's
MetadataCache (on a single broker: this broker leads every partition, alone
in the ISR, with no leader epoch kept: -1).
A requested topic that does not exist is created with ``num.partitions``
when ``auto.create.topics.enable`` is on and the request allows it (v4+);
v0 asks for every topic with an empty list, v1+ with null. Leader epochs are
-1: this broker keeps none yet. From v10 topics carry their IDs, and may be
asked for by ID.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.apis.describe_cluster import CLUSTER_OPERATIONS
from logstore.broker.server import RequestContext
from logstore.broker.topics import INTERNAL_TOPICS, topic_error
from logstore.protocol import AUTHORIZED_OPERATIONS_UNKNOWN, NO_THROTTLE, build, codec

# Without an authorizer Kafka allows every operation: READ, WRITE, CREATE, DELETE,
# ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS (AclOperation codes).
TOPIC_OPERATIONS = sum(1 << code for code in (3, 4, 5, 6, 7, 8, 10, 11))


def _requested(ctx: RequestContext, request: Any) -> list[tuple[str | None, uuid.UUID | None]] | None:
    """(name, id) pairs asked for; None means every topic."""
    topics = request.topics
    if topics is None or (ctx.version == 0 and not topics):
        return None
    result = []
    for topic in topics:
        topic_id = getattr(topic, "topic_id", None)
        if topic_id is not None and topic_id.int == 0:
            topic_id = None
        name = topic.name
        if name is None and topic_id is not None:
            name = ctx.broker.metadata.topic_by_id(topic_id)
        result.append((name, topic_id))
    return result


def topic_metadata(
    ctx: RequestContext, module: Any, name: str | None, error: ErrorCode, topic_id: Any, operations: int
) -> Any:
    broker = ctx.broker
    partitions: tuple[Any, ...] = ()
    found = broker.metadata.topic(name) if error == ErrorCode.none and name is not None else None
    if found is not None:
        partitions = tuple(
            build(
                module.MetadataResponsePartition,
                error_code=ErrorCode.leader_not_available if state.leader < 0 else ErrorCode.none,
                partition_index=index,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=state.replicas,
                isr_nodes=state.isr,
                offline_replicas=state.offline,
            )
            for index, state in enumerate(found.partitions)
        )
        topic_id = found.topic_id
    return build(
        module.MetadataResponseTopic,
        error_code=error,
        name=name,
        topic_id=topic_id or uuid.UUID(int=0),
        is_internal=name in INTERNAL_TOPICS,
        partitions=partitions,
        topic_authorized_operations=operations,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(3, ctx.version).response_module
    auto_create = getattr(request, "allow_auto_topic_creation", True)
    requested = _requested(ctx, request)
    include = getattr(request, "include_topic_authorized_operations", False)
    operations = TOPIC_OPERATIONS if include else AUTHORIZED_OPERATIONS_UNKNOWN
    cluster_operations = (
        CLUSTER_OPERATIONS
        if getattr(request, "include_cluster_authorized_operations", False)
        else AUTHORIZED_OPERATIONS_UNKNOWN
    )
    topics: list[Any] = []
    if requested is None:
        for existing in broker.metadata.topic_names():
            topics.append(topic_metadata(ctx, module, existing, ErrorCode.none, None, operations))
    else:
        for name, topic_id in requested:
            if ctx.version < 12 and (name is None or topic_id is not None):
                # Topic IDs in requests (and null names) are v12+; the older responses cannot
                # carry a null name. Kafka fails such a request with INVALID_REQUEST.
                name, error = name or "", ErrorCode.invalid_request
            elif name is None and topic_id is not None:
                error = ErrorCode.unknown_topic_id
            else:
                error = await topic_error(broker, name, auto_create)
            topics.append(topic_metadata(ctx, module, name, error, topic_id, operations))
    return build(
        module.MetadataResponse,
        throttle_time=NO_THROTTLE,
        brokers=tuple(
            build(module.MetadataResponseBroker, node_id=b.node_id, host=e[0], port=e[1], rack=b.rack)
            for b in broker.metadata.brokers()
            if (e := b.for_listener(ctx.connection.listener_name)) is not None
        ),
        cluster_id=broker.cluster_id,
        controller_id=broker.metadata.controller_id,
        topics=tuple(topics),
        cluster_authorized_operations=cluster_operations,
    )


API = Api(key=3, name="Metadata", min_version=0, max_version=12, handle=handle)

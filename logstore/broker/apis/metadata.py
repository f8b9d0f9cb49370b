"""Metadata (key 3): brokers, topics and partition leaders; auto-creates topics.

Brokers, leaders, replicas, ISR and leader epochs come from the broker's
MetadataCache (on a single broker: this broker leads every partition, alone
in the ISR, with no leader epoch kept: -1).
A requested topic that does not exist is created with ``num.partitions``
when ``auto.create.topics.enable`` is on and the request allows it (v4+);
v0 asks for every topic with an empty list, v1+ with null. Leader epochs are
-1: this broker keeps none yet. From v10 topics carry their IDs, and may be
asked for by ID.

With an authorizer (security/operations.py): DESCRIBE on each topic -- a named topic
without it answers TOPIC_AUTHORIZATION_FAILED whether it exists or not, and a request
for every topic leaves it out; auto-creation needs CREATE on the cluster or the topic.
The authorized_operations fields are the principal's.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.topics import topic_error
from logstore.coordinator.internal_topics import INTERNAL_TOPICS
from logstore.protocol import AUTHORIZED_OPERATIONS_UNKNOWN, NO_THROTTLE, build, codec
from logstore.security import operations as ops
from logstore.security.acls import CLUSTER_NAME, ResourceType

TOPIC = ResourceType.TOPIC


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


def _may_create(ctx: RequestContext, name: str | None, auto_create: bool) -> bool:
    """False when the topic is missing, would be auto-created, and the principal has neither
    CREATE on the cluster nor CREATE on the topic (Kafka answers TOPIC_AUTHORIZATION_FAILED)."""
    broker = ctx.broker
    if name is None or broker.metadata.has_topic(name) or not (auto_create and broker.config.auto_create_topics_enable):
        return True
    return ops.allowed_cluster(ctx, "create") or ops.allowed(ctx, TOPIC, name, "create")


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(3, ctx.version).response_module
    auto_create = getattr(request, "allow_auto_topic_creation", True)
    requested = _requested(ctx, request)
    include = getattr(request, "include_topic_authorized_operations", False)
    auth = broker.authorizer

    def topic_operations(name: str | None) -> int:
        if not include:
            return AUTHORIZED_OPERATIONS_UNKNOWN
        return ops.authorized_operations(ctx, TOPIC, name or "")

    cluster_operations = AUTHORIZED_OPERATIONS_UNKNOWN
    if getattr(request, "include_cluster_authorized_operations", False):
        cluster_operations = (
            ops.authorized_operations(ctx, ResourceType.CLUSTER, CLUSTER_NAME)
            if ops.allowed_cluster(ctx, "operations")
            else 0
        )
    topics: list[Any] = []
    if requested is None:
        for existing in broker.metadata.topic_names():
            if auth is None or ops.allowed(ctx, TOPIC, existing):  # all topics: the others left out
                topics.append(topic_metadata(ctx, module, existing, ErrorCode.none, None, topic_operations(existing)))
    else:
        for name, topic_id in requested:
            if ctx.version < 12 and (name is None or topic_id is not None):
                # Topic IDs in requests (and null names) are v12+; the older responses cannot
                # carry a null name. Kafka fails such a request with INVALID_REQUEST.
                name, error = name or "", ErrorCode.invalid_request
            elif name is None and topic_id is not None:
                error = ErrorCode.unknown_topic_id
            elif auth is not None and not ops.allowed(ctx, TOPIC, name or ""):
                # Kafka does not disclose whether a topic the principal cannot describe exists.
                error = ErrorCode.topic_authorization_failed
                topics.append(
                    topic_metadata(ctx, module, None if topic_id else name, error, topic_id, AUTHORIZED_OPERATIONS_UNKNOWN)
                )
                continue
            elif auth is not None and not _may_create(ctx, name, auto_create):
                error = ErrorCode.topic_authorization_failed
            else:
                error = await topic_error(broker, name, auto_create)
            topics.append(topic_metadata(ctx, module, name, error, topic_id, topic_operations(name)))
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

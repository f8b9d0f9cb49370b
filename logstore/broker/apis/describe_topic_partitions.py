"""DescribeTopicPartitions (key 75, KIP-966): topics' partitions, paged, from the MetadataCache.

Kafka's semantics (its DescribeTopicPartitionsRequestHandler and
KRaftMetadataCache.getTopicMetadataForDescribeTopicResponse), served by any
broker of a cluster and by a broker alone:

- An empty topic list asks for every topic; a named topic is described once
  however often it is named. Only topics at or after the cursor's topic
  (in Java's string order) are described, sorted by name.
- A cursor whose topic is not among the named topics, or whose partition
  index is negative, fails the request: every named topic comes back with
  INVALID_REQUEST and nothing else (Kafka's error response).
- At most ``min(response_partition_limit, 2000)`` partitions are described,
  and at least 1 (2000: Kafka's ``max.request.partition.size.limit``
  default), across topics, starting at the cursor's partition in the
  cursor's topic and at 0 in the others. When the limit cuts a topic short,
  ``next_cursor`` names it and its first partition left out; when the limit
  is used up exactly, it names the next topic to describe, at partition 0
  (a named topic that may not exist). Otherwise there is no next cursor.
- A named topic that does not exist: UNKNOWN_TOPIC_OR_PARTITION, or
  INVALID_TOPIC_EXCEPTION for an illegal name; a zero topic ID, no
  partitions, and it uses up none of the limit. With the empty list such a
  topic (deleted meanwhile) is left out.
- A partition has no error code; its leader is -1 unless the leader is a
  live broker; replicas, ISR, leader epoch and offline replicas are the
  cache's; eligible leader replicas and the last known ELR are empty (no
  ELR here, which Kafka sends as empty arrays, not null).
- Every described topic (unknown ones too) carries the principal's authorized
  operations (every operation Kafka defines on a topic without an authorizer);
  the request has no flag to leave them out.
- With an authorizer, DESCRIBE on each topic (security/operations.py): a named
  topic without it comes last with TOPIC_AUTHORIZATION_FAILED (existing or not),
  and a request for every topic leaves it out.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.metadata_cache import NO_LEADER, MetadataCache, PartitionState
from logstore.coordinator.internal_topics import INTERNAL_TOPICS
from logstore.errors import InvalidArgumentError
from logstore.protocol import AUTHORIZED_OPERATIONS_UNKNOWN, NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType
from logstore.storage.store import validate_topic_name

MAX_PARTITIONS = 2000
"""Kafka's ``max.request.partition.size.limit`` default: the most partitions one response holds."""

ZERO_UUID = uuid.UUID(int=0)


def _java_order(name: str) -> bytes:
    """A sort key giving Java's ``String.compareTo`` order (UTF-16 code units)."""
    return name.encode("utf-16-be", "surrogatepass")


def _partition(module: Any, metadata: MetadataCache, index: int, state: PartitionState) -> Any:
    alive = state.leader != NO_LEADER and metadata.broker(state.leader) is not None
    return build(
        module.DescribeTopicPartitionsResponsePartition,
        error_code=ErrorCode.none,
        partition_index=index,
        leader_id=state.leader if alive else NO_LEADER,
        leader_epoch=state.leader_epoch,
        replica_nodes=state.replicas,
        isr_nodes=state.isr,
        eligible_leader_replicas=(),
        last_known_elr=(),
        offline_replicas=state.offline,
    )


def _missing(ctx: RequestContext, module: Any, name: str) -> Any:
    try:
        validate_topic_name(name)
        error = ErrorCode.unknown_topic_or_partition
    except InvalidArgumentError:
        error = ErrorCode.invalid_topic_exception
    return build(
        module.DescribeTopicPartitionsResponseTopic,
        error_code=error,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=name in INTERNAL_TOPICS,
        partitions=(),
        topic_authorized_operations=operations.authorized_operations(ctx, ResourceType.TOPIC, name),
    )


def _unauthorized(module: Any, name: str) -> Any:
    """A named topic the principal may not describe: TOPIC_AUTHORIZATION_FAILED, existing or not."""
    return build(
        module.DescribeTopicPartitionsResponseTopic,
        error_code=ErrorCode.topic_authorization_failed,
        name=name,
        topic_id=ZERO_UUID,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_UNKNOWN,
    )


def _invalid_request(module: Any, request: Any) -> Any:
    """Kafka's error response: each named topic, in request order, with INVALID_REQUEST."""
    return build(
        module.DescribeTopicPartitionsResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                module.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.invalid_request,
                name=topic.name,
                topic_id=ZERO_UUID,
                is_internal=False,
                partitions=(),
            )
            for topic in request.topics
        ),
        next_cursor=None,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(75, ctx.version).response_module
    metadata = ctx.broker.metadata
    cursor = request.cursor
    every_topic = not request.topics
    start_topic = _java_order(cursor.topic_name) if cursor is not None else b""
    listed = metadata.topic_names() if every_topic else (t.name for t in request.topics)
    names = {name for name in listed if _java_order(name) >= start_topic}
    unauthorized: list[str] = []
    if ctx.broker.authorizer is not None:  # named: TOPIC_AUTHORIZATION_FAILED at the end; all: left out
        allowed = operations.filter_allowed(ctx, ResourceType.TOPIC, names, str)
        unauthorized = sorted(names - allowed, key=_java_order) if not every_topic else []
        names = allowed
    if cursor is not None and (
        (not every_topic and cursor.topic_name not in names) or cursor.partition_index < 0
    ):
        return _invalid_request(module, request)

    remaining = max(min(MAX_PARTITIONS, request.response_partition_limit), 1)
    topics: list[Any] = []
    next_cursor = None
    for name in sorted(names, key=_java_order):
        if remaining == 0:  # the previous topics took the whole limit: go on from this one
            next_cursor = build(module.Cursor, topic_name=name, partition_index=0)
            break
        found = metadata.topic(name)
        if found is None:
            if not every_topic:
                topics.append(_missing(ctx, module, name))
            continue
        first = cursor.partition_index if cursor is not None and name == cursor.topic_name else 0
        count = len(found.partitions)
        end = min(count, first + remaining)
        partitions = tuple(
            _partition(module, metadata, index, found.partitions[index]) for index in range(first, end)
        )
        topics.append(
            build(
                module.DescribeTopicPartitionsResponseTopic,
                error_code=ErrorCode.none,
                name=name,
                topic_id=found.topic_id,
                is_internal=name in INTERNAL_TOPICS,
                partitions=partitions,
                topic_authorized_operations=operations.authorized_operations(ctx, ResourceType.TOPIC, name),
            )
        )
        if end < count:
            next_cursor = build(module.Cursor, topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    topics.extend(_unauthorized(module, name) for name in unauthorized)
    return build(
        module.DescribeTopicPartitionsResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(topics),
        next_cursor=next_cursor,
    )


API = Api(key=75, name="DescribeTopicPartitions", min_version=0, max_version=0, handle=handle)

"""OffsetDelete (key 47): forget a group's committed offsets for some partitions.

Partitions of topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
(Kafka's check before the coordinator). The coordinator deletes offsets of
an Empty group, or of topics no member of a consumer group subscribes to
(the others: GROUP_SUBSCRIBED_TO_TOPIC); an unknown group is
GROUP_ID_NOT_FOUND and a non-consumer group with members NON_EMPTY_GROUP,
both as the top-level error with no topics.

With an authorizer (security/operations.py): DELETE on the group (else
GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(47, ctx.version).response_module
    metadata = ctx.broker.metadata
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        return build(
            module.OffsetDeleteResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
            topics=(),
        )  # fmt: skip
    unknown: set[tuple[str, int]] = set()
    denied: set[str] = set()
    wanted: list[tuple[str, int]] = []
    for topic in request.topics:
        count = metadata.partition_count(topic.name) or 0
        if not operations.allowed(ctx, ResourceType.TOPIC, topic.name):
            denied.add(topic.name)
            continue
        for partition in topic.partitions:
            key = (topic.name, partition.partition_index)
            if 0 <= partition.partition_index < count:
                wanted.append(key)
            else:
                unknown.add(key)
    result = coordinator_of(ctx.broker).delete_offsets(request.group_id, wanted)
    if result.error != ErrorCode.none:
        return build(
            module.OffsetDeleteResponse, throttle_time=NO_THROTTLE, error_code=result.error, topics=()
        )
    topics = tuple(
        build(
            module.OffsetDeleteResponseTopic,
            name=topic.name,
            partitions=tuple(
                build(
                    module.OffsetDeleteResponsePartition,
                    partition_index=partition.partition_index,
                    error_code=ErrorCode.topic_authorization_failed
                    if topic.name in denied
                    else ErrorCode.unknown_topic_or_partition
                    if (topic.name, partition.partition_index) in unknown
                    else result.partitions.get((topic.name, partition.partition_index), ErrorCode.none),
                )
                for partition in topic.partitions
            ),
        )
        for topic in request.topics
    )
    return build(
        module.OffsetDeleteResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, topics=topics
    )


API = Api(key=47, name="OffsetDelete", min_version=0, max_version=0, handle=handle)

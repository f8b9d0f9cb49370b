"""ShareAcknowledge (key 79): a share group member's acknowledgements, outside a fetch (KIP-932).

In the member's share session: epoch 0 is INVALID_SHARE_SESSION_EPOCH (it
cannot open one), a missing session SHARE_SESSION_NOT_FOUND, another epoch
than the session's next INVALID_SHARE_SESSION_EPOCH; -1 applies the
acknowledgements and closes the session (what the member still holds goes
back). Each partition answers its own error: INVALID_RECORD_STATE for a
record the member does not hold (never acquired, acknowledged already, lock
expired), and then nothing in that partition changes.

With an authorizer: READ on the group and on each topic.
"""

from __future__ import annotations

import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.share_fetch import PartitionAnswer, TopicPartition, acknowledge_all, resolve_topics
from logstore.broker.context import RequestContext
from logstore.broker.groups.share_groups import share_coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(79, ctx.version).response_module
    broker = ctx.broker

    def failed(error: ErrorCode, message: str | None) -> Any:
        return build(
            module.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
            responses=(), node_endpoints=(),
        )  # fmt: skip

    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return failed(ErrorCode.invalid_request, "a ShareAcknowledge names its group and member")
    if broker.authorizer is not None and not operations.allowed(ctx, ResourceType.GROUP, group_id):
        return failed(ErrorCode.group_authorization_failed, None)
    coordinator = share_coordinator_of(broker)
    opened = coordinator.acknowledge_session(group_id, member_id, request.share_session_epoch)
    if opened.error != ErrorCode.none:
        return failed(opened.error, opened.message)
    names, denied = resolve_topics(ctx, request.topics)
    answers: dict[TopicPartition, PartitionAnswer] = {}
    unknown: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    acknowledge_all(coordinator, group_id, member_id, request.topics, names, denied, answers, unknown)
    if opened.final:
        coordinator.close_session(group_id, member_id)
    leader = build(module.LeaderIdAndEpoch, leader_id=broker.node_id, leader_epoch=0)
    by_topic: dict[uuid.UUID, list[Any]] = {}
    for (topic, index), answer in answers.items():
        by_topic.setdefault(broker.metadata.topic_id(topic), []).append(build(
            module.PartitionData, partition_index=index, error_code=answer.ack_error,
            error_message=answer.ack_message, current_leader=leader,
        ))  # fmt: skip
    for (topic_id, index), error in unknown.items():
        by_topic.setdefault(topic_id, []).append(build(
            module.PartitionData, partition_index=index, error_code=error, error_message=None, current_leader=leader,
        ))  # fmt: skip
    return build(
        module.ShareAcknowledgeResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        responses=tuple(
            build(module.ShareAcknowledgeTopicResponse, topic_id=topic_id, partitions=tuple(partitions))
            for topic_id, partitions in by_topic.items()
        ),
        node_endpoints=(),
    )  # fmt: skip


API = Api(key=79, name="ShareAcknowledge", min_version=1, max_version=1, handle=handle)

"""ShareGroupDescribe (key 77): share groups' state, epochs, members and assignments (KIP-932).

A group that is not a share group (or does not exist) answers
GROUP_ID_NOT_FOUND. With an authorizer, DESCRIBE on each group (else
GROUP_AUTHORIZATION_FAILED for it).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.share_groups import share_coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(77, ctx.version).response_module
    coordinator = share_coordinator_of(ctx.broker)
    described = []
    for group_id in request.group_ids:
        group = coordinator.group(group_id)
        error, message = ErrorCode.none, None
        if not operations.allowed(ctx, ResourceType.GROUP, group_id):
            error, message = ErrorCode.group_authorization_failed, None
        elif group is None:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        if group is None or error != ErrorCode.none:
            described.append(build(
                module.DescribedGroup, error_code=error, error_message=message, group_id=group_id,
                group_state="Dead", group_epoch=-1, assignment_epoch=-1, assignor_name="", members=(),
            ))  # fmt: skip
            continue
        members = []
        for member in group.members.values():
            topics = []
            for topic, partitions in sorted(member.assignment.items()):
                topic_id = coordinator.topic_id(topic)
                if topic_id is not None:
                    topics.append(build(module.TopicPartitions, topic_id=topic_id, topic_name=topic,
                                        partitions=tuple(sorted(partitions))))  # fmt: skip
            members.append(build(
                module.Member, member_id=member.member_id, rack_id=member.rack_id, member_epoch=member.epoch,
                client_id=member.client_id, client_host=member.client_host,
                subscribed_topic_names=tuple(sorted(member.subscribed)),
                assignment=build(module.Assignment, topic_partitions=tuple(topics)),
            ))  # fmt: skip
        described.append(build(
            module.DescribedGroup, error_code=ErrorCode.none, error_message=None, group_id=group_id,
            group_state=group.state, group_epoch=group.epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=coordinator.assignor_name(), members=tuple(members),
        ))  # fmt: skip
    return build(module.ShareGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=tuple(described))


API = Api(key=77, name="ShareGroupDescribe", min_version=1, max_version=1, handle=handle)

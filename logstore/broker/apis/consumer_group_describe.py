"""ConsumerGroupDescribe (key 69): consumer-protocol groups (KIP-848) with their members.

Each group shows its state (Empty, Assigning, Reconciling, Stable), group
epoch, assignment epoch and assignor (the one most members ask for, else the
default), and each member its epoch, client, subscription, current and target
assignment (topics by id and name; topics that no longer exist are left out),
and from v1 its type (1: a consumer-protocol member). A group that is not a
consumer group answers GROUP_ID_NOT_FOUND ("Group ... is not a consumer
group." for a classic one), an empty group id INVALID_GROUP_ID, another
coordinator's group NOT_COORDINATOR. Authorized operations are every group
operation when asked for (no authorizer).

With an authorizer (security/operations.py): DESCRIBE on each group, else
GROUP_AUTHORIZATION_FAILED for it; authorized_operations are the principal's.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import ERROR_MESSAGES, coordinator_of
from logstore.coordinator.group.consumer_group_manager import DescribedPartitions
from logstore.protocol import AUTHORIZED_OPERATIONS_UNKNOWN, NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

CONSUMER_MEMBER_TYPE = 1


def _assignment(module: Any, partitions: tuple[DescribedPartitions, ...]) -> Any:
    return build(
        module.Assignment,
        topic_partitions=tuple(
            build(
                module.TopicPartitions, topic_id=p.topic_id, topic_name=p.topic_name, partitions=p.partitions
            )
            for p in partitions
        ),
    )


def _described(ctx: RequestContext, module: Any, group_id: str, include: bool) -> Any:
    if not group_id:
        return build(
            module.DescribedGroup, error_code=ErrorCode.invalid_group_id, error_message=None, group_id=group_id,
            group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
        )  # fmt: skip
    if not operations.allowed(ctx, ResourceType.GROUP, group_id):
        return build(
            module.DescribedGroup, error_code=ErrorCode.group_authorization_failed, error_message=None,
            group_id=group_id, group_state="", group_epoch=0, assignment_epoch=0, assignor_name="", members=(),
        )  # fmt: skip
    group = coordinator_of(ctx.broker).consumer_group_describe(group_id)
    message = group.message
    if message is None and group.error != ErrorCode.none:
        message = ERROR_MESSAGES.get(group.error)
    members = tuple(
        build(
            module.Member,
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex,
            assignment=_assignment(module, member.assignment),
            target_assignment=_assignment(module, member.target_assignment),
            member_type=CONSUMER_MEMBER_TYPE,
        )
        for member in group.members
    )
    ok = group.error == ErrorCode.none
    return build(
        module.DescribedGroup,
        error_code=group.error,
        error_message=message,
        group_id=group_id,
        group_state=group.state,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=members,
        authorized_operations=(
            operations.authorized_operations(ctx, ResourceType.GROUP, group_id)
            if include and ok
            else AUTHORIZED_OPERATIONS_UNKNOWN
        ),
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(69, ctx.version).response_module
    include = request.include_authorized_operations
    groups = tuple(_described(ctx, module, group_id, include) for group_id in request.group_ids)
    return build(module.ConsumerGroupDescribeResponse, throttle_time=NO_THROTTLE, groups=groups)


API = Api(key=69, name="ConsumerGroupDescribe", min_version=0, max_version=1, handle=handle)

"""DescribeGroups (key 15): groups' state, protocol and members.

A Stable group shows its protocol name and each member's metadata and
assignment; other states show the members without them (as Kafka). A group
the coordinator does not know reads as Dead with no members, and from v6
answers GROUP_ID_NOT_FOUND with a message (KIP-1043); so does a consumer
group (KIP-848): "Group ... is not a classic group." (ConsumerGroupDescribe
describes those). v3 adds the
authorized operations (every group operation: no authorizer), v4 the
members' group instance ids.

With an authorizer (security/operations.py): DESCRIBE on each group, else
GROUP_AUTHORIZATION_FAILED for it; authorized_operations are the principal's.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import coordinator_of
from logstore.coordinator.group.classic_group import GroupState
from logstore.protocol import AUTHORIZED_OPERATIONS_UNKNOWN, NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(15, ctx.version).response_module
    coordinator = coordinator_of(ctx.broker)
    include = getattr(request, "include_authorized_operations", False)
    groups = []
    for group_id in request.groups:
        if not operations.allowed(ctx, ResourceType.GROUP, group_id):
            groups.append(
                build(
                    module.DescribedGroup, error_code=ErrorCode.group_authorization_failed, error_message=None,
                    group_id=group_id, group_state="", protocol_type="", protocol_data="", members=(),
                    authorized_operations=AUTHORIZED_OPERATIONS_UNKNOWN,
                )
            )
            continue
        described = coordinator.describe_group(group_id)
        live = coordinator.group(group_id)
        error, message = described.error, None
        if ctx.version >= 6 and coordinator.group_type(group_id) == "consumer" and error == ErrorCode.none:
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} is not a classic group."
        elif ctx.version >= 6 and (live is None or live.is_in(GroupState.DEAD)):
            error, message = ErrorCode.group_id_not_found, f"Group {group_id} not found."
        members = tuple(
            build(
                module.DescribedGroupMember,
                member_id=member.member_id,
                group_instance_id=member.group_instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                member_metadata=member.metadata,
                member_assignment=member.assignment,
            )
            for member in described.members
        )
        groups.append(
            build(
                module.DescribedGroup,
                error_code=error,
                error_message=message,
                group_id=group_id,
                group_state=described.state,
                protocol_type=described.protocol_type,
                protocol_data=described.protocol,
                members=members,
                authorized_operations=(
                    operations.authorized_operations(ctx, ResourceType.GROUP, group_id)
                    if include
                    else AUTHORIZED_OPERATIONS_UNKNOWN
                ),
            )
        )
    return build(module.DescribeGroupsResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))


API = Api(key=15, name="DescribeGroups", min_version=0, max_version=6, handle=handle)

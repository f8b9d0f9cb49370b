"""LeaveGroup (key 13): members leave a group, which rebalances (or empties).

v0-v2 name one member; the answer's error is the group's, else that
member's (Kafka's rule). From v3 a request names several members, each by
member id and/or group instance id (a member id of "" with an instance id
removes that static member: the admin path, KIP-345), and gets one result
each. v5's per-member ``reason`` is logged.

With an authorizer: READ on the group, else GROUP_AUTHORIZATION_FAILED (security/operations.py).
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

_log = logging.getLogger("logstore.broker")


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(13, ctx.version).response_module
    coordinator = coordinator_of(ctx.broker)
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        return build(
            module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
            members=(),
        )  # fmt: skip
    if ctx.version < 3:
        result = coordinator.leave_group(request.group_id, [(request.member_id, None)])
        error = result.error
        if error == ErrorCode.none:
            error = next((m.error for m in result.members if m.error != ErrorCode.none), ErrorCode.none)
        return build(module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=error)
    for member in request.members:
        reason = getattr(member, "reason", None)
        if reason:
            _log.info(
                "member %r of group %s leaves: %s",
                member.member_id or member.group_instance_id,
                request.group_id,
                reason,
            )
    result = coordinator.leave_group(
        request.group_id, [(member.member_id, member.group_instance_id) for member in request.members]
    )
    members = tuple(
        build(
            module.MemberResponse,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            error_code=member.error,
        )
        for member in result.members
    )
    return build(
        module.LeaveGroupResponse, throttle_time=NO_THROTTLE, error_code=result.error, members=members
    )


API = Api(key=13, name="LeaveGroup", min_version=0, max_version=5, handle=handle)

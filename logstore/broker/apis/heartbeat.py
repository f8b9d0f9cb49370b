"""Heartbeat (key 12): keep a member's session alive; learn of a rebalance.

Handed to the group coordinator: REBALANCE_IN_PROGRESS tells the member to
rejoin; UNKNOWN_MEMBER_ID, ILLEGAL_GENERATION or FENCED_INSTANCE_ID that it
is no longer current. v3 adds ``group_instance_id``; v4 is v3 made flexible.

With an authorizer: READ on the group, else GROUP_AUTHORIZATION_FAILED (security/operations.py).
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
    module = codec(12, ctx.version).response_module
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        return build(module.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed)
    error = coordinator_of(ctx.broker).heartbeat(
        request.group_id,
        request.generation_id,
        request.member_id,
        getattr(request, "group_instance_id", None),
    )
    return build(module.HeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error)


API = Api(key=12, name="Heartbeat", min_version=0, max_version=4, handle=handle)

"""ShareGroupHeartbeat (key 76): a share group's members join, heartbeat and leave (KIP-932).

Epoch 0 joins with the subscribed topic names (the member generates its id),
-1 leaves (its acquired records go back); other epochs must be the member's
current one (else FENCED_MEMBER_EPOCH; an unknown member UNKNOWN_MEMBER_ID).
The answer carries the member's epoch, the heartbeat interval and, when it
changed (or on a join), the partitions the member fetches from: the share
coordinator's server-side assignment
(:mod:`logstore.coordinator.share.share_membership`). A group id in use by a
classic or consumer group answers GROUP_ID_NOT_FOUND, as Kafka.

With an authorizer: READ on the group (else GROUP_AUTHORIZATION_FAILED) and
DESCRIBE on each subscribed topic (else TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import client_host, coordinator_of
from logstore.broker.groups.share_groups import now_ms, share_coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


def _denied(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str | None] | None:
    if ctx.broker.authorizer is None:
        return None
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed, None
    names = request.subscribed_topic_names or ()
    denied = sorted(set(names) - operations.filter_allowed(ctx, ResourceType.TOPIC, names, str))
    if denied:
        return ErrorCode.topic_authorization_failed, f"The following topics are not authorized: {', '.join(denied)}"
    return None


def _other_group(ctx: RequestContext, group_id: str) -> bool:
    """Whether ``group_id`` names a classic or consumer group. O(groups)."""
    return any(overview.group_id == group_id for overview in coordinator_of(ctx.broker).list_groups())


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(76, ctx.version).response_module

    def answer(error: ErrorCode, message: str | None, member_id: str | None = None, epoch: int = 0,
               interval_ms: int = 0, assignment: Any = None) -> Any:  # fmt: skip
        return build(
            module.ShareGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=error,
            error_message=message, member_id=member_id, member_epoch=epoch,
            heartbeat_interval=datetime.timedelta(milliseconds=interval_ms), assignment=assignment,
        )  # fmt: skip

    denied = _denied(ctx, request)
    if denied is not None:
        return answer(*denied)
    coordinator = share_coordinator_of(ctx.broker)
    if request.member_epoch == 0 and coordinator.group(request.group_id) is None and _other_group(
        ctx, request.group_id
    ):
        return answer(ErrorCode.group_id_not_found, f"Group {request.group_id} is not a share group.")
    result = coordinator.heartbeat(
        now_ms(), request.group_id, request.member_id, request.member_epoch, request.subscribed_topic_names,
        rack_id=request.rack_id, client_id=ctx.header.client_id or "", client_host=client_host(ctx.connection.peer),
    )  # fmt: skip
    if result.error != ErrorCode.none:
        return answer(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        assignment = build(
            module.Assignment,
            topic_partitions=tuple(
                build(module.TopicPartitions, topic_id=topic_id, partitions=tuple(parts))
                for topic_id, parts in sorted(result.assignment.items())
            ),
        )
    return answer(
        ErrorCode.none, None, result.member_id, result.member_epoch, result.heartbeat_interval_ms, assignment
    )


API = Api(key=76, name="ShareGroupHeartbeat", min_version=1, max_version=1, handle=handle)

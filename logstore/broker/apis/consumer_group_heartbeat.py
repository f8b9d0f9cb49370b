"""ConsumerGroupHeartbeat (key 68): the consumer group protocol of KIP-848.

One request joins (member epoch 0), heartbeats, acknowledges revocations
(the partitions the member still owns) and leaves (epoch -1; -2 for a static
member that will be back); the answer carries the member's epoch, the
heartbeat interval and, when it changed or the request was a full one, the
partitions the member may consume now. The group coordinator does the work
(:mod:`logstore.coordinator.consumer_membership`); in a cluster the answer
waits until the ISR has the group's records (Kafka writes them with acks=-1).

v0 lets the coordinator pick the member id; from v1 the member generates it
(KIP-1082) and may subscribe with a regular expression (matched whole against
the topic names, internal topics left out).

With an authorizer (security/operations.py): READ on the group (else
GROUP_AUTHORIZATION_FAILED) and DESCRIBE on each subscribed topic name (else
TOPIC_AUTHORIZATION_FAILED naming them).
"""

from __future__ import annotations

import datetime
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import await_group_replicated, client_host, coordinator_of, millis
from logstore.coordinator.group.consumer_membership import HeartbeatRequest, HeartbeatResult
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

_NULL_TOPIC = uuid.UUID(int=0)


def _request(ctx: RequestContext, request: Any) -> HeartbeatRequest:
    owned = None
    if request.topic_partitions is not None:
        owned = tuple(
            (topic.topic_id or _NULL_TOPIC, tuple(int(p) for p in topic.partitions))
            for topic in request.topic_partitions
        )
    names = request.subscribed_topic_names
    return HeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=millis(request.rebalance_timeout),
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=getattr(request, "subscribed_topic_regex", None),
        server_assignor=request.server_assignor,
        owned=owned,
        client_id=ctx.header.client_id or "",
        client_host=client_host(ctx.connection.peer),
        api_version=ctx.version,
    )


def _denied(ctx: RequestContext, request: Any) -> tuple[ErrorCode, str | None] | None:
    """READ on the group; DESCRIBE on every subscribed topic name (Kafka 4.0); None if allowed."""
    if ctx.broker.authorizer is None:
        return None
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        return ErrorCode.group_authorization_failed, None
    names = request.subscribed_topic_names or ()
    denied = sorted(set(names) - operations.filter_allowed(ctx, ResourceType.TOPIC, names, str))
    if denied:
        return ErrorCode.topic_authorization_failed, f"The following topics are not authorized: {', '.join(denied)}"
    return None


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(68, ctx.version).response_module
    denied = _denied(ctx, request)
    if denied is not None:
        return build(
            module.ConsumerGroupHeartbeatResponse, throttle_time=NO_THROTTLE, error_code=denied[0],
            error_message=denied[1], member_id=None, member_epoch=0,
            heartbeat_interval=datetime.timedelta(0), assignment=None,
        )  # fmt: skip
    result = coordinator_of(ctx.broker).consumer_group_heartbeat(_request(ctx, request))
    if result.error == ErrorCode.none and result.wrote:  # in a cluster: once the ISR has the records
        replicated = await await_group_replicated(ctx.broker, request.group_id)
        if replicated != ErrorCode.none:
            result = HeartbeatResult(replicated, "the group's records were not replicated in time")
    assignment = None
    if result.error == ErrorCode.none and result.assignment is not None:
        assignment = build(
            module.Assignment,
            topic_partitions=tuple(
                build(module.TopicPartitions, topic_id=topic_id, partitions=tuple(sorted(parts)))
                for topic_id, parts in sorted(result.assignment.items())
            ),
        )
    return build(
        module.ConsumerGroupHeartbeatResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        error_message=result.message if result.error != ErrorCode.none else None,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval=datetime.timedelta(milliseconds=result.heartbeat_interval_ms),
        assignment=assignment,
    )


API = Api(key=68, name="ConsumerGroupHeartbeat", min_version=0, max_version=1, handle=handle)

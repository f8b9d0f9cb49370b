"""SyncGroup (key 14): a member's assignment; the leader hands in everyone's.

Handed to the group coordinator. A follower's sync waits until the leader's
arrives (or the group starts another rebalance: REBALANCE_IN_PROGRESS); the
assignment bytes pass through untouched. v3 adds ``group_instance_id``; from
v5 the request must name the protocol type and name (else
INCONSISTENT_GROUP_PROTOCOL, as Kafka), which must match the group's, and
the answer carries them back. In a cluster the answer waits until the ISR
has the group's records (Kafka stores the group with acks=-1).

With an authorizer: READ on the group, else GROUP_AUTHORIZATION_FAILED (security/operations.py).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import Deferred, RequestContext
from logstore.broker.groups.offsets_topic import await_group_replicated, coordinator_of
from logstore.coordinator.group.classic_group import SyncResult
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(14, ctx.version).response_module
    protocol_type = getattr(request, "protocol_type", None)
    protocol_name = getattr(request, "protocol_name", None)
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        result = SyncResult(ErrorCode.group_authorization_failed)
    elif ctx.version >= 5 and (protocol_type is None or protocol_name is None):
        result = SyncResult(ErrorCode.inconsistent_group_protocol)
    else:
        synced = coordinator_of(ctx.broker).sync_group(
            request.group_id,
            request.generation_id,
            request.member_id,
            getattr(request, "group_instance_id", None),
            [(item.member_id, bytes(item.assignment)) for item in request.assignments],
            protocol_type=protocol_type,
            protocol_name=protocol_name,
        )
        # Synced: the requests behind this one go on while the leader's assignment comes (context.py).
        return Deferred(_synced(ctx, request.group_id, synced, module))
    return _answer(module, result)


async def _synced(ctx: RequestContext, group_id: str, synced: Awaitable[SyncResult], module: Any) -> Any:
    result = await synced
    if result.error == ErrorCode.none:  # in a cluster: once the ISR has the group's assignment
        replicated = await await_group_replicated(ctx.broker, group_id)
        if replicated != ErrorCode.none:
            result = SyncResult(replicated)
    return _answer(module, result)


def _answer(module: Any, result: SyncResult) -> Any:
    return build(
        module.SyncGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


API = Api(key=14, name="SyncGroup", min_version=0, max_version=5, handle=handle)

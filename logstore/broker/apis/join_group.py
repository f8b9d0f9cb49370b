"""JoinGroup (key 11): join a consumer group; the answer waits for the rebalance.

The request is handed to the group coordinator (``logstore.coordinator``)
and the response is sent when the rebalance completes; a parked join holds
neither its connection nor the requests behind it (a ``Deferred`` answer). The
members' protocol metadata passes through untouched: the leader's response
carries every member's metadata for the chosen protocol.

Versions: v0 has no rebalance timeout (the session timeout is used); from
v4 a new member without a group instance id gets MEMBER_ID_REQUIRED and its
member id, to join again with (KIP-394); v5 adds static membership
(``group_instance_id``, KIP-345); v7 adds the protocol type to the answer
(and makes the protocol name nullable); v8's ``reason`` is logged; from v9
a static leader rejoining a Stable group may be told to skip the assignment
(KIP-814). The member's host is Kafka's "/address" of the connection.

With an authorizer: READ on the group, else GROUP_AUTHORIZATION_FAILED (security/operations.py).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import Deferred, RequestContext
from logstore.broker.groups.offsets_topic import client_host, coordinator_of, millis
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

_log = logging.getLogger("logstore.broker")


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(11, ctx.version).response_module
    version = ctx.version
    if not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        return build(
            module.JoinGroupResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.group_authorization_failed,
            generation_id=-1, protocol_type=None, protocol_name=None if version >= 7 else "", leader="",
            skip_assignment=False, member_id="", members=(),
        )  # fmt: skip
    coordinator = coordinator_of(ctx.broker)
    instance_id = getattr(request, "group_instance_id", None)
    session_ms = millis(request.session_timeout)
    rebalance_ms = millis(request.rebalance_timeout) if version >= 1 else -1
    reason = getattr(request, "reason", None)
    if reason:
        _log.info(
            "member %r of group %s (client %s) joins: %s",
            request.member_id or instance_id or "(new)",
            request.group_id,
            ctx.header.client_id,
            reason,
        )
    future = coordinator.join_group(
        request.group_id,
        request.member_id,
        instance_id,
        ctx.header.client_id or "",
        client_host(ctx.connection.peer),
        session_ms,
        rebalance_ms,
        request.protocol_type,
        [(protocol.name, bytes(protocol.metadata)) for protocol in request.protocols],
        require_known_member_id=version >= 4 and instance_id is None,
        supports_skip_assignment=version >= 9,
    )
    # Joined: the requests behind this one go on while the rebalance completes (context.py).
    return Deferred(_joined(future, module, version))


async def _joined(future: Awaitable[Any], module: Any, version: int) -> Any:
    result = await future
    protocol_name = result.protocol_name
    if protocol_name is None and version < 7:
        protocol_name = ""  # not nullable before v7
    members = tuple(
        build(
            module.JoinGroupResponseMember,
            member_id=member.member_id,
            group_instance_id=member.group_instance_id,
            metadata=member.metadata,
        )
        for member in result.members
    )
    return build(
        module.JoinGroupResponse,
        throttle_time=NO_THROTTLE,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


API = Api(key=11, name="JoinGroup", min_version=0, max_version=9, handle=handle)

"""ListGroups (key 16): every group this coordinator knows.

From v4 a non-empty ``states_filter`` keeps the groups in those states
(Kafka's names, matched case-insensitively: Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead for classic groups; Empty, Assigning,
Reconciling, Stable for consumer groups) and each group reports its state.
From v5 each group reports its type, "classic" or "consumer" (KIP-848), and
a non-empty ``types_filter`` keeps those types (any case; an unknown type
matches nothing, as Kafka). Consumer groups have protocol type "consumer";
share groups (KIP-932) type and protocol type "share", states Empty or Stable.

With an authorizer (security/operations.py): every group with DESCRIBE on the
cluster, else only the groups the principal may describe.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import coordinator_of
from logstore.broker.groups.share_groups import share_coordinator_of
from logstore.coordinator.group.group_coordinator import GroupOverview
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(16, ctx.version).response_module
    states = getattr(request, "states_filter", ())
    types = getattr(request, "types_filter", ())
    overviews = coordinator_of(ctx.broker).list_groups(states or None, types or None)
    if not types or "share" in {kind.strip().lower() for kind in types}:
        wanted = {state.strip().lower() for state in states} if states else None
        overviews += [
            GroupOverview(group.group_id, "share", group.state, "share")
            for group in share_coordinator_of(ctx.broker).groups()
            if wanted is None or group.state.lower() in wanted
        ]
    everything = ctx.broker.authorizer is None or operations.allowed_cluster(ctx)
    groups = tuple(
        build(
            module.ListedGroup,
            group_id=overview.group_id,
            protocol_type=overview.protocol_type,
            group_state=overview.state,
            group_type=overview.group_type,
        )
        for overview in overviews
        if everything or operations.allowed(ctx, ResourceType.GROUP, overview.group_id)
    )
    return build(
        module.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups
    )


API = Api(key=16, name="ListGroups", min_version=0, max_version=5, handle=handle)

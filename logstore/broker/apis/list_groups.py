"""ListGroups (key 16): every group this coordinator knows.

From v4 a non-empty ``states_filter`` keeps the groups in those states
(Kafka's names, matched case-insensitively: Empty, PreparingRebalance,
CompletingRebalance, Stable, Dead) and each group reports its state. From
v5 every group is of type "classic" (this broker has no KIP-848 groups): a
non-empty ``types_filter`` without "classic" lists nothing.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.groups import coordinator_of
from logstore.broker.server import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec

CLASSIC = "classic"


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(16, ctx.version).response_module
    states = getattr(request, "states_filter", ())
    types = getattr(request, "types_filter", ())
    overviews = coordinator_of(ctx.broker).list_groups(states or None)
    if types and CLASSIC not in {t.lower() for t in types}:
        overviews = []
    groups = tuple(
        build(
            module.ListedGroup,
            group_id=overview.group_id,
            protocol_type=overview.protocol_type,
            group_state=overview.state,
            group_type=CLASSIC,
        )
        for overview in overviews
    )
    return build(
        module.ListGroupsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, groups=groups
    )


API = Api(key=16, name="ListGroups", min_version=0, max_version=5, handle=handle)

"""DeleteGroups (key 42): delete groups that have no members, with their offsets.

An Empty group is deleted (tombstones for its offsets and metadata go to
``__consumer_offsets``); a group with members answers NON_EMPTY_GROUP, an
unknown one GROUP_ID_NOT_FOUND. A group named twice gets one result. A share
group (KIP-932) is deleted by the share coordinator, with its share-partitions.

With an authorizer: DELETE on each group, else GROUP_AUTHORIZATION_FAILED for it
(security/operations.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import coordinator_of
from logstore.broker.groups.share_groups import share_coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(42, ctx.version).response_module
    names = list(dict.fromkeys(request.groups_names))
    allowed = [name for name in names if operations.allowed(ctx, ResourceType.GROUP, name)]
    errors = dict.fromkeys(names, ErrorCode.group_authorization_failed)
    share = share_coordinator_of(ctx.broker)
    shared = [name for name in allowed if share.group(name) is not None]
    classic = [name for name in allowed if name not in shared]
    errors.update({name: share.delete_group(name) for name in shared})
    errors.update(coordinator_of(ctx.broker).delete_groups(classic) if classic else {})
    results = tuple(
        build(module.DeletableGroupResult, group_id=name, error_code=errors[name]) for name in names
    )
    return build(module.DeleteGroupsResponse, throttle_time=NO_THROTTLE, results=results)


API = Api(key=42, name="DeleteGroups", min_version=0, max_version=2, handle=handle)

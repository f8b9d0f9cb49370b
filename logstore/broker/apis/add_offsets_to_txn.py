"""AddOffsetsToTxn (key 25): a consumer group's offsets join a producer's transaction.

The group's ``__consumer_offsets`` partition is added to the transaction, so
its TxnOffsetCommit records get the transaction's marker. v0-v1 read
PRODUCER_FENCED as INVALID_PRODUCER_EPOCH.

With an authorizer (security/operations.py): WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and READ on the group (else GROUP_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import offsets_appender_of
from logstore.broker.transactions.state_topic import coordinator_of, for_version
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(25, ctx.version).response_module
    if not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        denied = ErrorCode.transactional_id_authorization_failed
    elif not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        denied = ErrorCode.group_authorization_failed
    else:
        denied = None
    if denied is not None:
        return build(module.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=denied)
    partitions = ctx.broker.metadata.partition_count(OFFSETS_TOPIC) or offsets_appender_of(ctx.broker).partitions
    error = await coordinator_of(ctx.broker).add_partitions(
        request.transactional_id,
        request.producer_id,
        request.producer_epoch,
        [(OFFSETS_TOPIC, partition_for(request.group_id, partitions))],
    )
    return build(module.AddOffsetsToTxnResponse, throttle_time=NO_THROTTLE, error_code=for_version(error, ctx.version, 2))


API = Api(key=25, name="AddOffsetsToTxn", min_version=0, max_version=3, handle=handle)

"""EndTxn (key 26): commit or abort a producer's transaction.

Answered once the coordinator has written PrepareCommit or PrepareAbort; the
markers and the completion follow (see
:mod:`logstore.coordinator.txn.transaction_coordinator`). v0-v1 read PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH.

With an authorizer: WRITE on the transactional id, else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED (security/operations.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.transactions.state_topic import coordinator_of, for_version
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(26, ctx.version).response_module
    if not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        return build(
            module.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.transactional_id_authorization_failed
        )
    error = await coordinator_of(ctx.broker).end_transaction(
        request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed)
    )
    return build(module.EndTxnResponse, throttle_time=NO_THROTTLE, error_code=for_version(error, ctx.version, 2))


API = Api(key=26, name="EndTxn", min_version=0, max_version=3, handle=handle)

"""ListTransactions (key 66, KIP-664): the transactional ids this broker coordinates.

Filtered by state names, producer ids and (v1, KIP-994) a minimum duration
of the open transaction in ms; state names Kafka does not know come back in
``unknown_state_filters``.

With an authorizer: only the transactional ids the principal may describe
(security/operations.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.transactions.state_topic import coordinator_of
from logstore.coordinator.txn.transaction_log import TxnState
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

_KNOWN = {state.wire_name for state in TxnState}


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(66, ctx.version).response_module
    filters = tuple(request.state_filters)
    unknown = tuple(name for name in filters if name not in _KNOWN)
    found = coordinator_of(ctx.broker).list(
        [name for name in filters if name in _KNOWN] if filters and len(unknown) < len(filters) else filters,
        request.producer_id_filters,
        int(getattr(request, "duration_filter", -1)),
    )
    states = () if filters and len(unknown) == len(filters) else tuple(
        build(module.TransactionState, transactional_id=m.transactional_id, producer_id=m.producer_id,
              transaction_state=m.state.wire_name)
        for m in found
        if operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, m.transactional_id)
    )  # fmt: skip
    return build(
        module.ListTransactionsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        unknown_state_filters=unknown,
        transaction_states=states,
    )


API = Api(key=66, name="ListTransactions", min_version=0, max_version=1, handle=handle)

"""DescribeTransactions (key 65, KIP-664): the state of transactional ids at their coordinator.

Per id: its state ("Ongoing", "CompleteCommit", ...), timeout, start time
(-1 when no transaction is open), producer id and epoch and the partitions
of the open transaction; TRANSACTIONAL_ID_NOT_FOUND for an id never seen,
NOT_COORDINATOR when another broker coordinates it.

With an authorizer (security/operations.py): DESCRIBE on each transactional id
(else TRANSACTIONAL_ID_AUTHORIZATION_FAILED); the transaction's topics the principal
may not describe are left out.
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.transactions.state_topic import coordinator_of
from logstore.protocol import NO_THROTTLE, build, codec, group_by_topic
from logstore.security import operations
from logstore.security.acls import ResourceType

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def _time(ms: int) -> datetime.datetime:
    return _EPOCH + datetime.timedelta(milliseconds=ms)


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(65, ctx.version).response_module
    coordinator = coordinator_of(ctx.broker)
    states = []
    for txn_id in request.transactional_ids:
        if not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, txn_id):
            error, metadata = ErrorCode.transactional_id_authorization_failed, None
        else:
            error, metadata = coordinator.describe(txn_id)
        if metadata is None:
            states.append(
                build(
                    module.TransactionState,
                    error_code=error,
                    transactional_id=txn_id,
                    transaction_state="",
                    transaction_timeout=datetime.timedelta(0),
                    transaction_start_time=_time(-1),
                    producer_id=-1,
                    producer_epoch=-1,
                    topics=(),
                )
            )
            continue
        # Topics the principal may not describe are left out, as Kafka does.
        by_topic = group_by_topic(tp for tp in sorted(metadata.partitions) if operations.allowed(ctx, ResourceType.TOPIC, tp[0]))
        states.append(
            build(
                module.TransactionState,
                error_code=ErrorCode.none,
                transactional_id=txn_id,
                transaction_state=metadata.state.wire_name,
                transaction_timeout=datetime.timedelta(milliseconds=metadata.timeout_ms),
                transaction_start_time=_time(metadata.start_ms),
                producer_id=metadata.producer_id,
                producer_epoch=max(metadata.producer_epoch, 0),
                topics=tuple(build(module.TopicData, topic=t, partitions=tuple(p)) for t, p in by_topic.items()),
            )
        )
    return build(module.DescribeTransactionsResponse, throttle_time=NO_THROTTLE, transaction_states=tuple(states))


API = Api(key=65, name="DescribeTransactions", min_version=0, max_version=0, handle=handle)

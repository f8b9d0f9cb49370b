"""InitProducerId (key 22): a producer id and epoch for an idempotent or transactional producer.

Without a transactional id, Kafka hands every caller a fresh producer id at
epoch 0 (a given id and epoch, KIP-360's bump, are ignored too); so do we,
from blocks reserved durably so ids are never reused. With one, the
transaction coordinator of the id answers (see
:mod:`logstore.coordinator.txn.transaction_coordinator`): the id's producer id with its
epoch bumped, fencing earlier producers of the id (and aborting their open
transaction first: CONCURRENT_TRANSACTIONS until then), or
INVALID_TRANSACTION_TIMEOUT past ``transaction.max.timeout.ms``. Versions
below 4 read PRODUCER_FENCED as INVALID_PRODUCER_EPOCH.

With an authorizer (security/operations.py): WRITE on the transactional id (else
TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer needs IDEMPOTENT_WRITE
on the cluster or WRITE on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import millis
from logstore.broker.transactions.state_topic import coordinator_of, for_version
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


def _denied(ctx: RequestContext, request: Any) -> ErrorCode | None:
    """WRITE on the transactional id; for an idempotent producer IDEMPOTENT_WRITE on the
    cluster or WRITE on some topic (KIP-679); None if allowed."""
    if ctx.broker.authorizer is None:
        return None
    if request.transactional_id is not None:
        if operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
            return None
        return ErrorCode.transactional_id_authorization_failed
    if operations.allowed_cluster(ctx) or operations.allowed_on_some(ctx, ResourceType.TOPIC, "any"):
        return None
    return ErrorCode.cluster_authorization_failed


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(22, ctx.version).response_module
    denied = _denied(ctx, request)
    if denied is not None:
        return build(
            module.InitProducerIdResponse, throttle_time=NO_THROTTLE, error_code=denied, producer_id=-1,
            producer_epoch=-1,
        )  # fmt: skip
    if request.transactional_id is not None:
        error, producer_id, epoch = await coordinator_of(ctx.broker).init_producer_id(
            request.transactional_id,
            millis(request.transaction_timeout),
            int(getattr(request, "producer_id", -1)),
            int(getattr(request, "producer_epoch", -1)),
        )
        return build(
            module.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=for_version(error, ctx.version, 4),
            producer_id=producer_id,
            producer_epoch=epoch,
        )
    producer_id = ctx.broker.producer_ids.allocate()
    return build(
        module.InitProducerIdResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        producer_id=producer_id,
        producer_epoch=0,
    )


API = Api(key=22, name="InitProducerId", min_version=0, max_version=4, handle=handle)

"""InitProducerId (key 22): a producer id and epoch for an idempotent producer.

Without a transactional id, Kafka hands every caller a fresh producer id at
epoch 0 (a given id and epoch, KIP-360's bump, are ignored too); so do we,
from blocks reserved durably so ids are never reused. Transactions are not
supported: a transactional id gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED and
a log line saying so.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.server import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec

_log = logging.getLogger("logstore.broker")


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(22, ctx.version).response_module
    if request.transactional_id is not None:
        _log.warning(
            "client %s asked for transactional id %r: transactions are not supported",
            ctx.header.client_id,
            request.transactional_id,
        )
        return build(
            module.InitProducerIdResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.transactional_id_authorization_failed,
            producer_id=-1,
            producer_epoch=-1,
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

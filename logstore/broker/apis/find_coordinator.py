"""FindCoordinator (key 10): which broker coordinates a group (always this one).

Key type 0 (a consumer group) answers this broker's advertised address. Key
type 1 (a transactional id) answers TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
as InitProducerId does: transactions are not supported, and this makes a
transactional producer fail at once with that error instead of retrying
COORDINATOR_NOT_AVAILABLE until its timeout. Key type 2 (a share group, v6)
is INVALID_REQUEST, Kafka's answer with share groups disabled, and so is an
unknown key type. From v4 one request asks for several keys
(``coordinator_keys``) and gets one result each. v1-v3 carry Kafka's
``Errors.message()`` ("NONE" on success) in ``error_message``.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.groups import ERROR_MESSAGES
from logstore.broker.server import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec

_log = logging.getLogger("logstore.broker")

GROUP, TRANSACTION, SHARE = 0, 1, 2
_TRANSACTIONS_MESSAGE = "Transactions are not supported by this broker."


def _lookup(ctx: RequestContext, key_type: int, key: str) -> tuple[ErrorCode, str | None]:
    """(error, message) for one key; NONE means this broker."""
    if key_type == GROUP:
        if ctx.broker.coordinator is None:
            return ErrorCode.coordinator_not_available, None
        return ErrorCode.none, None
    if key_type == TRANSACTION:
        _log.warning(
            "client %s asked for the coordinator of transactional id %r: transactions are not supported",
            ctx.header.client_id,
            key,
        )
        return ErrorCode.transactional_id_authorization_failed, _TRANSACTIONS_MESSAGE
    if key_type == SHARE:
        return ErrorCode.invalid_request, "Share groups are not supported by this broker."
    return ErrorCode.invalid_request, f"Unknown coordinator type received: {key_type}"


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(10, ctx.version).response_module
    key_type = int(getattr(request, "key_type", GROUP))
    host, port = ctx.broker.advertised
    node = ctx.broker.node_id

    def where(error: ErrorCode) -> dict[str, Any]:
        if error == ErrorCode.none:
            return {"node_id": node, "host": host, "port": port}
        return {"node_id": -1, "host": "", "port": -1}

    if ctx.version < 4:
        error, message = _lookup(ctx, key_type, request.key)
        return build(
            module.FindCoordinatorResponse,
            throttle_time=NO_THROTTLE,
            error_code=error,
            error_message=message or ERROR_MESSAGES.get(error, error.name),
            **where(error),
        )
    coordinators = []
    for key in request.coordinator_keys:
        error, message = _lookup(ctx, key_type, key)
        if error != ErrorCode.none and message is None:
            message = ERROR_MESSAGES.get(error, error.name)
        coordinators.append(
            build(module.Coordinator, key=key, error_code=error, error_message=message, **where(error))
        )
    return build(module.FindCoordinatorResponse, throttle_time=NO_THROTTLE, coordinators=tuple(coordinators))


API = Api(key=10, name="FindCoordinator", min_version=0, max_version=6, handle=handle)

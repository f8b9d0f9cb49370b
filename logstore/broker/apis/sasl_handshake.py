"""SaslHandshake (key 17): pick the SASL mechanism of a SASL listener's connection (KIP-43, KIP-152).

v0 is followed by raw, unframed tokens; v1 by SaslAuthenticate requests (see
logstore/security/sasl.py). A mechanism not enabled on the listener answers
UNSUPPORTED_SASL_MECHANISM with the enabled ones and closes the connection; a
handshake on a listener without SASL, or out of order, answers
ILLEGAL_SASL_STATE (and closes, on a SASL listener).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import build, codec


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(17, ctx.version).response_module
    session = ctx.connection.sasl
    if session is None:
        return build(module.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())
    outcome = session.handshake(request.mechanism, ctx.version)
    error = {
        "ok": ErrorCode.none,
        "unsupported": ErrorCode.unsupported_sasl_mechanism,
        "illegal": ErrorCode.illegal_sasl_state,
    }[outcome]
    return build(module.SaslHandshakeResponse, error_code=error, mechanisms=session.listener.mechanisms)


API = Api(key=17, name="SaslHandshake", min_version=0, max_version=1, handle=handle)

"""SaslAuthenticate (key 36): one SASL token each way, after SaslHandshake v1 (KIP-152).

A failed exchange answers SASL_AUTHENTICATION_FAILED with the mechanism's
message (PLAIN: Kafka's "Authentication failed: Invalid username or
password") and closes the connection. v1+ carries ``session_lifetime_ms``
(``connections.max.reauth.ms``, KIP-368; 0 when re-authentication is off).
"""

from __future__ import annotations

import datetime
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import build, codec
from logstore.security.errors import SaslAuthenticationError
from logstore.security.sasl import IllegalSaslState


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(36, ctx.version).response_module
    session = ctx.connection.sasl
    error, message, token, lifetime = ErrorCode.none, None, b"", 0
    if session is None or session.legacy:
        error, message = ErrorCode.illegal_sasl_state, "Unexpected SaslAuthenticate request"
        if session is not None:
            session.close_after_response = True
            session.close_reason = "SaslAuthenticate after SaslHandshake v0 (ILLEGAL_SASL_STATE)"
    else:
        try:
            token, lifetime = session.authenticate(bytes(request.auth_bytes), ctx.connection, ctx.version)
        except SaslAuthenticationError as e:
            error, message = ErrorCode.sasl_authentication_failed, str(e)
        except IllegalSaslState as e:
            error, message = ErrorCode.illegal_sasl_state, str(e)
    return build(
        module.SaslAuthenticateResponse,
        error_code=error,
        error_message=message,
        auth_bytes=token,
        session_lifetime=datetime.timedelta(milliseconds=lifetime),
    )


API = Api(key=36, name="SaslAuthenticate", min_version=0, max_version=2, handle=handle)

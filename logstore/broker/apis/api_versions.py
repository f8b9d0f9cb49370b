"""ApiVersions (key 18), KIP-511: the API versions this broker serves.

The response header is always v0. A request version we do not serve gets a
v0 response with UNSUPPORTED_VERSION and our ranges, so the client can retry
with a version we know. From v3 the client names its software; a name or
version outside Kafka's pattern is INVALID_REQUEST.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec, encode_response

_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


class ApiVersions:
    """ApiVersions over the APIs a broker serves, itself among them (apis/__init__.py builds it
    with the registry it then fills)."""

    def __init__(self, served: Mapping[int, Api]) -> None:
        self._served = served
        self.api = Api(key=18, name="ApiVersions", min_version=0, max_version=4, handle=self.handle)

    def _response(self, version: int, error: ErrorCode) -> Any:
        module = codec(18, version).response_module
        keys = tuple(
            build(module.ApiVersion, api_key=api.key, min_version=api.min_version, max_version=api.max_version)
            for api in sorted(self._served.values(), key=lambda a: a.key)
        )
        return build(module.ApiVersionsResponse, error_code=error, api_keys=keys, throttle_time=NO_THROTTLE)

    def unsupported(self, correlation_id: int) -> list[Any]:
        """The v0 response to an ApiVersions version we do not serve."""
        return encode_response(
            codec(18, 0), correlation_id, self._response(0, ErrorCode.unsupported_version), header_v0=True
        )

    async def handle(self, ctx: RequestContext, request: Any) -> Any:
        error = ErrorCode.none
        if ctx.version >= 3 and not (
            _SOFTWARE.match(request.client_software_name) and _SOFTWARE.match(request.client_software_version)
        ):
            error = ErrorCode.invalid_request
        return self._response(ctx.version, error)

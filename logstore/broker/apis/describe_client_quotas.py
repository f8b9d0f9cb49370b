"""DescribeClientQuotas (key 48, v0-v1): the quotas of the entities matching a filter (KIP-546).

Each filter component names an entity type (``user``, ``client-id``, ``ip``) and a match:
EXACT (0, the name given), DEFAULT (1, the ``<default>`` entity; no name), SPECIFIED (2, any
entity of that type, default included; no name). ``strict``: entities with a type the filter
does not name are left out. Errors (Kafka's, for the whole request): an empty entity type,
a duplicate type, a name where none belongs (or none for EXACT), an IP component combined
with a user or client id -> INVALID_REQUEST; an entity type Kafka does not know ->
UNSUPPORTED_VERSION. The default entity is reported with a null name.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.quotas.client_quotas import DEFAULT, check_filter
from logstore.protocol import NO_THROTTLE, build, codec


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(48, ctx.version).response_module
    components = [(c.entity_type, int(c.match_type), c.match) for c in request.components]
    problem = check_filter(components)
    if problem is not None:
        code, message = problem
        return build(
            module.DescribeClientQuotasResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode(code),
            error_message=message,
            entries=None,
        )
    entries = tuple(
        build(
            module.EntryData,
            entity=tuple(
                build(
                    module.EntityData, entity_type=entity_type, entity_name=None if name == DEFAULT else name
                )
                for entity_type, name in entity
            ),
            values=tuple(
                build(module.ValueData, key=key, value=value) for key, value in sorted(values.items())
            ),
        )
        for entity, values in ctx.broker.quotas.describe(components, bool(request.strict))
    )
    return build(
        module.DescribeClientQuotasResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        entries=entries,
    )


API = Api(48, "DescribeClientQuotas", 0, 1, handle)

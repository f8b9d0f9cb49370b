"""CreateAcls (key 30): add ACLs, one result per creation.

Kafka's AclApis: ALTER on the cluster first (every result
CLUSTER_AUTHORIZATION_FAILED); no authorizer: every result SECURITY_DISABLED.
A creation with an unknown or filter-only type (ANY, MATCH), an empty name, a
CLUSTER resource not named ``kafka-cluster`` or a principal without
``<type>:`` gets INVALID_REQUEST with the reason; the others are stored
(:meth:`logstore.security.authorizer.Authorizer.create_acls`, off the event
loop: the store writes a file or ZooKeeper). Adding an ACL that exists is a
success that changes nothing.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.describe_acls import NO_AUTHORIZER
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import binding_of

_log = logging.getLogger("logstore.security")


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(30, ctx.version).response_module
    auth = ctx.broker.authorizer
    creations = request.creations
    if not operations.allowed_cluster(ctx):
        errors: list[tuple[ErrorCode, str | None]] = [
            (ErrorCode.cluster_authorization_failed, "ALTER on the cluster is needed to create ACLs")
        ] * len(creations)
    elif auth is None:
        errors = [(ErrorCode.security_disabled, NO_AUTHORIZER)] * len(creations)
    else:
        bindings = [
            binding_of(
                c.resource_type,
                c.resource_name,
                c.resource_pattern_type,
                c.principal,
                c.host,
                c.operation,
                c.permission_type,
            )
            for c in creations
        ]
        try:
            reasons = await asyncio.get_running_loop().run_in_executor(None, auth.create_acls, bindings)
        except Exception as e:  # the store failed (disk, ZooKeeper): every creation fails, the broker stays
            _log.exception("storing ACLs failed")
            errors = [(ErrorCode.unknown_server_error, f"storing the ACLs failed: {e}")] * len(creations)
        else:
            errors = [
                (ErrorCode.none, None) if reason is None else (ErrorCode.invalid_request, reason)
                for reason in reasons
            ]
            for binding, reason in zip(bindings, reasons, strict=True):
                if reason is None:
                    _log.info("%s added ACL %s", ctx.principal, binding)
    return build(
        module.CreateAclsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(module.AclCreationResult, error_code=code, error_message=message)
            for code, message in errors
        ),
    )


API = Api(key=30, name="CreateAcls", min_version=1, max_version=3, handle=handle)

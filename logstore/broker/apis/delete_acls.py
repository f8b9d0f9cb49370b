"""DeleteAcls (key 31): remove the ACLs each filter matches; per filter, the ACLs removed.

Kafka's AclApis: ALTER on the cluster first (every filter
CLUSTER_AUTHORIZATION_FAILED); no authorizer: SECURITY_DISABLED; a filter with
unknown elements: INVALID_REQUEST for that filter (the others still apply).
Matching: :class:`logstore.security.acls.AclBindingFilter` (MATCH and ANY
pattern types select as Kafka's do).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.describe_acls import NO_AUTHORIZER, acl_filter, unknown_message
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import AclBinding

_log = logging.getLogger("logstore.security")


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(31, ctx.version).response_module
    auth = ctx.broker.authorizer
    filters = [acl_filter(f) for f in request.filters]
    results: list[tuple[ErrorCode, str | None, list[AclBinding]]]
    if not operations.allowed_cluster(ctx):
        message = "ALTER on the cluster is needed to delete ACLs"
        results = [(ErrorCode.cluster_authorization_failed, message, [])] * len(filters)
    elif auth is None:
        results = [(ErrorCode.security_disabled, NO_AUTHORIZER, [])] * len(filters)
    else:
        valid = [f for f in filters if not f.is_unknown()]
        try:
            removed = await asyncio.get_running_loop().run_in_executor(None, auth.delete_acls, valid)
        except Exception as e:
            _log.exception("deleting ACLs failed")
            results = [(ErrorCode.unknown_server_error, f"deleting the ACLs failed: {e}", [])] * len(filters)
        else:
            by_filter = iter(removed)
            results = []
            for f in filters:
                if f.is_unknown():
                    results.append((ErrorCode.invalid_request, unknown_message(f), []))
                else:
                    gone = next(by_filter)
                    results.append((ErrorCode.none, None, gone))
                    for binding in gone:
                        _log.info("%s removed ACL %s", ctx.principal, binding)
    return build(
        module.DeleteAclsResponse,
        throttle_time=NO_THROTTLE,
        filter_results=tuple(
            build(
                module.DeleteAclsFilterResult,
                error_code=code,
                error_message=message,
                matching_acls=tuple(
                    build(
                        module.DeleteAclsMatchingAcl,
                        error_code=ErrorCode.none,
                        error_message=None,
                        resource_type=int(b.pattern.resource_type),
                        resource_name=b.pattern.name,
                        pattern_type=int(b.pattern.pattern_type),
                        principal=b.entry.principal,
                        host=b.entry.host,
                        operation=int(b.entry.operation),
                        permission_type=int(b.entry.permission),
                    )
                    for b in gone
                ),
            )
            for code, message, gone in results
        ),
    )


API = Api(key=31, name="DeleteAcls", min_version=1, max_version=3, handle=handle)

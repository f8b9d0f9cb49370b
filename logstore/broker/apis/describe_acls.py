"""DescribeAcls (key 29): the ACLs a filter matches, grouped by resource pattern.

Kafka's AclApis: DESCRIBE on the cluster first (CLUSTER_AUTHORIZATION_FAILED);
no authorizer configured answers SECURITY_DISABLED; a filter with an unknown
resource type, pattern type, operation or permission (a code Kafka does not
know, or UNKNOWN) answers INVALID_REQUEST. Filters and matching: see
:class:`logstore.security.acls.AclBindingFilter`.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import AclBindingFilter, filter_of, group_by_pattern

NO_AUTHORIZER = "No Authorizer is configured on the broker; set authorizer.class.name to use ACLs"


def acl_filter(item: Any) -> AclBindingFilter:
    """A DescribeAcls request or a DeleteAcls filter as an :class:`AclBindingFilter`."""
    return filter_of(
        item.resource_type_filter, item.resource_name_filter, item.pattern_type_filter,
        item.principal_filter, item.host_filter, item.operation, item.permission_type,
    )  # fmt: skip


def unknown_message(f: AclBindingFilter) -> str:
    return f"Filter contains UNKNOWN elements: {f}"


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(29, ctx.version).response_module

    def answer(error: ErrorCode, message: str | None = None, resources: tuple[Any, ...] = ()) -> Any:
        return build(
            module.DescribeAclsResponse, throttle_time=NO_THROTTLE, error_code=error,
            error_message=message, resources=resources,
        )  # fmt: skip

    if not operations.allowed_cluster(ctx):
        return answer(
            ErrorCode.cluster_authorization_failed, "DESCRIBE on the cluster is needed to describe ACLs"
        )
    auth = ctx.broker.authorizer
    if auth is None:
        return answer(ErrorCode.security_disabled, NO_AUTHORIZER)
    f = acl_filter(request)
    if f.is_unknown():
        return answer(ErrorCode.invalid_request, unknown_message(f))
    grouped = group_by_pattern(auth.acls(f))
    return answer(
        ErrorCode.none,
        None,
        tuple(
            build(
                module.DescribeAclsResource,
                resource_type=int(pattern.resource_type),
                resource_name=pattern.name,
                pattern_type=int(pattern.pattern_type),
                acls=tuple(
                    build(
                        module.AclDescription,
                        principal=e.principal,
                        host=e.host,
                        operation=int(e.operation),
                        permission_type=int(e.permission),
                    )
                    for e in entries
                ),
            )
            for pattern, entries in grouped.items()
        ),
    )


API = Api(key=29, name="DescribeAcls", min_version=1, max_version=3, handle=handle)

"""DescribeUserScramCredentials (key 50, KIP-554): each user's SCRAM mechanisms and iterations.

Null or empty ``users`` describes every user with a credential. A named
user without one gets RESOURCE_NOT_FOUND; a user named twice gets
DUPLICATE_RESOURCE (Kafka's texts). Salts and keys are never returned.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.scram import MECHANISMS


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(50, ctx.version).response_module
    if not operations.allowed_cluster(ctx):  # DESCRIBE on the cluster (Kafka: the whole request)
        return build(
            module.DescribeUserScramCredentialsResponse,
            throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed,
            error_message=None,
            results=(),
        )
    users = ctx.broker.credential_store().users()
    names = [u.name for u in request.users or ()]
    results = []
    if not names:
        names = sorted(users)
    seen: dict[str, int] = {}
    for name in names:
        seen[name] = seen.get(name, 0) + 1
    for name in dict.fromkeys(names):
        error, message, infos = ErrorCode.none, None, ()
        if seen[name] > 1:
            error = ErrorCode.duplicate_resource
            message = f"Cannot describe SCRAM credentials for the same user twice in a single request: {name}"
        elif name not in users:
            error = ErrorCode.resource_not_found
            message = f"Attempt to describe a user credential that does not exist: {name}"
        else:
            infos = tuple(
                build(module.CredentialInfo, mechanism=MECHANISMS[m].kafka_id, iterations=c.iterations)
                for m, c in sorted(users[name].items())
            )
        results.append(
            build(
                module.DescribeUserScramCredentialsResult,
                user=name,
                error_code=error,
                error_message=message,
                credential_infos=infos,
            )
        )
    return build(
        module.DescribeUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        error_message=None,
        results=tuple(results),
    )


API = Api(key=50, name="DescribeUserScramCredentials", min_version=0, max_version=0, handle=handle)

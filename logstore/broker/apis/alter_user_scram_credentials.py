"""AlterUserScramCredentials (key 51, KIP-554): add, replace and delete SCRAM credentials.

An upsertion carries the salt and the salted password the client computed
(PBKDF2 client-side); the broker keeps only stored_key/server_key (see
logstore/security/scram.py). Per user, as Kafka's admin manager: an empty
name or iterations outside 4096..16384 are UNACCEPTABLE_CREDENTIAL, a
mechanism other than SCRAM-SHA-256/512 UNSUPPORTED_SASL_MECHANISM, one
(user, mechanism) altered twice DUPLICATE_RESOURCE, deleting a credential
that does not exist RESOURCE_NOT_FOUND; a user with any error has none of
its alterations applied. The rest are written in one store update (a file
alone, ZooKeeper in a cluster), off the event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.scram import BY_ID, MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(51, ctx.version).response_module
    store = ctx.broker.credential_store()
    existing = store.users()
    errors: dict[str, tuple[ErrorCode, str | None]] = {}
    order: dict[str, None] = {}
    pairs: dict[tuple[str, int], int] = {}
    for item in (*request.deletions, *request.upsertions):
        order[item.name] = None
        pairs[(item.name, item.mechanism)] = pairs.get((item.name, item.mechanism), 0) + 1

    def fail(user: str, code: ErrorCode, message: str | None) -> None:
        errors.setdefault(user, (code, message))

    if not operations.allowed_cluster(ctx):  # ALTER on the cluster: every user refused (Kafka's)
        for user in order:
            fail(user, ErrorCode.cluster_authorization_failed, None)

    for item in (*request.deletions, *request.upsertions):
        if not item.name:
            fail(item.name, ErrorCode.unacceptable_credential, "Username must not be empty")
        elif pairs[(item.name, item.mechanism)] > 1:
            fail(item.name, ErrorCode.duplicate_resource,
                 "A user credential cannot be altered twice in the same request")  # fmt: skip
        elif item.mechanism not in BY_ID:
            fail(item.name, ErrorCode.unsupported_sasl_mechanism, "Unknown SCRAM mechanism")
    for item in request.upsertions:
        if item.name in errors:
            continue
        if item.iterations < MIN_ITERATIONS:
            fail(item.name, ErrorCode.unacceptable_credential, "Too few iterations")
        elif item.iterations > MAX_ITERATIONS:
            fail(item.name, ErrorCode.unacceptable_credential, "Too many iterations")
        elif not item.salt or len(item.salted_password) != BY_ID[item.mechanism].digest_size:
            fail(item.name, ErrorCode.unacceptable_credential,
                 "The salt must not be empty and the salted password must be one digest long")  # fmt: skip
    for item in request.deletions:
        if item.name not in errors and BY_ID[item.mechanism].name not in existing.get(item.name, {}):
            fail(
                item.name,
                ErrorCode.resource_not_found,
                "Attempt to delete a user credential that does not exist",
            )
    deletions = [(d.name, BY_ID[d.mechanism].name) for d in request.deletions if d.name not in errors]
    upsertions = [
        (
            u.name,
            BY_ID[u.mechanism].name,
            ScramCredential.from_salted_password(
                BY_ID[u.mechanism], bytes(u.salt), bytes(u.salted_password), u.iterations
            ),
        )
        for u in request.upsertions
        if u.name not in errors
    ]
    if deletions or upsertions:
        try:
            await asyncio.get_running_loop().run_in_executor(None, store.alter, deletions, upsertions)
        except Exception as e:  # the store could not be written: every pending user fails
            for user in order:
                fail(user, ErrorCode.unknown_server_error, f"cannot store the credentials: {e}")
    return build(
        module.AlterUserScramCredentialsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(
                module.AlterUserScramCredentialsResult,
                user=user,
                error_code=errors.get(user, (ErrorCode.none, None))[0],
                error_message=errors.get(user, (ErrorCode.none, None))[1],
            )
            for user in order
        ),
    )


API = Api(key=51, name="AlterUserScramCredentials", min_version=0, max_version=0, handle=handle)

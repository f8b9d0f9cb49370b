"""Who may do what in the registry: each request's operation on a subject, asked of an ``Authorize``.

With basic auth on and an authorizer given (the broker's ACLs: broker/schema_registry.py),
every request is mapped to (operation, subject) and asked before its handler runs:

| request | operation | subject |
|---|---|---|
| GET of a subject's versions, schemas, ``referencedby``; POST ``/subjects/{s}`` (lookup); POST ``/compatibility/subjects/{s}/...`` | ``READ`` | ``s`` |
| POST ``/subjects/{s}/versions`` (register); DELETE ``/subjects/{s}[/versions/{v}]`` | ``WRITE`` | ``s`` |
| PUT/DELETE ``/config/{s}``, ``/mode/{s}`` | ``ALTER_CONFIGS`` | ``s`` |
| GET ``/config/{s}``, ``/mode/{s}`` | ``READ`` | ``s`` |
| PUT/DELETE ``/config``, ``/mode`` (global) | ``ALTER_CONFIGS`` | None (the registry) |
| GET ``/subjects`` | the answer keeps the subjects the user may ``READ`` | |
| GET ``/schemas/ids/{id}[/...]`` | ``READ`` of any subject (deleted ones too) with that id | |
| GET ``/``, ``/schemas/types``, ``/config``, ``/mode`` (global) | any authenticated user | |

A refusal answers 403 with error_code 40301 naming the user, operation and subject. The
``Authorize`` decides what a subject means in ACLs (the broker: its topic's ACL).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable

from aiohttp import web

from logstore.schemas import errors
from logstore.schemas.service import RegistryService

Authorize = Callable[[str, str, str, "str | None"], bool]
"""(user, client host, operation: READ | WRITE | ALTER_CONFIGS, subject or None for the registry) -> allowed."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
USER_KEY = "logstore.user"
"""Where basic auth leaves the request's user (``request[USER_KEY]``)."""
OPEN = ("/", "/schemas/types", "/config", "/mode")


def needed(request: web.Request) -> tuple[str, str | None] | None:
    """The (operation, subject) a request needs; None when any authenticated user may (or the
    answer is filtered: ``/subjects``, ``/schemas/ids``)."""
    resource = request.match_info.route.resource
    route = resource.canonical if resource is not None else ""
    method = request.method
    subject = request.match_info.get("subject")
    if route.startswith(("/config", "/mode")):
        if method == "GET":
            return None if subject is None else ("READ", subject)
        return "ALTER_CONFIGS", subject
    if subject is None:
        return None
    if route.startswith("/compatibility"):
        return "READ", subject
    if method == "DELETE" or (method == "POST" and route.endswith("/versions")):
        return "WRITE", subject
    return "READ", subject


def _denied(user: str, operation: str, subject: str | None) -> web.Response:
    what = f"subject '{subject}'" if subject is not None else "the schema registry"
    error = errors.RegistryError(
        403, 40301, f"User '{user}' is not authorized to {operation} on {what}; an ACL must allow it "
        "(docs/schemas.md, Security: a subject's topic ACL)",
    )  # fmt: skip
    return web.Response(body=json.dumps(error.body()).encode(), status=403, content_type="application/vnd.schemaregistry.v1+json")


def middleware(authorize: Authorize, service: RegistryService) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
    """The aiohttp middleware asking ``authorize`` (after basic auth, which sets the user)."""

    @web.middleware
    async def acls(request: web.Request, handler: Handler) -> web.StreamResponse:
        user = str(request.get(USER_KEY, ""))
        host = request.remote or "*"
        need = needed(request)
        if need is not None:
            if not authorize(user, host, need[0], need[1]):
                return _denied(user, need[0], need[1])
            return await handler(request)
        route = request.match_info.route.resource
        canonical = route.canonical if route is not None else ""
        if canonical.startswith("/schemas/ids/{id}"):
            try:
                used = service.read().subject_versions_of(int(request.match_info["id"]), deleted=True)
            except (errors.RegistryError, ValueError):
                return await handler(request)  # unknown: the handler answers 40403
            if not any(authorize(user, host, "READ", subject) for subject, _ in used):
                return _denied(user, "READ", used[0][0] if used else None)
            return await handler(request)
        answer = await handler(request)
        if canonical == "/subjects" and request.method == "GET" and isinstance(answer, web.Response) and answer.status == 200:
            assert answer.body is not None
            subjects = [s for s in json.loads(bytes(answer.body)) if authorize(user, host, "READ", s)]  # type: ignore[arg-type]
            answer.body = json.dumps(subjects, separators=(",", ":")).encode()
        return answer

    return acls

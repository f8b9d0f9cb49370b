"""Confluent Schema Registry's REST API over a :class:`RegistryService`, with aiohttp.

Routes (Confluent's, as its clients call them; bodies and answers are JSON,
``application/vnd.schemaregistry.v1+json``)::

    GET    /subjects                                  ?deleted ?subjectPrefix
    GET    /subjects/{s}/versions                     ?deleted
    POST   /subjects/{s}/versions                     ?normalize     -> {"id": 1}
    GET    /subjects/{s}/versions/{v}                 ?deleted       (v: 1.., -1 or latest)
    GET    /subjects/{s}/versions/{v}/schema                         -> the schema text itself
    GET    /subjects/{s}/versions/{v}/referencedby                   -> [ids]
    DELETE /subjects/{s}/versions/{v}                 ?permanent     -> 1
    POST   /subjects/{s}                              ?normalize ?deleted (lookup)
    DELETE /subjects/{s}                              ?permanent     -> [1, 2]
    GET    /schemas/ids/{id}                          ?subject       -> {"schema": ...}
    GET    /schemas/ids/{id}/schema | /versions | /subjects
    GET    /schemas/types
    POST   /compatibility/subjects/{s}/versions[/{v}] ?verbose       -> {"is_compatible": true}
    GET|PUT|DELETE /config, /config/{s}               ?defaultToGlobal
    GET|PUT /mode, GET|PUT|DELETE /mode/{s}           ?defaultToGlobal ?force

Errors are Confluent's JSON ``{"error_code": 40401, "message": ...}`` with
its HTTP status (errors.py); a body that is not JSON answers 400, JSON of the
wrong shape 422, a body over ``max_body_bytes`` 413, a content type that is
not JSON 415, an unknown path 404 and a wrong method 405, all in that shape.
A failure inside a handler answers 500 (50001) and is logged; the registry
is not changed by it (writes change it only through the journal).

With an ``authenticate`` check (HTTP basic auth: the broker checks its SASL
PLAIN and SCRAM users), every request must carry ``Authorization: Basic
base64(user:password)`` that passes it, else 401 (error_code 401, with
``WWW-Authenticate: Basic``). The check runs before the route is looked at.
With an ``authorize`` check too, each request's operation on its subject is
asked of it (schemas/acls.py: READ, WRITE, ALTER_CONFIGS; 403 / 40301).

Writes on a node that is not the writer (:meth:`Journal.writer` names
another) are forwarded to it over HTTP, as Confluent's followers do, with the
caller's ``Authorization`` header; a forwarded request is not forwarded again
(a loop answers 50003). The writer's answer names the journal position after
the write; the forwarder waits (a few seconds at most) until its own replica
holds it before answering, so a read through the same node sees the write.

:class:`RegistryServer` listens on one or more ``(host, port)`` in the
running event loop (the broker's), and stops with it.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import aiohttp
from aiohttp import web

from logstore.schemas import acls as subject_acls
from logstore.schemas import compatibility as compat
from logstore.schemas import errors
from logstore.schemas.records import AVRO, Record, Reference, SchemaValue
from logstore.schemas.registry import Registry, as_json
from logstore.schemas.service import RegistryService

_log = logging.getLogger("logstore.schemas")

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
JSON_TYPES = frozenset({
    CONTENT_TYPE, "application/vnd.schemaregistry+json", "application/json", "application/octet-stream",
})  # fmt: skip
"""Request content types taken as JSON (Confluent's; octet-stream too, as curl sends by default)."""
MAX_BODY_BYTES = 8 * 1024 * 1024
"""The largest request body (a schema with its envelope); larger ones answer 413."""
MAX_BODY_KEY = web.AppKey("max_body_bytes", int)
FORWARDED = "X-Logstore-Forwarded"
FORWARD_TIMEOUT_S = 30.0
FORWARD_CATCH_UP_S = 5.0
"""How long a forwarder waits for its own replica to hold the write it forwarded."""
POSITION = "X-Logstore-Schemas-Position"
"""A write's answer header: the journal position after it (the ``_schemas`` offset)."""
WRITE_ATTEMPTS = 3
"""A write tries this many times to find its writer (here or forwarded) when the writer moves."""
ID_ANSWERS_MAX = 100_000
"""The most ``/schemas/ids/{id}`` answers kept."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Authenticate = Callable[[str, str], Awaitable[bool]]
"""(user, password) -> whether they are one of the users the registry accepts."""
AUTHENTICATE_KEY: web.AppKey[Authenticate] = web.AppKey("authenticate")
REALM = 'Basic realm="SchemaRegistry"'


def _answer(body: object, status: int = 200) -> web.Response:
    return web.Response(
        body=json.dumps(body, separators=(",", ":")).encode(), status=status, content_type=CONTENT_TYPE
    )


def _error(error: errors.RegistryError) -> web.Response:
    return _answer(error.body(), error.status)


def _flag(request: web.Request, name: str) -> bool:
    """A boolean query parameter (true/false in any case, as Java's Boolean.parseBoolean reads it)."""
    return request.query.get(name, "false").strip().lower() == "true"


def _schema_id(request: web.Request) -> int:
    text = request.match_info["id"]
    try:
        return int(text)
    except ValueError:
        raise errors.schema_not_found() from None


@web.middleware
async def _confluent_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error as Confluent's JSON (see the module doc)."""
    try:
        return await handler(request)
    except errors.RegistryError as e:
        return _error(e)
    except web.HTTPRequestEntityTooLarge:
        return _error(errors.RegistryError(
            413, 413,
            f"the request body is larger than {request.app[MAX_BODY_KEY]} bytes (the registry's limit, "
            "schema.registry.max.request.bytes); send a smaller schema",
        ))  # fmt: skip
    except web.HTTPException as e:
        if e.status < 400:
            raise
        return _error(errors.RegistryError(e.status, e.status, f"HTTP {e.status} {e.reason}"))
    except (asyncio.CancelledError, KeyboardInterrupt):
        raise
    except Exception as e:  # a defect: answer it, log it, keep serving
        _log.exception("schema registry: %s %s failed", request.method, request.path)
        return _error(errors.RegistryError(500, 50001, f"Internal error: {type(e).__name__}: {e}"))


@web.middleware
async def _basic_auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    """HTTP basic auth against the app's ``authenticate`` check (see the module doc)."""
    check = request.app[AUTHENTICATE_KEY]
    given = request.headers.get("Authorization", "")
    scheme, _, token = given.partition(" ")
    user = password = None
    sep = ""
    if scheme.lower() == "basic":
        try:
            user, sep, password = base64.b64decode(token.strip(), validate=True).decode("utf-8").partition(":")
        except (ValueError, UnicodeDecodeError):
            user = None
        if not sep:
            user = None
    if user is None or password is None or not await check(user, password):
        why = "no credentials" if not given else "bad credentials"
        answer = _error(errors.RegistryError(
            401, 401, f"Unauthorized: {why}; send HTTP basic auth (Authorization: Basic) with a user of "
            "the broker's SASL PLAIN or SCRAM users",
        ))  # fmt: skip
        answer.headers["WWW-Authenticate"] = REALM
        return answer
    request[subject_acls.USER_KEY] = user
    return await handler(request)


class RegistryApi:
    """The handlers of the routes above over one :class:`RegistryService`."""

    def __init__(self, service: RegistryService, client_ssl: ssl.SSLContext | None = None) -> None:
        """``client_ssl``: how writes forwarded to an https writer check its certificate."""
        self.service = service
        self.client_ssl = client_ssl
        self._session: aiohttp.ClientSession | None = None
        self._id_answers: dict[int, bytes] = {}  # schema_by_id's answers at journal position _answers_at
        self._answers_at = -1

    # -- bodies --------------------------------------------------------------

    async def _body(self, request: web.Request) -> dict[str, Any]:
        given = request.headers.get("Content-Type")
        if given and request.content_type not in JSON_TYPES:
            raise errors.RegistryError(
                415, 415, f"Content-Type {request.content_type!r} is not supported; send {CONTENT_TYPE}"
            )
        raw = await request.read()  # aiohttp stops at client_max_size: 413
        try:
            body = json.loads(raw)
        except (ValueError, UnicodeDecodeError) as e:
            raise errors.bad_request(f"the request body is not JSON: {e}") from None
        if not isinstance(body, dict):
            raise errors.unprocessable(f"the request body must be a JSON object, not {type(body).__name__}")
        return body

    def _schema_of(self, body: dict[str, Any], normalize: bool) -> tuple[str, str, tuple[Reference, ...]]:
        """(schema text, type, references) of a register/lookup/compatibility body; with
        ``normalize``, the text in its type's normal form (:meth:`Registry.normalize`)."""
        schema = body.get("schema")
        if not isinstance(schema, str) or not schema.strip():
            raise errors.invalid_schema("the body has no 'schema' string (the schema's text, JSON-escaped)")
        schema_type = body.get("schemaType") or AVRO
        if not isinstance(schema_type, str):
            raise errors.unprocessable("schemaType must be a string: AVRO, JSON or PROTOBUF")
        schema_type = schema_type.upper()
        if schema_type not in compat.TYPES:
            raise errors.invalid_schema(
                f"schema type {schema_type} is not supported; supported: {', '.join(compat.TYPES)}"
            )
        given = body.get("references") or []
        if not isinstance(given, list):
            raise errors.unprocessable("references must be a list of {name, subject, version}")
        refs = []
        for ref in given:
            try:
                refs.append(Reference(str(ref["name"]), str(ref["subject"]), int(ref["version"])))
            except (KeyError, TypeError, ValueError):
                raise errors.unprocessable(
                    f"reference {ref!r} is not {{name: string, subject: string, version: int}}"
                ) from None
        if normalize:
            schema = self._read().normalize(schema_type, schema, refs)
        return schema, schema_type, tuple(refs)

    # -- forwarding ----------------------------------------------------------

    async def _forwarded(self, request: web.Request) -> web.Response | None:
        """The writer's answer to a write made here when another node writes; None: write here."""
        writer = await self.service.journal.writer()
        if writer is None:
            return None
        if request.headers.get(FORWARDED):
            raise errors.forwarding_error(f"the request was forwarded here but {writer} is the primary")
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=FORWARD_TIMEOUT_S))
        headers = {FORWARDED: "1", "Content-Type": CONTENT_TYPE}
        if "Authorization" in request.headers:
            headers["Authorization"] = request.headers["Authorization"]
        body = await request.read() or None  # read once already by the handler: aiohttp keeps it
        try:
            async with self._session.request(
                request.method, writer.rstrip("/") + request.path_qs, data=body, headers=headers,
                ssl=self.client_ssl if writer.startswith("https:") and self.client_ssl is not None else True,
            ) as reply:
                payload = await reply.read()
                written = reply.headers.get(POSITION)
        except (aiohttp.ClientError, TimeoutError) as e:
            raise errors.forwarding_error(f"{writer}: {e or type(e).__name__}") from None
        if written is not None and written.isdigit():
            await self._await_position(int(written))
        return web.Response(body=payload, status=reply.status, content_type=CONTENT_TYPE)

    async def _await_position(self, position: int) -> None:
        """Wait (at most FORWARD_CATCH_UP_S) until this node's journal holds ``position``, so a
        read here after a write forwarded from here sees it (read-your-writes through any node)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + FORWARD_CATCH_UP_S
        for _ in range(int(FORWARD_CATCH_UP_S / 0.005) + 1):
            if self.service.journal.end() >= position or loop.time() > deadline:
                break
            await asyncio.sleep(0.005)
        self.service.catch_up()

    async def _write(self, request: web.Request, operation: Callable[[Registry], tuple[Any, list[Record]]],
                     answer: Callable[[Any], object]) -> web.Response:  # fmt: skip
        for attempt in range(WRITE_ATTEMPTS):
            forwarded = await self._forwarded(request)
            if forwarded is not None:
                return forwarded
            try:
                made = _answer(answer(await self.service.write(operation)))
                made.headers[POSITION] = str(self.service.position)  # a forwarder waits for it
                return made
            except errors.RegistryError as e:
                # 50004: the writer moved (another node was made it) while this one got ready to
                # write: ask again where to send it
                if e.code != 50004 or attempt == WRITE_ATTEMPTS - 1:
                    raise
        raise AssertionError("unreachable: the last attempt returns or raises")

    def _read(self) -> Registry:
        return self.service.read()

    # -- subjects ------------------------------------------------------------

    async def subjects(self, request: web.Request) -> web.Response:
        found = self._read().subjects(deleted=_flag(request, "deleted"))
        prefix = request.query.get("subjectPrefix")
        return _answer([s for s in found if s.startswith(prefix)] if prefix else found)

    async def versions(self, request: web.Request) -> web.Response:
        return _answer(self._read().versions(request.match_info["subject"], deleted=_flag(request, "deleted")))

    async def register(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        body = await self._body(request)
        schema, schema_type, refs = self._schema_of(body, _flag(request, "normalize"))
        given_id, given_version = body.get("id"), body.get("version")
        for name, value in (("id", given_id), ("version", given_version)):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
                raise errors.unprocessable(f"{name} must be an integer")
        schema_id = given_id if isinstance(given_id, int) and given_id > 0 else None
        version = given_version if isinstance(given_version, int) and given_version > 0 else None

        def operation(registry: Registry) -> tuple[int, list[Record]]:
            return registry.register(subject, schema, schema_type, refs, schema_id, version)

        return await self._write(request, operation, lambda made: {"id": made})

    async def version(self, request: web.Request) -> web.Response:
        made = self._version(request)
        return _answer(as_json(made))

    async def version_schema(self, request: web.Request) -> web.Response:
        made = self._version(request)
        return web.Response(text=made.schema, content_type=CONTENT_TYPE)

    async def referenced_by(self, request: web.Request) -> web.Response:
        registry = self._read()
        made = self._version(request)
        ids = sorted({m.id for vs in registry.state.versions.values() for m in vs.values() if not m.deleted
                      and any(r.subject == made.subject and r.version == made.version for r in m.references)})  # fmt: skip
        return _answer(ids)

    def _version(self, request: web.Request) -> SchemaValue:
        return self._read().version(
            request.match_info["subject"], request.match_info["version"], deleted=_flag(request, "deleted")
        )

    async def delete_version(self, request: web.Request) -> web.Response:
        subject, version = request.match_info["subject"], request.match_info["version"]
        permanent = _flag(request, "permanent")

        def operation(registry: Registry) -> tuple[int, list[Record]]:
            return registry.delete_version(subject, version, permanent)

        return await self._write(request, operation, lambda number: number)

    async def lookup(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        body = await self._body(request)
        schema, schema_type, refs = self._schema_of(body, _flag(request, "normalize"))
        made = self._read().lookup(subject, schema, schema_type, refs, deleted=_flag(request, "deleted"))
        return _answer(as_json(made))

    async def delete_subject(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        permanent = _flag(request, "permanent")

        def operation(registry: Registry) -> tuple[list[int], list[Record]]:
            return registry.delete_subject(subject, permanent)

        return await self._write(request, operation, lambda numbers: numbers)

    # -- schemas by id -------------------------------------------------------

    async def schema_by_id(self, request: web.Request) -> web.Response:
        """``/schemas/ids/{id}``: the serializers' hot path, so its answers are kept (as bytes) until
        the registry changes."""
        registry = self._read()
        if self._answers_at != self.service.position:
            self._id_answers.clear()
            self._answers_at = self.service.position
        schema_id = _schema_id(request)
        subject = request.query.get("subject")
        if subject and all(s != subject for s, _ in registry.subject_versions_of(schema_id, deleted=True)):
            raise errors.RegistryError(404, 40403, f"Schema {schema_id} not found under subject '{subject}'")
        body = self._id_answers.get(schema_id)
        if body is None:
            made = registry.schema(schema_id)
            out: dict[str, Any] = {}
            if made.schema_type != AVRO:
                out["schemaType"] = made.schema_type
            if made.references:
                out["references"] = [r.json() for r in made.references]
            out["schema"] = made.schema
            body = json.dumps(out, separators=(",", ":")).encode()
            if len(self._id_answers) < ID_ANSWERS_MAX:
                self._id_answers[schema_id] = body
        return web.Response(body=body, content_type=CONTENT_TYPE)

    async def schema_text_by_id(self, request: web.Request) -> web.Response:
        made = self._read().schema(_schema_id(request))
        return web.Response(text=made.schema, content_type=CONTENT_TYPE)

    async def id_versions(self, request: web.Request) -> web.Response:
        found = self._read().subject_versions_of(_schema_id(request), deleted=_flag(request, "deleted"))
        return _answer([{"subject": s, "version": v} for s, v in found])

    async def id_subjects(self, request: web.Request) -> web.Response:
        found = self._read().subject_versions_of(_schema_id(request), deleted=_flag(request, "deleted"))
        return _answer(sorted({s for s, _ in found}))

    async def types(self, request: web.Request) -> web.Response:
        return _answer(sorted(compat.TYPES))

    # -- compatibility -------------------------------------------------------

    async def compatible(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]
        version = request.match_info.get("version", "latest")
        body = await self._body(request)
        schema, schema_type, refs = self._schema_of(body, _flag(request, "normalize"))
        registry = self._read()
        if version not in ("latest", "-1"):
            registry.version(subject, version)  # 42202, 40401, 40402 first, as Confluent answers
        problems = registry.check(subject, schema, schema_type, refs, version)
        out: dict[str, Any] = {"is_compatible": not problems}
        if _flag(request, "verbose"):
            out["messages"] = problems
        return _answer(out)

    # -- config and mode -----------------------------------------------------

    async def get_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        registry = self._read()
        if subject is None:
            return _answer({"compatibilityLevel": registry.compatibility()})
        level = registry.compatibility(subject, fallback=_flag(request, "defaultToGlobal"))
        if level is None:
            raise errors.subject_compatibility_not_configured(subject)
        return _answer({"compatibilityLevel": level})

    async def put_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        body = await self._body(request)
        level = body.get("compatibility", body.get("compatibilityLevel"))
        if not isinstance(level, str):
            raise errors.invalid_compatibility(level)

        def operation(registry: Registry) -> tuple[str, list[Record]]:
            return level.upper(), registry.set_compatibility(level, subject)

        return await self._write(request, operation, lambda made: {"compatibility": made})

    async def delete_config(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")

        def operation(registry: Registry) -> tuple[str, list[Record]]:
            if subject is not None and registry.compatibility(subject, fallback=False) is None:
                registry.versions(subject, deleted=True)  # 40401 for a subject that does not exist
                raise errors.subject_compatibility_not_configured(subject)
            return registry.delete_compatibility(subject)

        return await self._write(request, operation, lambda level: {"compatibilityLevel": level})

    async def get_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        registry = self._read()
        if subject is not None and subject not in registry.state.modes and not _flag(request, "defaultToGlobal"):
            raise errors.subject_mode_not_configured(subject)
        return _answer({"mode": registry.mode(subject)})

    async def put_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info.get("subject")
        body = await self._body(request)
        mode = body.get("mode")
        if not isinstance(mode, str):
            raise errors.invalid_mode(mode)
        force = _flag(request, "force")

        def operation(registry: Registry) -> tuple[str, list[Record]]:
            return mode.upper(), registry.set_mode(mode, subject, force=force)

        return await self._write(request, operation, lambda made: {"mode": made})

    async def delete_mode(self, request: web.Request) -> web.Response:
        subject = request.match_info["subject"]

        def operation(registry: Registry) -> tuple[str, list[Record]]:
            return registry.delete_mode(subject)

        return await self._write(request, operation, lambda mode: {"mode": mode})

    async def root(self, request: web.Request) -> web.Response:
        return _answer({})

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


def build_app(
    service: RegistryService,
    max_body_bytes: int = MAX_BODY_BYTES,
    authenticate: Authenticate | None = None,
    client_ssl: ssl.SSLContext | None = None,
    authorize: subject_acls.Authorize | None = None,
) -> tuple[web.Application, RegistryApi]:
    """The aiohttp application serving ``service`` (routes in the module doc); ``authenticate``:
    basic auth's check (None: no authentication); ``authorize``: each request's operation on its
    subject (schemas/acls.py; only with ``authenticate``)."""
    api = RegistryApi(service, client_ssl)
    middlewares: list[Any] = [_confluent_errors] if authenticate is None else [_confluent_errors, _basic_auth]
    if authenticate is not None and authorize is not None:
        middlewares.append(subject_acls.middleware(authorize, service))
    app = web.Application(middlewares=middlewares, client_max_size=max_body_bytes)
    app[MAX_BODY_KEY] = max_body_bytes
    if authenticate is not None:
        app[AUTHENTICATE_KEY] = authenticate
    s, v = "/subjects/{subject}", "/versions/{version}"
    app.add_routes([
        web.get("/", api.root),
        web.get("/subjects", api.subjects),
        web.get(s + "/versions", api.versions),
        web.post(s + "/versions", api.register),
        web.get(s + v, api.version),
        web.get(s + v + "/schema", api.version_schema),
        web.get(s + v + "/referencedby", api.referenced_by),
        web.delete(s + v, api.delete_version),
        web.post(s, api.lookup),
        web.delete(s, api.delete_subject),
        web.get("/schemas/types", api.types),
        web.get("/schemas/ids/{id}", api.schema_by_id),
        web.get("/schemas/ids/{id}/schema", api.schema_text_by_id),
        web.get("/schemas/ids/{id}/versions", api.id_versions),
        web.get("/schemas/ids/{id}/subjects", api.id_subjects),
        web.post("/compatibility" + s + "/versions", api.compatible),
        web.post("/compatibility" + s + v, api.compatible),
        web.get("/config", api.get_config),
        web.put("/config", api.put_config),
        web.delete("/config", api.delete_config),
        web.get("/config/{subject}", api.get_config),
        web.put("/config/{subject}", api.put_config),
        web.delete("/config/{subject}", api.delete_config),
        web.get("/mode", api.get_mode),
        web.put("/mode", api.put_mode),
        web.get("/mode/{subject}", api.get_mode),
        web.put("/mode/{subject}", api.put_mode),
        web.delete("/mode/{subject}", api.delete_mode),
    ])  # fmt: skip
    return app, api


class RegistryServer:
    """The registry's HTTP listeners in the running event loop.

    ``bound``: the (host, port) pairs listened on, after :meth:`start`.
    :meth:`close` stops listening, ends the connections (a request in
    flight gets up to ``shutdown_timeout`` seconds) and closes the forwarding
    client. Not restartable.
    """

    def __init__(self, service: RegistryService, max_body_bytes: int = MAX_BODY_BYTES,
                 shutdown_timeout: float = 5.0, authenticate: Authenticate | None = None,
                 client_ssl: ssl.SSLContext | None = None,
                 authorize: subject_acls.Authorize | None = None) -> None:  # fmt: skip
        self.service = service
        self.app, self.api = build_app(service, max_body_bytes, authenticate, client_ssl, authorize)
        self.bound: list[tuple[str, int]] = []
        self.urls: list[str] = []  # the bound addresses as base URLs (http or https)
        self._runner: web.AppRunner | None = None
        self._shutdown_timeout = shutdown_timeout

    async def start(self, addresses: Sequence[tuple[str, int, ssl.SSLContext | None]]) -> None:
        """Listen on each (host, port, TLS context or None) (port 0: any); OSError if one cannot
        be bound."""
        runner = self._runner = web.AppRunner(
            self.app, access_log=None, handle_signals=False, shutdown_timeout=self._shutdown_timeout
        )
        await runner.setup()
        for host, port, context in addresses:
            site = web.TCPSite(runner, host, port, ssl_context=context, reuse_address=True)
            await site.start()
            server = site._server
            for sock in getattr(server, "sockets", None) or ():
                name = sock.getsockname()
                self.bound.append((name[0], name[1]))
                self.urls.append(f"http{'s' if context else ''}://{name[0]}:{name[1]}")
        for url in self.urls:
            _log.info("schema registry listening on %s", url)

    async def close(self) -> None:
        await self.api.close()
        if self._runner is not None:
            with contextlib.suppress(Exception):
                await self._runner.cleanup()
            self._runner = None

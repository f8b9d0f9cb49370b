"""Schema Registry clients with caching (Confluent's REST API): sync over stdlib urllib; asyncio over
aiohttp in :mod:`logstore.client.serdes.aio`, sharing :class:`ClientCore` (settings, caches, requests).

Shaped like confluent-kafka's ``SchemaRegistryClient`` where the serdes need
it: :meth:`register_schema`, :meth:`lookup_schema`, :meth:`get_schema`,
:meth:`get_latest_version`, :meth:`get_version`. Configuration keys are
Confluent's: ``url`` (required; the first of a comma-separated list),
``basic.auth.user.info`` (``user:password``), ``timeout`` (seconds, default
10), ``latest.cache.ttl.sec`` (how long ``get_latest_version`` answers from its
cache; default: until the client is dropped, as confluent-kafka's).

Caches (invariants): a schema id names one schema forever (Confluent never
reuses ids), so ``id -> schema`` and ``(subject, schema) -> id`` are kept for
good; only the latest version of a subject can change, hence its TTL. The
caches are guarded by one lock; HTTP calls run outside it. Connections are
HTTP/1.1 keep-alive through ``urllib`` (one request per call).

Errors: a registry's refusal is :class:`SchemaRegistryError` with its HTTP
status and Confluent's ``error_code`` (40401 subject not found, 40403 schema
not found, 409 incompatible, 42201 invalid schema, ...).
"""

from __future__ import annotations

import base64
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from logstore.errors import LogstoreError

DEFAULT_TIMEOUT_S = 10.0


class SchemaRegistryError(LogstoreError):
    """A registry request refused: ``http_status_code``, ``error_code`` (Confluent's), ``error_message``."""

    def __init__(self, http_status_code: int, error_code: int, error_message: str) -> None:
        super().__init__(f"{error_message} (HTTP status code {http_status_code}, SR code {error_code})")
        self.http_status_code = http_status_code
        self.error_code = error_code
        self.error_message = error_message


@dataclass(frozen=True)
class SchemaReference:
    """Another subject's version, known to the referring schema by ``name``."""

    name: str
    subject: str
    version: int


@dataclass(frozen=True)
class Schema:
    """A schema's text, type (AVRO, JSON, PROTOBUF) and references."""

    schema_str: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = field(default_factory=tuple)

    def body(self) -> dict[str, Any]:
        """The JSON body Confluent's API takes."""
        out: dict[str, Any] = {"schema": self.schema_str}
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = [{"name": r.name, "subject": r.subject, "version": r.version} for r in self.references]
        return out

    @staticmethod
    def from_body(body: dict[str, Any]) -> Schema:
        refs = tuple(SchemaReference(r["name"], r["subject"], int(r["version"])) for r in body.get("references") or ())
        return Schema(body["schema"], body.get("schemaType") or "AVRO", refs)


@dataclass(frozen=True)
class RegisteredSchema:
    """A subject's version of a schema, and the schema's global id."""

    schema_id: int
    schema: Schema
    subject: str
    version: int


Request = tuple[str, str, "dict[str, Any] | None", "dict[str, str] | None"]  # method, path, body, query


class ClientCore:
    """The settings, caches and requests the sync and asyncio clients share (no I/O here)."""

    def __init__(self, conf: dict[str, Any]) -> None:
        conf = dict(conf)
        url = conf.pop("url", None)
        if not url:
            raise ValueError("the Schema Registry client needs 'url'")
        self.url = str(url).split(",")[0].rstrip("/")
        self.timeout = float(conf.pop("timeout", DEFAULT_TIMEOUT_S))
        ttl = conf.pop("latest.cache.ttl.sec", None)
        self._latest_ttl = None if ttl is None else float(ttl)
        user_info = conf.pop("basic.auth.user.info", None)
        self.auth = None if not user_info else "Basic " + base64.b64encode(str(user_info).encode()).decode()
        if conf:
            raise ValueError(f"unknown Schema Registry client settings: {', '.join(sorted(conf))}")
        self._lock = threading.Lock()
        self._by_id: dict[int, Schema] = {}
        self._ids: dict[tuple[str, Schema, bool], int] = {}
        self._registered: dict[tuple[str, Schema, bool], RegisteredSchema] = {}
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}

    def headers(self, with_body: bool) -> dict[str, str]:
        out = {"Accept": "application/vnd.schemaregistry.v1+json, application/json"}
        if with_body:
            out["Content-Type"] = "application/vnd.schemaregistry.v1+json"
        if self.auth is not None:
            out["Authorization"] = self.auth
        return out

    def target(self, request: Request) -> str:
        _, path, _, query = request
        return self.url + path + ("?" + urllib.parse.urlencode(query) if query else "")

    # register_schema
    def cached_id(self, subject: str, schema: Schema, normalize: bool) -> int | None:
        with self._lock:
            return self._ids.get((subject, schema, normalize))

    @staticmethod
    def register_request(subject: str, schema: Schema, normalize: bool) -> Request:
        return "POST", f"/subjects/{_quote(subject)}/versions", schema.body(), {"normalize": "true"} if normalize else None

    def store_id(self, subject: str, schema: Schema, normalize: bool, found: Any) -> int:
        schema_id = int(found["id"])
        with self._lock:
            self._ids[(subject, schema, normalize)] = schema_id
            self._by_id.setdefault(schema_id, schema)
        return schema_id

    # lookup_schema
    def cached_lookup(self, subject: str, schema: Schema, normalize: bool) -> RegisteredSchema | None:
        with self._lock:
            return self._registered.get((subject, schema, normalize))

    @staticmethod
    def lookup_request(subject: str, schema: Schema, normalize: bool) -> Request:
        return "POST", f"/subjects/{_quote(subject)}", schema.body(), {"normalize": "true"} if normalize else None

    def store_lookup(self, subject: str, schema: Schema, normalize: bool, found: Any) -> RegisteredSchema:
        made = _registered_from(found, subject)
        with self._lock:
            self._registered[(subject, schema, normalize)] = made
            self._ids[(subject, schema, normalize)] = made.schema_id
        return made

    # get_schema
    def cached_schema(self, schema_id: int) -> Schema | None:
        with self._lock:
            return self._by_id.get(schema_id)

    @staticmethod
    def schema_request(schema_id: int) -> Request:
        return "GET", f"/schemas/ids/{int(schema_id)}", None, None

    def store_schema(self, schema_id: int, found: Any) -> Schema:
        made = Schema.from_body(found)
        with self._lock:
            self._by_id[schema_id] = made
        return made

    # get_latest_version
    def cached_latest(self, subject: str) -> RegisteredSchema | None:
        with self._lock:
            cached = self._latest.get(subject)
        if cached is not None and (self._latest_ttl is None or time.monotonic() - cached[0] < self._latest_ttl):
            return cached[1]
        return None

    @staticmethod
    def latest_request(subject: str) -> Request:
        return "GET", f"/subjects/{_quote(subject)}/versions/latest", None, None

    def store_latest(self, subject: str, found: Any) -> RegisteredSchema:
        made = _registered_from(found, subject)
        with self._lock:
            self._latest[subject] = (time.monotonic(), made)
            self._by_id.setdefault(made.schema_id, made.schema)
        return made

    # get_version
    def cached_version(self, subject: str, version: int) -> RegisteredSchema | None:
        with self._lock:
            return self._versions.get((subject, version))

    @staticmethod
    def version_request(subject: str, version: int) -> Request:
        return "GET", f"/subjects/{_quote(subject)}/versions/{int(version)}", None, None

    def store_version(self, subject: str, version: int, found: Any) -> RegisteredSchema:
        made = _registered_from(found, subject)
        with self._lock:
            self._versions[(subject, version)] = made
        return made

    def refusal(self, status: int, raw: bytes) -> SchemaRegistryError:
        """The registry's error body as :class:`SchemaRegistryError`."""
        try:
            found = json.loads(raw)
            return SchemaRegistryError(status, int(found.get("error_code", status)), str(found.get("message", "")))
        except (ValueError, AttributeError, TypeError):
            return SchemaRegistryError(status, -1, raw.decode("utf-8", "replace")[:500])


class SchemaRegistryClient(ClientCore):
    """The synchronous client (see the module doc)."""

    def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        """The id of ``schema`` under ``subject_name``, registering it if it is new there."""
        hit = self.cached_id(subject_name, schema, normalize_schemas)
        if hit is not None:
            return hit
        found = self._call(self.register_request(subject_name, schema, normalize_schemas))
        return self.store_id(subject_name, schema, normalize_schemas, found)

    def lookup_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> RegisteredSchema:
        """The version of ``subject_name`` that has ``schema`` (40403 if none)."""
        hit = self.cached_lookup(subject_name, schema, normalize_schemas)
        if hit is not None:
            return hit
        found = self._call(self.lookup_request(subject_name, schema, normalize_schemas))
        return self.store_lookup(subject_name, schema, normalize_schemas, found)

    def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id (40403 if none)."""
        hit = self.cached_schema(schema_id)
        return hit if hit is not None else self.store_schema(schema_id, self._call(self.schema_request(schema_id)))

    def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        """The subject's latest version (cached for ``latest.cache.ttl.sec``)."""
        hit = self.cached_latest(subject_name)
        return hit if hit is not None else self.store_latest(subject_name, self._call(self.latest_request(subject_name)))

    def get_version(self, subject_name: str, version: int) -> RegisteredSchema:
        """A subject's version by number (kept: a version's schema never changes)."""
        hit = self.cached_version(subject_name, version)
        if hit is not None:
            return hit
        return self.store_version(subject_name, version, self._call(self.version_request(subject_name, version)))

    def _call(self, request: Request) -> Any:
        method, _, body, _ = request
        data = None if body is None else json.dumps(body).encode()
        made = urllib.request.Request(self.target(request), data=data, method=method, headers=self.headers(data is not None))
        try:
            with urllib.request.urlopen(made, timeout=self.timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            raise self.refusal(e.code, e.read()) from None
        except urllib.error.URLError as e:
            raise SchemaRegistryError(-1, -1, f"the registry at {self.url} cannot be reached: {e.reason}") from None


def _registered_from(body: dict[str, Any], subject: str) -> RegisteredSchema:
    return RegisteredSchema(int(body["id"]), Schema.from_body(body), body.get("subject", subject),
                            int(body.get("version", 0)))  # fmt: skip


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")

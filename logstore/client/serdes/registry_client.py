"""A small, synchronous Schema Registry client with caching (Confluent's REST API, stdlib urllib).

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


class SchemaRegistryClient:
    """See the module doc."""

    def __init__(self, conf: dict[str, Any]) -> None:
        conf = dict(conf)
        url = conf.pop("url", None)
        if not url:
            raise ValueError("the Schema Registry client needs 'url'")
        self._url = str(url).split(",")[0].rstrip("/")
        self._timeout = float(conf.pop("timeout", DEFAULT_TIMEOUT_S))
        ttl = conf.pop("latest.cache.ttl.sec", None)
        self._latest_ttl = None if ttl is None else float(ttl)
        user_info = conf.pop("basic.auth.user.info", None)
        self._auth = None if not user_info else "Basic " + base64.b64encode(str(user_info).encode()).decode()
        if conf:
            raise ValueError(f"unknown Schema Registry client settings: {', '.join(sorted(conf))}")
        self._lock = threading.Lock()
        self._by_id: dict[int, Schema] = {}
        self._ids: dict[tuple[str, Schema, bool], int] = {}
        self._registered: dict[tuple[str, Schema, bool], RegisteredSchema] = {}
        self._latest: dict[str, tuple[float, RegisteredSchema]] = {}
        self._versions: dict[tuple[str, int], RegisteredSchema] = {}

    # -- the API ---------------------------------------------------------------------

    def register_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> int:
        """The id of ``schema`` under ``subject_name``, registering it if it is new there."""
        key = (subject_name, schema, normalize_schemas)
        with self._lock:
            if key in self._ids:
                return self._ids[key]
        found = self._call("POST", f"/subjects/{_quote(subject_name)}/versions", schema.body(),
                           {"normalize": "true"} if normalize_schemas else None)  # fmt: skip
        schema_id = int(found["id"])
        with self._lock:
            self._ids[key] = schema_id
            self._by_id.setdefault(schema_id, schema)
        return schema_id

    def lookup_schema(self, subject_name: str, schema: Schema, normalize_schemas: bool = False) -> RegisteredSchema:
        """The version of ``subject_name`` that has ``schema`` (40403 if none)."""
        key = (subject_name, schema, normalize_schemas)
        with self._lock:
            if key in self._registered:
                return self._registered[key]
        found = self._call("POST", f"/subjects/{_quote(subject_name)}", schema.body(),
                           {"normalize": "true"} if normalize_schemas else None)  # fmt: skip
        made = self._registered_from(found, subject_name)
        with self._lock:
            self._registered[key] = made
            self._ids[key] = made.schema_id
        return made

    def get_schema(self, schema_id: int) -> Schema:
        """The schema with this global id (40403 if none)."""
        with self._lock:
            if schema_id in self._by_id:
                return self._by_id[schema_id]
        made = Schema.from_body(self._call("GET", f"/schemas/ids/{int(schema_id)}"))
        with self._lock:
            self._by_id[schema_id] = made
        return made

    def get_latest_version(self, subject_name: str) -> RegisteredSchema:
        """The subject's latest version (cached for ``latest.cache.ttl.sec``)."""
        now = time.monotonic()
        with self._lock:
            cached = self._latest.get(subject_name)
            if cached is not None and (self._latest_ttl is None or now - cached[0] < self._latest_ttl):
                return cached[1]
        made = self._registered_from(self._call("GET", f"/subjects/{_quote(subject_name)}/versions/latest"),
                                     subject_name)  # fmt: skip
        with self._lock:
            self._latest[subject_name] = (now, made)
            self._by_id.setdefault(made.schema_id, made.schema)
        return made

    def get_version(self, subject_name: str, version: int) -> RegisteredSchema:
        """A subject's version by number (kept: a version's schema never changes)."""
        with self._lock:
            if (subject_name, version) in self._versions:
                return self._versions[(subject_name, version)]
        made = self._registered_from(self._call("GET", f"/subjects/{_quote(subject_name)}/versions/{int(version)}"),
                                     subject_name)  # fmt: skip
        with self._lock:
            self._versions[(subject_name, version)] = made
        return made

    # -- inside ----------------------------------------------------------------------

    def _registered_from(self, body: dict[str, Any], subject: str) -> RegisteredSchema:
        return RegisteredSchema(int(body["id"]), Schema.from_body(body), body.get("subject", subject),
                                int(body.get("version", 0)))  # fmt: skip

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None,
              query: dict[str, str] | None = None) -> Any:  # fmt: skip
        url = self._url + path + ("?" + urllib.parse.urlencode(query) if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/vnd.schemaregistry.v1+json, application/json")
        if data is not None:
            request.add_header("Content-Type", "application/vnd.schemaregistry.v1+json")
        if self._auth is not None:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:
                return json.loads(response.read() or b"null")
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                found = json.loads(raw)
                raise SchemaRegistryError(e.code, int(found.get("error_code", e.code)),
                                          str(found.get("message", ""))) from None  # fmt: skip
            except (ValueError, AttributeError):
                raise SchemaRegistryError(e.code, -1, raw.decode("utf-8", "replace")[:500]) from None
        except urllib.error.URLError as e:
            raise SchemaRegistryError(-1, -1, f"the registry at {self._url} cannot be reached: {e.reason}") from None


def _quote(subject: str) -> str:
    return urllib.parse.quote(subject, safe="")

"""Values written in Confluent's wire format (a magic byte, a schema id, the body), decoded through a
schema registry (``--schema-registry-url``; a broker's ``schema.registry.listeners`` under
``console.listeners``): Avro with its writer's schema (logstore.client.serdes), JSON Schema's JSON
as is; a Protobuf body is named, and shown in hex. Lookups are cached by schema id and run on the
search's worker thread, never on the event loop.
"""

from __future__ import annotations

import json
import threading
from typing import Any

from logstore.client.serdes import AvroDeserializer, SchemaRegistryClient, SerializationError
from logstore.client.serdes.wire import unframe

REGISTRY_TIMEOUT_S = 5.0


class SchemaDecoder:
    """Decode framed bytes through one registry (thread-safe; schemas cached by id)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.client = SchemaRegistryClient({"url": url, "timeout": REGISTRY_TIMEOUT_S})
        self.avro = AvroDeserializer(self.client)
        self._types: dict[int, str] = {}
        self._lock = threading.Lock()

    def _type(self, schema_id: int) -> str:
        with self._lock:
            known = self._types.get(schema_id)
        if known is None:
            known = str(self.client.get_schema(schema_id).schema_type or "AVRO").upper()
            with self._lock:
                self._types[schema_id] = known
        return known

    def decode(self, data: bytes | None) -> tuple[str, str]:
        """(the text to show, a note naming the schema or why it could not be used)."""
        if data is None:
            return "", "null"
        if len(data) < 5 or data[0] != 0:
            return data.decode("utf-8", "replace"), "not in Confluent's wire format: shown as text"
        try:
            schema_id, body = unframe(data)
            kind = self._type(schema_id)
            if kind == "AVRO":
                value = self.avro(data)
                return json.dumps(value, indent=2, ensure_ascii=False, default=str), f"Avro, schema id {schema_id}"
            if kind == "JSON":
                text = bytes(body).decode("utf-8", "replace")
                try:
                    return json.dumps(json.loads(text), indent=2, ensure_ascii=False), f"JSON Schema, schema id {schema_id}"
                except ValueError:
                    return text, f"JSON Schema, schema id {schema_id}: the body is not JSON"
            return bytes(body[:4096]).hex(" "), f"{kind}, schema id {schema_id}: shown in hex"
        except (SerializationError, OSError, ValueError, KeyError) as e:
            return data[:4096].hex(" "), f"could not decode through {self.url}: {e}"
        except Exception as e:  # the registry's own error type, an unreachable registry
            return data[:4096].hex(" "), f"could not decode through {self.url}: {type(e).__name__}: {e}"


class Registry:
    """The console's schema registry, when it has one (an app's state)."""

    def __init__(self, url: str | None) -> None:
        self.decoder = SchemaDecoder(url) if url else None


def decode_all(decoder: SchemaDecoder, records: list[Any]) -> dict[tuple[int, int, str], tuple[str, str]]:
    """Each record's key and value decoded, by (partition, offset, "key" or "value")."""
    out: dict[tuple[int, int, str], tuple[str, str]] = {}
    for r in records:
        out[(r.partition, r.offset, "value")] = decoder.decode(r.value)
        out[(r.partition, r.offset, "key")] = decoder.decode(r.key) if r.key and r.key[:1] == b"\0" else (
            ("", "null") if r.key is None else (r.key.decode("utf-8", "replace"), ""))
    return out

"""Confluent's Schema Registry API served by a real broker process (schema.registry.listeners): every
route over HTTP, bad input answered with Confluent's codes, the state kept in ``_schemas`` across a
restart."""

from __future__ import annotations

import http.client
import json
from collections.abc import Callable
from typing import Any

import pytest

from logstore.schemas import compatibility as compat
from tests.kit.brokerkit import BrokerProcess, free_port

pytestmark = pytest.mark.integration

CT = "application/vnd.schemaregistry.v1+json"


def avro(fields: list[tuple[Any, ...]], name: str = "User") -> str:
    """An Avro record schema: (name, type) or (name, type, default) per field."""
    out = []
    for field in fields:
        entry = {"name": field[0], "type": field[1]}
        if len(field) > 2:
            entry["default"] = field[2]
        out.append(entry)
    return json.dumps({"type": "record", "name": name, "fields": out})


V1 = avro([("id", "int")])
V2 = avro([("id", "int"), ("email", "string", "")])
BREAKING = avro([("id", "string")])


class Rest:
    """A keep-alive HTTP/1.1 client of the registry: ``call`` -> (status, parsed JSON or text)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def call(self, method: str, path: str, body: Any = None, raw: bytes | None = None,
             content_type: str = CT) -> tuple[int, Any]:  # fmt: skip
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        headers = {"Content-Type": content_type} if data is not None else {}
        try:
            self.conn.request(method, path, body=data, headers=headers)
            reply = self.conn.getresponse()
            payload = reply.read()
        except (ConnectionError, http.client.HTTPException):
            self.conn.close()  # the server closed it (after a refused body): a new connection
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            raise
        if reply.getheader("Connection", "").lower() == "close":
            self.conn.close()
            self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        text = payload.decode()
        try:
            return reply.status, json.loads(text)
        except ValueError:
            return reply.status, text

    def ok(self, method: str, path: str, body: Any = None) -> Any:
        status, answer = self.call(method, path, body)
        assert status == 200, (method, path, status, answer)
        return answer

    def error(self, method: str, path: str, body: Any = None, **kw: Any) -> tuple[int, int]:
        """(HTTP status, Confluent error_code) of a refused request, checking the error's shape."""
        status, answer = self.call(method, path, body, **kw)
        assert isinstance(answer, dict) and set(answer) == {"error_code", "message"}, (status, answer)
        assert isinstance(answer["message"], str) and answer["message"]
        return status, answer["error_code"]


def start_registry(make: Callable[..., BrokerProcess], **extra: str) -> tuple[BrokerProcess, Rest]:
    port = free_port()
    broker = make({"schema.registry.listeners": f"http://127.0.0.1:{port}", **extra})
    return broker, Rest(port)


@pytest.fixture
def rest(broker_factory: Any) -> Rest:
    return start_registry(broker_factory)[1]


def test_subjects_versions_and_schemas_by_id(rest: Rest) -> None:
    assert rest.ok("GET", "/subjects") == []
    assert "AVRO" in rest.ok("GET", "/schemas/types") and rest.ok("GET", "/schemas/types") == sorted(compat.TYPES)
    assert rest.ok("POST", "/subjects/users-value/versions", {"schema": V1}) == {"id": 1}
    assert rest.ok("POST", "/subjects/users-value/versions", {"schema": V1, "schemaType": "AVRO"}) == {"id": 1}
    assert rest.ok("POST", "/subjects/users-value/versions", {"schema": V2}) == {"id": 2}
    assert rest.ok("POST", "/subjects/audit-value/versions", {"schema": V1}) == {"id": 1}  # ids are global
    assert rest.ok("GET", "/subjects") == ["audit-value", "users-value"]
    assert rest.ok("GET", "/subjects?subjectPrefix=us") == ["users-value"]
    assert rest.ok("GET", "/subjects/users-value/versions") == [1, 2]
    latest = rest.ok("GET", "/subjects/users-value/versions/latest")
    assert latest == {"subject": "users-value", "version": 2, "id": 2, "schema": V2}
    assert rest.ok("GET", "/subjects/users-value/versions/-1") == latest
    assert rest.ok("GET", "/subjects/users-value/versions/1")["schema"] == V1
    assert rest.ok("GET", "/subjects/users-value/versions/1/schema") == json.loads(V1)
    assert rest.ok("GET", "/schemas/ids/2") == {"schema": V2}
    assert rest.ok("GET", "/schemas/ids/2?subject=users-value") == {"schema": V2}
    assert rest.error("GET", "/schemas/ids/2?subject=audit-value") == (404, 40403)
    assert rest.ok("GET", "/schemas/ids/1/schema") == json.loads(V1)
    assert rest.ok("GET", "/schemas/ids/1/versions") == [
        {"subject": "audit-value", "version": 1}, {"subject": "users-value", "version": 1}
    ]
    assert rest.ok("GET", "/schemas/ids/1/subjects") == ["audit-value", "users-value"]
    # lookup: the version holding a schema (whitespace and key order aside)
    spaced = json.dumps(json.loads(V1), indent=4)
    found = rest.ok("POST", "/subjects/users-value", {"schema": spaced})
    assert (found["subject"], found["version"], found["id"]) == ("users-value", 1, 1)
    assert rest.error("POST", "/subjects/users-value", {"schema": BREAKING}) == (404, 40403)
    assert rest.error("POST", "/subjects/nobody", {"schema": V1}) == (404, 40401)
    assert rest.ok("GET", "/subjects/users-value/versions/1/referencedby") == []
    assert rest.ok("GET", "/") == {}


def test_compatibility_levels_checks_config_and_mode(rest: Rest) -> None:
    rest.ok("POST", "/subjects/t-value/versions", {"schema": V1})
    assert rest.error("POST", "/subjects/t-value/versions", {"schema": BREAKING}) == (409, 409)
    check = "/compatibility/subjects/t-value/versions/latest"
    assert rest.ok("POST", check, {"schema": V2}) == {"is_compatible": True}
    assert rest.ok("POST", check, {"schema": BREAKING}) == {"is_compatible": False}
    verbose = rest.ok("POST", check + "?verbose=true", {"schema": BREAKING})
    assert verbose["is_compatible"] is False and verbose["messages"] and "reader: new" in verbose["messages"][0]
    assert rest.ok("POST", "/compatibility/subjects/t-value/versions/1", {"schema": V2}) == {"is_compatible": True}
    assert rest.ok("POST", "/compatibility/subjects/t-value/versions", {"schema": V2})["is_compatible"] is True
    assert rest.error("POST", "/compatibility/subjects/t-value/versions/7", {"schema": V2}) == (404, 40402)
    assert rest.error("POST", "/compatibility/subjects/none/versions/1", {"schema": V2}) == (404, 40401)
    # config: global and per subject
    assert rest.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    assert rest.ok("PUT", "/config", {"compatibility": "full"}) == {"compatibility": "FULL"}
    assert rest.ok("GET", "/config") == {"compatibilityLevel": "FULL"}
    assert rest.error("GET", "/config/t-value") == (404, 40408)
    assert rest.ok("GET", "/config/t-value?defaultToGlobal=true") == {"compatibilityLevel": "FULL"}
    assert rest.ok("PUT", "/config/t-value", {"compatibility": "NONE"}) == {"compatibility": "NONE"}
    assert rest.ok("GET", "/config/t-value") == {"compatibilityLevel": "NONE"}
    assert rest.ok("POST", "/subjects/t-value/versions", {"schema": BREAKING}) == {"id": 2}  # NONE lets it in
    assert rest.error("PUT", "/config", {"compatibility": "SIDEWAYS"}) == (422, 42203)
    assert rest.error("PUT", "/config", {"level": "FULL"}) == (422, 42203)
    assert rest.ok("DELETE", "/config/t-value") == {"compatibilityLevel": "NONE"}
    assert rest.error("DELETE", "/config/t-value") == (404, 40408)
    assert rest.ok("DELETE", "/config") == {"compatibilityLevel": "FULL"}
    assert rest.ok("GET", "/config") == {"compatibilityLevel": "BACKWARD"}
    # mode
    assert rest.ok("GET", "/mode") == {"mode": "READWRITE"}
    assert rest.ok("PUT", "/mode/t-value", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert rest.ok("GET", "/mode/t-value") == {"mode": "READONLY"}
    assert rest.error("POST", "/subjects/t-value/versions", {"schema": V2}) == (422, 42205)
    assert rest.ok("POST", "/subjects/other/versions", {"schema": V2}) == {"id": 3}  # only that subject
    assert rest.ok("DELETE", "/mode/t-value") == {"mode": "READONLY"}
    assert rest.error("GET", "/mode/t-value") == (404, 40409)
    assert rest.ok("GET", "/mode/t-value?defaultToGlobal=true") == {"mode": "READWRITE"}
    assert rest.error("PUT", "/mode", {"mode": "WRITEONLY"}) == (422, 42204)
    assert rest.error("PUT", "/mode", {"mode": "IMPORT"}) == (422, 42205)  # subjects exist
    assert rest.ok("PUT", "/mode?force=true", {"mode": "IMPORT"}) == {"mode": "IMPORT"}
    assert rest.ok("POST", "/subjects/imported/versions", {"schema": V1, "id": 100, "version": 5}) == {"id": 100}
    assert rest.ok("GET", "/subjects/imported/versions") == [5]
    assert rest.ok("PUT", "/mode", {"mode": "READONLY"}) == {"mode": "READONLY"}
    assert rest.error("DELETE", "/subjects/imported") == (422, 42205)
    assert rest.ok("PUT", "/mode", {"mode": "READWRITE"}) == {"mode": "READWRITE"}
    assert rest.ok("POST", "/subjects/fresh/versions", {"schema": avro([("n", "long")])}) == {"id": 101}


def test_deletes_are_soft_then_permanent(rest: Rest) -> None:
    rest.ok("POST", "/subjects/s/versions", {"schema": V1})
    rest.ok("POST", "/subjects/s/versions", {"schema": V2})
    assert rest.error("DELETE", "/subjects/s/versions/1?permanent=true") == (404, 40407)
    assert rest.ok("DELETE", "/subjects/s/versions/1") == 1
    assert rest.error("DELETE", "/subjects/s/versions/1") == (404, 40402)
    assert rest.ok("GET", "/subjects/s/versions") == [2]
    assert rest.ok("GET", "/subjects/s/versions?deleted=true") == [1, 2]
    assert rest.ok("GET", "/subjects/s/versions/1?deleted=true")["id"] == 1
    assert rest.error("GET", "/subjects/s/versions/1") == (404, 40402)
    assert rest.ok("GET", "/schemas/ids/1") == {"schema": V1}  # a soft-deleted version's id resolves
    assert rest.ok("DELETE", "/subjects/s/versions/1?permanent=true") == 1
    assert rest.ok("GET", "/subjects/s/versions?deleted=true") == [2]
    assert rest.error("DELETE", "/subjects/s?permanent=true") == (404, 40405)
    assert rest.ok("DELETE", "/subjects/s") == [2]
    assert rest.error("DELETE", "/subjects/s") == (404, 40404)
    assert rest.ok("GET", "/subjects") == [] and rest.ok("GET", "/subjects?deleted=true") == ["s"]
    assert rest.error("GET", "/subjects/s/versions") == (404, 40401)
    assert rest.ok("DELETE", "/subjects/s?permanent=true") == [2]
    assert rest.ok("GET", "/subjects?deleted=true") == []
    assert rest.ok("POST", "/subjects/s/versions", {"schema": avro([("z", "int")])}) == {"id": 3}
    assert rest.ok("GET", "/subjects/s/versions") == [1]


def test_bad_input_gets_confluents_errors_and_leaves_the_registry_serving(rest: Rest) -> None:
    rest.ok("POST", "/subjects/s/versions", {"schema": V1})
    assert rest.error("POST", "/subjects/s/versions", {"schema": '{"type": "recrd"}'}) == (422, 42201)
    assert rest.error("POST", "/subjects/s/versions", {"schema": "not json at all"}) == (422, 42201)
    assert rest.error("POST", "/subjects/s/versions", {"schema": ""}) == (422, 42201)
    assert rest.error("POST", "/subjects/s/versions", {"nothing": 1}) == (422, 42201)
    assert rest.error("POST", "/subjects/s/versions", {"schema": V1, "schemaType": "XML"}) == (422, 42201)
    assert rest.error("POST", "/subjects/s/versions", {"schema": V1, "references": "x"}) == (422, 422)
    assert rest.error("POST", "/subjects/s/versions", {"schema": V1, "references": [{"name": "a"}]}) == (422, 422)
    assert rest.error("POST", "/subjects/s/versions", raw=b"{not json") == (400, 400)
    assert rest.error("POST", "/subjects/s/versions", raw=b"[1, 2]") == (422, 422)
    assert rest.error("POST", "/subjects/s/versions", raw=b"{}", content_type="text/xml") == (415, 415)
    assert rest.ok("POST", "/subjects/s", {"schema": V1})["id"] == 1  # plain application/json is fine
    refs = [{"name": "x.Missing", "subject": "nowhere", "version": 1}]
    assert rest.error("POST", "/subjects/s/versions", {"schema": V2, "references": refs}) == (404, 40401)
    assert rest.error("GET", "/subjects/s/versions/2") == (404, 40402)
    assert rest.error("GET", "/subjects/s/versions/first") == (422, 42202)
    assert rest.error("GET", "/subjects/s/versions/0") == (422, 42202)
    assert rest.error("GET", "/subjects/nobody/versions/1") == (404, 40401)
    assert rest.error("GET", "/schemas/ids/99") == (404, 40403)
    assert rest.error("GET", "/schemas/ids/abc") == (404, 40403)
    assert rest.error("GET", "/nowhere") == (404, 404)
    assert rest.error("PATCH", "/subjects") == (405, 405)
    # a huge body: refused with a clear message, the registry unharmed
    huge = json.dumps({"schema": json.dumps({"type": "enum", "name": "E", "symbols": ["S"]}), "pad": "x" * (9 << 20)})
    status, answer = rest.call("POST", "/subjects/s/versions", raw=huge.encode())
    assert status == 413 and answer["error_code"] == 413 and "larger than" in answer["message"]
    assert rest.ok("GET", "/subjects/s/versions") == [1]
    assert rest.ok("POST", "/subjects/s/versions", {"schema": V2}) == {"id": 2}


def test_restart_keeps_ids_and_versions_and_the_records_are_confluents(broker_factory: Any) -> None:
    broker, rest = start_registry(broker_factory)
    assert rest.ok("POST", "/subjects/a/versions", {"schema": V1}) == {"id": 1}
    assert rest.ok("POST", "/subjects/a/versions", {"schema": V2}) == {"id": 2}
    three = avro([("q", "int")], "Q")
    assert rest.ok("POST", "/subjects/b/versions", {"schema": three}) == {"id": 3}
    rest.ok("PUT", "/config/a", {"compatibility": "FULL"})
    rest.ok("DELETE", "/subjects/b")
    rest.ok("DELETE", "/subjects/b?permanent=true")  # id 3's only version gone for good
    rest.conn.close()
    assert broker.stop() == 0
    broker.restart()
    assert rest.ok("GET", "/subjects") == ["a"]
    assert rest.ok("GET", "/subjects/a/versions/2") == {"subject": "a", "version": 2, "id": 2, "schema": V2}
    assert rest.ok("GET", "/config/a") == {"compatibilityLevel": "FULL"}
    assert rest.ok("POST", "/subjects/c/versions", {"schema": avro([("r", "int")], "R")}) == {"id": 4}  # not 3
    # _schemas holds Confluent's records: a Kafka client reads them from the topic
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "look", "enable.auto.commit": False})
    try:
        consumer.assign([TopicPartition("_schemas", 0, 0)])
        keys = []
        for _ in range(100):
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                keys.append(json.loads(message.key()))
                if keys[-1].get("subject") == "c":
                    break
    finally:
        consumer.close()
    assert keys[0] == {"keytype": "SCHEMA", "subject": "a", "version": 1, "magic": 1}
    kinds = [k["keytype"] for k in keys]
    assert kinds.count("SCHEMA") >= 5 and "CONFIG" in kinds and "DELETE_SUBJECT" in kinds and "CLEAR_SUBJECT" in kinds


def test_the_registry_is_off_by_default_and_a_bad_listener_is_refused(broker_factory: Any, tmp_path: Any) -> None:
    broker = broker_factory()
    port = free_port()
    with pytest.raises(ConnectionRefusedError):
        Rest(port).call("GET", "/subjects")
    assert "schema registry" not in broker.log_text()
    bad = BrokerProcess(str(tmp_path / "bad"), {"schema.registry.listeners": "ftp://127.0.0.1:1"})
    with pytest.raises(RuntimeError) as refused:
        bad.start()
    assert "schema.registry.listeners" in str(refused.value)
    if bad.alive:
        bad.kill()


def test_concurrent_registers_through_http_get_distinct_ids_and_one_version_each(rest: Rest) -> None:
    import threading

    results: dict[int, tuple[int, Any]] = {}

    def register(n: int) -> None:
        own = Rest(rest.port)  # a connection per thread: the requests really overlap at the broker
        try:
            for k in range(5):
                subject = f"s{n}-{k}"
                results[n * 5 + k] = own.call("POST", f"/subjects/{subject}/versions",
                                              {"schema": avro([(f"f{n}_{k}", "int")], f"R{n}_{k}")})  # fmt: skip
        finally:
            own.conn.close()

    threads = [threading.Thread(target=register, args=(n,)) for n in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert all(status == 200 for status, _ in results.values()) and len(results) == 30, results
    ids = sorted(answer["id"] for _, answer in results.values())
    assert ids == list(range(1, 31))  # writes serialized: no id given twice, none skipped
    assert len(rest.ok("GET", "/subjects")) == 30
    assert all(rest.ok("GET", f"/subjects/s{n}-{k}/versions") == [1] for n in range(6) for k in range(5))


def test_normalize_registers_texts_that_differ_only_in_form_once(rest: Rest) -> None:
    """``?normalize=true`` stores and compares the type's normal form (JSON Schema: keys sorted;
    Protobuf: rendered back from its descriptors), so the same schema written twice is one version;
    without it, a JSON Schema in another key order is a new schema."""
    one = json.dumps({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}})
    other = json.dumps({"properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "type": "object"})
    first = rest.ok("POST", "/subjects/j-value/versions?normalize=true", {"schema": one, "schemaType": "JSON"})
    again = rest.ok("POST", "/subjects/j-value/versions?normalize=true", {"schema": other, "schemaType": "JSON"})
    assert again == first and rest.ok("GET", "/subjects/j-value/versions") == [1]
    found = rest.ok("POST", "/subjects/j-value?normalize=true", {"schema": other, "schemaType": "JSON"})
    assert found["id"] == first["id"] and json.loads(found["schema"]) == json.loads(one)
    assert rest.ok("POST", "/subjects/j2-value/versions", {"schema": one, "schemaType": "JSON"})["id"] != (
        rest.ok("POST", "/subjects/j2-value/versions", {"schema": other, "schemaType": "JSON"})["id"]
    )
    proto = 'syntax = "proto3";\npackage p;\n\nmessage M {   string a = 1;  int32 b = 2; }\n'
    spaced = 'syntax = "proto3";\n\npackage p;\nmessage M {\n  string a = 1;\n  int32 b = 2;\n}\n'
    p1 = rest.ok("POST", "/subjects/p-value/versions?normalize=true", {"schema": proto, "schemaType": "PROTOBUF"})
    p2 = rest.ok("POST", "/subjects/p-value/versions?normalize=true", {"schema": spaced, "schemaType": "PROTOBUF"})
    assert p1 == p2 and rest.ok("GET", "/subjects/p-value/versions") == [1]
    assert rest.error("POST", "/subjects/p-value/versions?normalize=true",
                      {"schema": "message {", "schemaType": "PROTOBUF"}) == (422, 42201)  # fmt: skip

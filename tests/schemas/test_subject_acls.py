"""Subject ACLs: with basic auth and the broker's authorizer, registry operations are asked of the
broker's ACLs (a subject is its topic's ACL; the registry as a whole the CLUSTER): READ to read a
subject, WRITE to register and delete, ALTER_CONFIGS to change config and mode; /subjects keeps the
readable subjects; a schema by id needs READ on a subject that has it; 403 / 40301 otherwise."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.kit.brokerkit import BrokerProcess, cli, free_port

pytestmark = pytest.mark.integration

SCHEMA = json.dumps({"type": "record", "name": "U", "namespace": "shop", "fields": [{"name": "id", "type": "int"}]})


def call(port: int, method: str, path: str, auth: tuple[str, str], body: object = None) -> tuple[int, Any]:
    import base64
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json",
               "Authorization": "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()}  # fmt: skip
    try:
        conn.request(method, path, None if body is None else json.dumps(body), headers)
        reply = conn.getresponse()
        return reply.status, json.loads(reply.read())
    finally:
        conn.close()


JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')  # fmt: skip
ADMIN = ("admin", "admin-secret")
ALICE = ("alice", "alice-secret")


def test_registry_operations_follow_the_topic_and_cluster_acls(tmp_path: Any) -> None:
    plain, sasl, registry = free_port(), free_port(), free_port()
    broker = BrokerProcess(str(tmp_path / "data"), {
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "logstore",
        "super.users": "User:admin;User:ANONYMOUS",
        "schema.registry.listeners": f"http://127.0.0.1:{registry}",
        "schema.registry.authentication.method": "BASIC",
    }, listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}")  # fmt: skip
    broker.start()
    try:
        bootstrap = ("--bootstrap-server", f"127.0.0.1:{plain}")
        assert call(registry, "POST", "/subjects/orders-value/versions", ADMIN, {"schema": SCHEMA}) == (200, {"id": 1})
        assert call(registry, "POST", "/subjects/shop.U/versions", ADMIN, {"schema": SCHEMA}) == (200, {"id": 1})
        # alice has no ACL: everything on subjects is refused, the open routes are not
        status, answer = call(registry, "GET", "/subjects/orders-value/versions", ALICE)
        assert status == 403 and answer["error_code"] == 40301 and "alice" in answer["message"]
        assert call(registry, "GET", "/subjects", ALICE) == (200, [])
        assert call(registry, "GET", "/schemas/ids/1", ALICE)[0] == 403
        assert call(registry, "GET", "/schemas/types", ALICE)[0] == 200
        assert call(registry, "GET", "/config", ALICE)[0] == 200
        # READ on topic orders: reads of orders-value (and the id it holds), not writes
        made = cli("acls", "add", *bootstrap, "--allow-principal", "User:alice", "--operation", "Read", "--topic", "orders")
        assert made.returncode == 0, made.stderr
        assert call(registry, "GET", "/subjects/orders-value/versions", ALICE) == (200, [1])
        assert call(registry, "GET", "/subjects", ALICE) == (200, ["orders-value"])  # shop.U filtered out
        assert call(registry, "GET", "/schemas/ids/1", ALICE)[0] == 200
        assert call(registry, "POST", "/compatibility/subjects/orders-value/versions/latest", ALICE,
                    {"schema": SCHEMA})[0] == 200  # fmt: skip
        assert call(registry, "POST", "/subjects/orders-value/versions", ALICE, {"schema": SCHEMA})[0] == 403
        assert call(registry, "DELETE", "/subjects/orders-value", ALICE)[0] == 403
        assert call(registry, "PUT", "/config/orders-value", ALICE, {"compatibility": "NONE"})[0] == 403
        # WRITE and ALTER_CONFIGS on it; a record-name subject is the topic of its own name
        for operation in ("Write", "AlterConfigs"):
            made = cli("acls", "add", *bootstrap, "--allow-principal", "User:alice", "--operation", operation,
                       "--topic", "orders")  # fmt: skip
            assert made.returncode == 0, made.stderr
        assert call(registry, "PUT", "/config/orders-value", ALICE, {"compatibility": "NONE"}) == (
            200, {"compatibility": "NONE"})  # fmt: skip
        assert call(registry, "POST", "/subjects/orders-value/versions", ALICE, {"schema": SCHEMA}) == (200, {"id": 1})
        assert call(registry, "GET", "/subjects/shop.U/versions", ALICE)[0] == 403
        made = cli("acls", "add", *bootstrap, "--allow-principal", "User:alice", "--operation", "Read",
                   "--topic", "shop.", "--resource-pattern-type", "prefixed")  # fmt: skip
        assert made.returncode == 0, made.stderr
        assert call(registry, "GET", "/subjects/shop.U/versions", ALICE) == (200, [1])
        # the registry as a whole is the CLUSTER: global config needs ALTER_CONFIGS there
        assert call(registry, "PUT", "/config", ALICE, {"compatibility": "FULL"})[0] == 403
        made = cli("acls", "add", *bootstrap, "--allow-principal", "User:alice", "--operation", "AlterConfigs", "--cluster")
        assert made.returncode == 0, made.stderr
        assert call(registry, "PUT", "/config", ALICE, {"compatibility": "FULL"}) == (200, {"compatibility": "FULL"})
        assert call(registry, "DELETE", "/subjects/orders-value", ALICE) == (200, [1])
    finally:
        broker.stop()

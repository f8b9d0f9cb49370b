"""The registry behind TLS (https:// on schema.registry.listeners, the broker's PEM keystore) and HTTP
basic auth against the broker's SASL users (schema.registry.authentication.method=BASIC): PLAIN users
from the JAAS config, SCRAM users from the credential store; everything else 401."""

from __future__ import annotations

import base64
import http.client
import json
import pathlib
import ssl

import pytest

from tests.kit.brokerkit import BrokerProcess, cli, free_port, stop_all
from tests.kit.certs import TestPKI

pytestmark = pytest.mark.integration

JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        'username="admin" password="admin-secret" user_alice="alice-secret";')  # fmt: skip
SCHEMA = json.dumps({"type": "record", "name": "U", "fields": [{"name": "id", "type": "int"}]})


def call(port: int, context: ssl.SSLContext, path: str, auth: tuple[str, str] | None = None,
         body: object = None) -> tuple[int, dict[str, str], object]:  # fmt: skip
    conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=30, context=context)
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    try:
        conn.request("GET" if body is None else "POST", path, None if body is None else json.dumps(body), headers)
        reply = conn.getresponse()
        return reply.status, dict(reply.getheaders()), json.loads(reply.read())
    finally:
        conn.close()


def test_tls_and_basic_auth_against_plain_and_scram_users(tmp_path: pathlib.Path) -> None:
    pki = TestPKI(tmp_path / "pki")
    server = pki.issue("broker", ip="127.0.0.1")
    plain, sasl, registry = free_port(), free_port(), free_port()
    broker = BrokerProcess(str(tmp_path / "data"), {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": server.keystore,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_path,
        "schema.registry.listeners": f"https://127.0.0.1:{registry}",
        "schema.registry.authentication.method": "BASIC",
    }, listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl}")  # fmt: skip
    broker.start()
    try:
        made = cli("users", "add", "--bootstrap-server", f"127.0.0.1:{plain}", "--user", "carol",
                   "--password", "carol-pw", "--mechanism", "SCRAM-SHA-256")  # fmt: skip
        assert made.returncode == 0, made.stderr
        trusting = ssl.create_default_context(cafile=pki.ca_path)
        status, headers, answer = call(registry, trusting, "/subjects")
        assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
        assert isinstance(answer, dict) and answer["error_code"] == 401 and "basic auth" in answer["message"]
        assert call(registry, trusting, "/subjects", ("alice", "wrong"))[0] == 401
        assert call(registry, trusting, "/subjects", ("nobody", "x"))[0] == 401
        assert call(registry, trusting, "/nowhere", ("carol", "nope"))[0] == 401  # before the route
        # a PLAIN user (JAAS) and a SCRAM user (the credential store) both pass
        assert call(registry, trusting, "/subjects/u/versions", ("alice", "alice-secret"), {"schema": SCHEMA})[::2] == (
            200, {"id": 1})  # fmt: skip
        assert call(registry, trusting, "/subjects", ("carol", "carol-pw"))[::2] == (200, ["u"])
        assert call(registry, trusting, "/subjects", ("carol", "carol-pw"))[::2] == (200, ["u"])  # remembered
        assert call(registry, trusting, "/subjects", ("carol", "carol-pwx"))[0] == 401
        # TLS is real: a client that does not trust the broker's CA is refused the handshake
        with pytest.raises(ssl.SSLCertVerificationError):
            call(registry, ssl.create_default_context(), "/subjects", ("carol", "carol-pw"))
        # confluent-kafka's client with basic.auth.user.info over https
        from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

        client = SchemaRegistryClient({"url": f"https://127.0.0.1:{registry}", "ssl.ca.location": pki.ca_path,
                                       "basic.auth.user.info": "carol:carol-pw"})  # fmt: skip
        assert client.register_schema("u", Schema(SCHEMA, "AVRO")) == 1
        assert client.get_schema(1).schema_str == SCHEMA
    finally:
        stop_all([broker])

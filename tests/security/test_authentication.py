"""TLS listeners and SASL authentication against a real broker, with confluent-kafka and kafka-python.

One broker (module scope) listens on PLAINTEXT, SSL, MTLS (SSL with
``ssl.client.auth=required``), SASL_PLAINTEXT and SASL_SSL at once; its SCRAM
user ``carol`` is made with ``logstore users add --data-dir`` before it
starts, PLAIN's ``alice`` comes from the JAAS config. Certificates come from
certs.py; raw exchanges from saslkit.py.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.brokerkit import BrokerProcess, cli, free_port, wait_until
from tests.kit.certs import Issued, TestPKI
from tests.kit.saslkit import SaslWire, authenticate_request, metadata_request, tls_context
from tests.kit.wire import request_class

pytestmark = pytest.mark.integration

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" user_alice="alice-secret";'
)
MECHANISMS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]


class Secured:
    """The module's broker: its process, listener ports and certificates."""

    def __init__(self, broker: BrokerProcess, ports: dict[str, int], pki: TestPKI, certs: dict[str, Issued]):
        self.broker = broker
        self.ports = ports
        self.pki = pki
        self.certs = certs

    def at(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"


def security_overrides(pki: TestPKI, server: Issued) -> dict[str, str]:
    return {
        "listener.security.protocol.map": (
            "PLAINTEXT:PLAINTEXT,SSL:SSL,MTLS:SSL,OPTLS:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
        ),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": server.keystore,
        "ssl.key.password": "keystore-pw",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": pki.ca_path,
        "listener.name.mtls.ssl.client.auth": "required",
        "listener.name.optls.ssl.client.auth": "requested",
        "sasl.enabled.mechanisms": ",".join(MECHANISMS),
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "listener.name.sasl_ssl.plain.sasl.jaas.config": JAAS,
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "4",
    }


def start_broker(
    directory: str, names: list[str], overrides: dict[str, str]
) -> tuple[BrokerProcess, dict[str, int]]:
    ports = {name: free_port() for name in names}
    listeners = ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items())
    broker = BrokerProcess(
        os.path.join(directory, "data"), overrides, port=ports[names[0]], listeners=listeners
    )
    return broker, ports


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    directory = str(tmp_path_factory.mktemp("secured"))
    pki = TestPKI(os.path.join(directory, "pki"))
    certs = {
        "server": pki.issue("broker", ip="127.0.0.1", password="keystore-pw"),
        "alice": pki.issue("alice", org="Example"),
        "expired": pki.issue("old", expired=True),
        "untrusted": TestPKI(os.path.join(directory, "pki"), name="untrusted CA").issue("mallory"),
    }
    broker, ports = start_broker(
        directory,
        ["PLAINTEXT", "SSL", "MTLS", "OPTLS", "SASL_PLAINTEXT", "SASL_SSL"],
        security_overrides(pki, certs["server"]),
    )
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):  # the first users, before the broker runs
        made = cli("users", "add", "--data-dir", broker.data_dir, "--user", "carol", "--password", "carol-pw",
                   "--mechanism", mechanism)  # fmt: skip
        assert made.returncode == 0, made.stderr
    broker.start()
    yield Secured(broker, ports, pki, certs)
    assert broker.stop() == 0, broker.log_text()[-3000:]


def client_config(
    secured: Secured, listener: str, mechanism: str | None = None, **extra: Any
) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap.servers": secured.at(listener), "security.protocol": "PLAINTEXT"}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        config.update({"security.protocol": "SSL", "ssl.ca.location": secured.pki.ca_path})
    if listener == "MTLS":
        alice = secured.certs["alice"]
        config.update({"ssl.certificate.location": alice.cert, "ssl.key.location": alice.key})
    if listener.startswith("SASL"):
        config["security.protocol"] = listener
        user, password = ("alice", "alice-secret") if mechanism == "PLAIN" else ("carol", "carol-pw")
        config.update({"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password})
    config.update(extra)
    return config


def produce_consume(config: dict[str, Any], count: int = 200, size: int = 100, client: Any = None) -> None:
    """Produce ``count`` values and read them back in a group, with confluent-kafka or ``client``
    (a module of the same shape: logstore.client)."""
    import confluent_kafka

    ck = client or confluent_kafka

    topic = f"t-{uuid.uuid4().hex[:10]}"
    errors: list[Any] = []
    producer = ck.Producer({**config, "error_cb": errors.append})
    values = [os.urandom(size) for _ in range(count)]
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(30) == 0, errors
    consumer = ck.Consumer(
        {**config, "group.id": f"g-{topic}", "auto.offset.reset": "earliest", "error_cb": errors.append}
    )
    consumer.subscribe([topic])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < count and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            got.append(message.value())
    consumer.close()
    assert got == values, f"{len(got)} of {count}; errors {errors}"


def kafka_python_config(secured: Secured, listener: str, mechanism: str | None) -> dict[str, Any]:
    config: dict[str, Any] = {"bootstrap_servers": secured.at(listener)}
    if listener in ("SSL", "MTLS", "SASL_SSL"):
        config.update({"security_protocol": "SSL", "ssl_cafile": secured.pki.ca_path})
    if listener == "MTLS":
        config.update(
            {"ssl_certfile": secured.certs["alice"].cert, "ssl_keyfile": secured.certs["alice"].key}
        )
    if listener.startswith("SASL"):
        user, password = ("alice", "alice-secret") if mechanism == "PLAIN" else ("carol", "carol-pw")
        config.update(
            {"security_protocol": listener, "sasl_mechanism": mechanism,
             "sasl_plain_username": user, "sasl_plain_password": password}
        )  # fmt: skip
    return config


def produce_consume_kafka_python(config: dict[str, Any], count: int = 50) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"k-{uuid.uuid4().hex[:10]}"
    producer = KafkaProducer(**config)
    values = [os.urandom(100) for _ in range(count)]
    for value in values:
        producer.send(topic, value)
    producer.flush(30)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10_000, **config)
    got = [message.value for message in consumer]
    consumer.close()
    assert got == values


CASES = [
    ("SSL", None),
    ("MTLS", None),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-512"),
]


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=[f"{name}-{m}" for name, m in CASES])
def test_confluent_kafka_produces_and_consumes(
    secured: Secured, listener: str, mechanism: str | None
) -> None:
    produce_consume(client_config(secured, listener, mechanism))


@pytest.mark.parametrize(("listener", "mechanism"), CASES, ids=[f"{name}-{m}" for name, m in CASES])
def test_kafka_python_produces_and_consumes(secured: Secured, listener: str, mechanism: str | None) -> None:
    produce_consume_kafka_python(kafka_python_config(secured, listener, mechanism))


@pytest.mark.parametrize("mechanism", MECHANISMS)
def test_logstore_client_produces_and_consumes_over_sasl(secured: Secured, mechanism: str) -> None:
    import logstore.client

    produce_consume(client_config(secured, "SASL_PLAINTEXT", mechanism), client=logstore.client)


def test_logstore_client_authenticates_with_saslauthenticate_v0(
    secured: Secured, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker older than KIP-368 answers SaslAuthenticate v0, which has no session lifetime."""
    import logstore.client.connection as connection
    from logstore.client.admin import AdminClient

    monkeypatch.setitem(connection.CLIENT_MAX_VERSIONS, connection.SASL_AUTHENTICATE, 0)
    for mechanism in ("PLAIN", "SCRAM-SHA-512"):
        admin = AdminClient(client_config(secured, "SASL_PLAINTEXT", mechanism))
        assert admin.list_topics(timeout=10).brokers
        admin.close()


def test_logstore_client_takes_a_java_jaas_config(secured: Secured) -> None:
    """sasl.jaas.config as the Java client (and Spark's kafka.sasl.jaas.config) gives it."""
    import logstore.client

    config = client_config(secured, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    del config["sasl.username"], config["sasl.password"]
    config["sasl.jaas.config"] = (
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="carol-pw";'
    )
    produce_consume(config, count=20, client=logstore.client)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_logstore_client_with_a_wrong_password_gets_an_authentication_error(
    secured: Secured, mechanism: str
) -> None:
    """The broker's reason reaches the caller as _AUTHENTICATION (librdkafka's code), not as
    brokers that are down: from a request, and in the producer's error_cb."""
    from logstore.client import KafkaError, KafkaException, Producer
    from logstore.client.admin import AdminClient

    config = client_config(secured, "SASL_PLAINTEXT", mechanism, **{"sasl.password": "nope"})
    with pytest.raises(KafkaException) as caught:
        AdminClient(config).list_topics(timeout=10)
    error = caught.value.args[0]
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert "Authentication failed" in error.str() and f"sasl.mechanism={mechanism}" in error.str(), error
    errors: list[Any] = []
    producer = Producer({**config, "error_cb": errors.append})
    producer.produce("never", b"x")
    wait_until(lambda: producer.poll(0.2) >= 0 and any(e.code() == KafkaError._AUTHENTICATION for e in errors),
               f"an authentication error in error_cb ({errors})", timeout=15)  # fmt: skip
    producer.purge()
    # the right password on the same listener works: the refusal was the password's
    assert AdminClient(client_config(secured, "SASL_PLAINTEXT", mechanism)).list_topics(timeout=10).brokers


def test_logstore_client_asks_for_a_mechanism_the_listener_offers(secured: Secured) -> None:
    """A PLAINTEXT listener enables no SASL mechanism: the handshake is refused, and the error says
    what the listener offers."""
    from logstore.client import KafkaError, KafkaException
    from logstore.client.admin import AdminClient

    config = client_config(
        secured, "SASL_PLAINTEXT", "PLAIN", **{"bootstrap.servers": secured.at("PLAINTEXT")}
    )
    with pytest.raises(KafkaException) as caught:
        AdminClient(config).list_topics(timeout=10)
    error = caught.value.args[0]
    assert error.code() == KafkaError._AUTHENTICATION and "sasl.mechanism=PLAIN" in error.str(), error


def test_metadata_names_the_listener_the_client_came_in_on(secured: Secured) -> None:
    from confluent_kafka.admin import AdminClient

    for listener, mechanism in [
        ("PLAINTEXT", None),
        ("SSL", None),
        ("SASL_PLAINTEXT", "PLAIN"),
        ("SASL_SSL", "SCRAM-SHA-256"),
    ]:
        brokers = AdminClient(client_config(secured, listener, mechanism)).list_topics(timeout=15).brokers
        assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", secured.ports[listener])]


def test_large_fetches_over_tls(secured: Secured) -> None:
    """No sendfile through TLS: segments are read and encrypted; 24 MB of 400 KB values come back whole."""
    import confluent_kafka as ck

    topic = f"big-{uuid.uuid4().hex[:8]}"
    values = [os.urandom(400_000) for _ in range(60)]
    producer = ck.Producer(client_config(secured, "PLAINTEXT"))
    for value in values:
        producer.produce(topic, value)
    assert producer.flush(60) == 0
    for listener in ("SSL", "SASL_SSL"):
        config = client_config(secured, listener, "SCRAM-SHA-256", **{"group.id": f"g-{listener}-{topic}",
                               "auto.offset.reset": "earliest", "fetch.max.bytes": 52_428_800,
                               "max.partition.fetch.bytes": 10_485_760})  # fmt: skip
        consumer = ck.Consumer(config)
        consumer.subscribe([topic])
        digest, seen = hashlib.sha256(), 0
        deadline = time.monotonic() + 60
        while seen < len(values) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                digest.update(message.value())
                seen += 1
        consumer.close()
        assert seen == len(values)
        assert digest.hexdigest() == hashlib.sha256(b"".join(values)).hexdigest()


# -- mutual TLS ------------------------------------------------------------------------------------


def test_mtls_principal_is_the_certificate_subject(secured: Secured) -> None:
    with SaslWire(secured.at("MTLS"), tls=tls_context(secured.pki.ca_path, secured.certs["alice"].cert,
                                                     secured.certs["alice"].key)) as client:  # fmt: skip
        assert client.answered(metadata_request())
    wait_until(lambda: "authenticated User:CN=alice,O=Example by its TLS certificate on listener MTLS"
               in secured.broker.log_text(), "the principal in the log", timeout=10)  # fmt: skip


@pytest.mark.parametrize("which", ["none", "expired", "untrusted"])
def test_mtls_refuses_clients_without_a_trusted_valid_certificate(secured: Secured, which: str) -> None:
    cert = secured.certs.get(which)
    context = tls_context(secured.pki.ca_path, cert.cert if cert else None, cert.key if cert else None)
    try:
        client = SaslWire(secured.at("MTLS"), tls=context)
    except (ssl.SSLError, ConnectionError):
        return  # refused in the handshake (TLS 1.2 style)
    with client:  # TLS 1.3: the client's side finishes first; the broker's alert comes with the first read
        assert not client.answered(metadata_request())
    # The same certificate-less client is served where client auth is off.
    with SaslWire(secured.at("SSL"), tls=tls_context(secured.pki.ca_path)) as plain:
        assert plain.answered(metadata_request())


def test_requested_client_auth_serves_clients_with_and_without_certificates(secured: Secured) -> None:
    alice = secured.certs["alice"]
    with SaslWire(secured.at("OPTLS"), tls=tls_context(secured.pki.ca_path)) as anonymous:
        assert anonymous.answered(metadata_request())
    with SaslWire(secured.at("OPTLS"), tls=tls_context(secured.pki.ca_path, alice.cert, alice.key)) as client:
        assert client.answered(metadata_request())
    wait_until(lambda: "authenticated User:CN=alice,O=Example by its TLS certificate on listener OPTLS"
               in secured.broker.log_text(), "the principal in the log", timeout=10)  # fmt: skip
    untrusted = secured.certs["untrusted"]  # one that presents a bad certificate still fails
    try:
        with SaslWire(
            secured.at("OPTLS"), tls=tls_context(secured.pki.ca_path, untrusted.cert, untrusted.key)
        ) as bad:
            assert not bad.answered(metadata_request())
    except (ssl.SSLError, ConnectionError):
        pass


def test_confluent_kafka_without_a_certificate_cannot_use_the_mtls_listener(secured: Secured) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    config = client_config(secured, "SSL")
    config["bootstrap.servers"] = secured.at("MTLS")
    with pytest.raises(KafkaException):
        AdminClient(config).list_topics(timeout=5)


def test_a_plaintext_client_on_a_tls_port_is_closed_and_the_broker_serves_on(secured: Secured) -> None:
    with SaslWire(secured.at("SSL")) as client:  # no TLS: a Kafka request where a ClientHello belongs
        assert not client.answered(metadata_request(), wait=5)
    with SaslWire(secured.at("SSL")) as client:
        client.sock.sendall(os.urandom(4096))
        assert client.is_closed()
    produce_consume(client_config(secured, "SSL"), count=10)


# -- SASL failures -----------------------------------------------------------------------------------


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_wrong_password_fails_with_kafkas_message_and_closes(secured: Secured, listener: str) -> None:
    tls = tls_context(secured.pki.ca_path) if listener == "SASL_SSL" else None
    with SaslWire(secured.at(listener), tls=tls) as client:
        response = client.plain("alice", "wrong")
        assert response.error_code.value == 58  # SASL_AUTHENTICATION_FAILED
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert client.is_closed()
    with SaslWire(secured.at(listener), tls=tls) as client:
        response = client.plain("nobody", "alice-secret")
        assert response.error_message == "Authentication failed: Invalid username or password"
        assert client.is_closed()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        for user, password in (("carol", "wrong"), ("nobody", "carol-pw")):
            with SaslWire(secured.at(listener), tls=tls) as client:
                response = client.scram(mechanism, user, password)
                assert response.error_code.value == 58
                assert "invalid credentials" in response.error_message
                assert client.is_closed()


def test_plain_is_not_checked_against_scram_credentials(secured: Secured) -> None:
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        assert client.plain("carol", "carol-pw").error_code.value == 58


def test_unsupported_mechanism_lists_the_enabled_ones_and_closes(secured: Secured) -> None:
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        response = client.handshake("GSSAPI")
        assert response.error_code.value == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(response.mechanisms) == MECHANISMS
        assert client.is_closed()


def test_confluent_kafka_with_a_wrong_password_gets_an_authentication_error(secured: Secured) -> None:
    import confluent_kafka as ck

    errors: list[Any] = []
    config = client_config(secured, "SASL_PLAINTEXT", "SCRAM-SHA-512", **{"sasl.password": "nope"})
    producer = ck.Producer({**config, "error_cb": errors.append})
    producer.produce("never", b"x")
    wait_until(lambda: producer.poll(0.2) is not None and bool(errors), "an authentication error", timeout=15)
    assert any(e.code() == ck.KafkaError._AUTHENTICATION for e in errors), errors
    producer.purge()


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_requests_before_authentication_are_not_served(secured: Secured, listener: str) -> None:
    tls = tls_context(secured.pki.ca_path) if listener == "SASL_SSL" else None
    canary = f"canary-{uuid.uuid4().hex[:8]}"
    with SaslWire(secured.at(listener), tls=tls) as client:  # before any handshake
        assert not client.answered(metadata_request(canary))
        assert client.is_closed(1)
    with SaslWire(secured.at(listener), tls=tls) as client:  # after the handshake, mid-exchange
        assert client.handshake("PLAIN").error_code.value == 0
        assert not client.answered(metadata_request(canary))
    with SaslWire(secured.at(listener), tls=tls) as client:  # ApiVersions is served, then authentication
        assert client.answered(request_class(18, 3)(
            client_software_name="t", client_software_version="1"))  # fmt: skip
        assert client.plain("alice", "alice-secret").error_code.value == 0
        assert client.answered(metadata_request())
    from confluent_kafka.admin import AdminClient

    topics = AdminClient(client_config(secured, "PLAINTEXT")).list_topics(timeout=15).topics
    assert canary not in topics  # the unauthenticated Metadata never reached the handler


def test_legacy_v0_handshake_with_raw_tokens(secured: Secured) -> None:
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        assert client.handshake("PLAIN", version=0).error_code.value == 0
        assert client.raw_token(b"\0alice\0alice-secret") == b""
        assert client.answered(metadata_request())
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        assert client.handshake("PLAIN", version=0).error_code.value == 0
        client.sock.sendall(b"\0\0\0\x0d\0alice\0wrong!")
        assert client.is_closed()
    from logstore.security.scram import MECHANISMS as SCRAM
    from logstore.security.scram import ScramClient

    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        assert client.handshake("SCRAM-SHA-256", version=0).error_code.value == 0
        scram = ScramClient(SCRAM["SCRAM-SHA-256"], "carol", "carol-pw")
        assert scram.verify(client.raw_token(scram.final(client.raw_token(scram.first()))))
        assert client.answered(metadata_request())


def test_a_gssapi_only_sasl_listener_does_not_start(tmp_path: Any) -> None:
    broker, _ = start_broker(str(tmp_path), ["SASL_PLAINTEXT"], {})
    with pytest.raises(RuntimeError, match="logstore supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        broker.start()


# -- users -----------------------------------------------------------------------------------------------


def test_users_cli_over_the_wire(secured: Secured) -> None:
    import confluent_kafka as ck

    bootstrap = secured.at("PLAINTEXT")
    made = cli("users", "add", "--bootstrap-server", bootstrap, "--user", "dave", "--password", "dave-pw",
               "--mechanism", "SCRAM-SHA-256", "--iterations", "8192")  # fmt: skip
    assert made.returncode == 0, made.stderr
    described = cli("users", "describe", "--bootstrap-server", bootstrap)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.split("\n")
    assert lines[0].split() == ["USER", "MECHANISM", "ITERATIONS"]
    assert ["dave", "SCRAM-SHA-256", "8192"] in [line.split() for line in lines]
    assert ["carol", "SCRAM-SHA-512", "4096"] in [line.split() for line in lines]
    produce_consume(
        client_config(
            secured, "SASL_SSL", "SCRAM-SHA-256", **{"sasl.username": "dave", "sasl.password": "dave-pw"}
        ),
        count=5,
    )
    deleted = cli(
        "users", "delete", "--bootstrap-server", bootstrap, "--user", "dave", "--mechanism", "SCRAM-SHA-256"
    )
    assert deleted.returncode == 0, deleted.stderr
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        assert client.scram("SCRAM-SHA-256", "dave", "dave-pw").error_code.value == 58
    again = cli(
        "users", "delete", "--bootstrap-server", bootstrap, "--user", "dave", "--mechanism", "SCRAM-SHA-256"
    )
    assert again.returncode != 0 and "does not exist" in again.stderr
    # Through a SASL_SSL listener, with client settings from --command-config.
    secure = client_config(secured, "SASL_SSL", "SCRAM-SHA-512")
    settings = [f"--command-config={k}={v}" for k, v in secure.items() if k != "bootstrap.servers"]
    described = cli(
        "users", "describe", "--bootstrap-server", secured.at("SASL_SSL"), "--user", "carol", *settings
    )
    assert described.returncode == 0, described.stderr
    assert [line.split() for line in described.stdout.split("\n")[1:] if line] == [
        ["carol", "SCRAM-SHA-256", "4096"],
        ["carol", "SCRAM-SHA-512", "4096"],
    ]
    del ck


def test_alter_and_describe_scram_credentials_errors(secured: Secured) -> None:
    from logstore.security.scram import MECHANISMS as SCRAM
    from tests.kit.wire import request_class

    alter = request_class(51, 0)
    module = __import__(alter.__module__, fromlist=["x"])
    salted = SCRAM["SCRAM-SHA-512"].salted_password("pw", b"salty", 4096)

    def up(name: str, mechanism: int = 2, iterations: int = 4096, salted_password: bytes = salted) -> Any:
        return module.ScramCredentialUpsertion(
            name=name,
            mechanism=mechanism,
            iterations=iterations,
            salt=b"salty",
            salted_password=salted_password,
        )

    with SaslWire(secured.at("PLAINTEXT")) as client:
        response = client.call(
            alter(
                deletions=(module.ScramCredentialDeletion(name="ghost", mechanism=1),),
                upsertions=(
                    up("few", iterations=4095),
                    up("many", iterations=16385),
                    up("weird", mechanism=7),
                    up("twice"),
                    up("twice"),
                    up(""),
                    up("erin"),
                ),
            )
        )
        results = {r.user: (r.error_code.value, r.error_message) for r in response.results}
        assert results == {
            "ghost": (91, "Attempt to delete a user credential that does not exist"),
            "few": (93, "Too few iterations"),
            "many": (93, "Too many iterations"),
            "weird": (33, "Unknown SCRAM mechanism"),
            "twice": (92, "A user credential cannot be altered twice in the same request"),
            "": (93, "Username must not be empty"),
            "erin": (0, None),
        }
        describe = request_class(50, 0)
        names = __import__(describe.__module__, fromlist=["x"]).UserName
        response = client.call(
            describe(users=(names(name="erin"), names(name="ghost"), names(name="dup"), names(name="dup")))
        )
        results = {r.user: (r.error_code.value, [(c.mechanism, c.iterations) for c in r.credential_infos])
                   for r in response.results}  # fmt: skip
        assert results == {"erin": (0, [(2, 4096)]), "ghost": (91, []), "dup": (92, [])}
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:  # the salted password the client sent works
        assert client.scram("SCRAM-SHA-512", "erin", "pw").error_code.value == 0


def test_credentials_survive_a_restart(tmp_path: Any) -> None:
    broker, ports = start_broker(str(tmp_path), ["PLAINTEXT", "SASL_PLAINTEXT"],
                                 {"sasl.enabled.mechanisms": "SCRAM-SHA-512"})  # fmt: skip
    broker.start()
    try:
        made = cli("users", "add", "--bootstrap-server", f"127.0.0.1:{ports['PLAINTEXT']}", "--user", "frank",
                   "--password", "frank-pw")  # fmt: skip
        assert made.returncode == 0, made.stderr
        assert broker.stop() == 0
        with open(os.path.join(broker.data_dir, "scram-credentials.json")) as f:
            stored = f.read()
        assert "frank" in stored and "frank-pw" not in stored and "stored_key=" in stored
        broker.start()
        with SaslWire(f"127.0.0.1:{ports['SASL_PLAINTEXT']}") as client:
            assert client.scram("SCRAM-SHA-512", "frank", "frank-pw").error_code.value == 0
    finally:
        if broker.alive:
            assert broker.stop() == 0


# -- re-authentication (KIP-368) ---------------------------------------------------------------------------


def test_reauthentication(tmp_path: Any) -> None:
    import confluent_kafka as ck

    broker, ports = start_broker(
        str(tmp_path), ["PLAINTEXT", "SASL_PLAINTEXT"],
        {"sasl.enabled.mechanisms": "SCRAM-SHA-512", "connections.max.reauth.ms": "2000"},
    )  # fmt: skip
    made = cli("users", "add", "--data-dir", broker.data_dir, "--user", "gina", "--password", "gina-pw")
    assert made.returncode == 0, made.stderr
    broker.start()
    try:
        at = f"127.0.0.1:{ports['SASL_PLAINTEXT']}"
        # A raw client that does not re-authenticate: told the lifetime, closed after it.
        with SaslWire(at) as client:
            response = client.scram("SCRAM-SHA-512", "gina", "gina-pw")
            assert response.error_code.value == 0
            assert response.session_lifetime.total_seconds() == 2.0
            assert client.answered(metadata_request())
            time.sleep(2.5)
            assert not client.answered(metadata_request())
        # One that re-authenticates on the same connection goes on past the first lifetime.
        with SaslWire(at) as client:
            assert client.scram("SCRAM-SHA-512", "gina", "gina-pw").error_code.value == 0
            time.sleep(1.2)
            assert client.scram("SCRAM-SHA-512", "gina", "gina-pw").error_code.value == 0
            time.sleep(1.2)  # 2.4 s after the first authentication
            assert client.answered(metadata_request())
        # logstore's client renews its connections before their sessions end (a new connection,
        # authenticated; the old one closed once its answers are in): nothing is cut off by the
        # broker, nothing fails, for 3 lifetimes.
        from logstore.client import Producer

        seen_before = len(broker.log_text())
        errors: list[Any] = []
        delivered: list[Any] = []
        ours = Producer({"bootstrap.servers": at, "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "gina",
                         "sasl.password": "gina-pw", "error_cb": errors.append, "linger.ms": 5})  # fmt: skip
        deadline = time.monotonic() + 6.5
        while time.monotonic() < deadline:
            ours.produce("reauth", b"y", on_delivery=lambda err, msg: delivered.append(err))
            ours.poll(0.05)
        assert ours.flush(15) == 0
        assert len(delivered) > 30 and all(err is None for err in delivered) and errors == [], (
            errors,
            delivered[:5],
        )
        log = broker.log_text()[seen_before:]
        # (an idle connection's end is the broker's reaper, "not re-authenticated": Kafka's too)
        assert "without re-authentication" not in log, log[-3000:]
        logins = Counter(
            line.split(" authenticated ")[0].rsplit(" ", 1)[-1]
            for line in log.splitlines()
            if "authenticated User:gina with SCRAM-SHA-512" in line
        )
        # every connection authenticates once; a lifetime of 2 s over 6.5 s takes 3 renewals
        assert len(logins) >= 4 and max(logins.values()) == 1, logins
        ours.close()
        # confluent-kafka re-authenticates by itself and keeps producing for 3 lifetimes.
        seen_before = len(broker.log_text())
        errors.clear()
        delivered.clear()
        producer = ck.Producer({"bootstrap.servers": at, "security.protocol": "SASL_PLAINTEXT",
                                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "gina",
                                "sasl.password": "gina-pw", "error_cb": errors.append})  # fmt: skip
        deadline = time.monotonic() + 6.5
        while time.monotonic() < deadline:
            producer.produce("reauth", b"x", on_delivery=lambda err, msg: delivered.append(err))
            producer.poll(0.1)
        assert producer.flush(15) == 0
        assert len(delivered) > 30 and all(err is None for err in delivered), (errors, delivered[:5])
        logins = Counter(
            line.split(" authenticated ")[0].rsplit(" ", 1)[-1]
            for line in broker.log_text()[seen_before:].splitlines()
            if "authenticated User:gina with SCRAM-SHA-512" in line
        )
        assert logins and max(logins.values()) >= 3, logins  # one connection, re-authenticated twice+
    finally:
        assert broker.stop() == 0, broker.log_text()[-3000:]


def test_large_frames_wait_for_authentication(secured: Secured) -> None:
    """sasl.server.max.receive.size (512 KiB): no big frame before SASL completes; any after."""
    with SaslWire(secured.at("SASL_PLAINTEXT")) as client:
        assert client.handshake("PLAIN").error_code.value == 0
        assert not client.answered(authenticate_request(b"\0alice\0" + b"x" * 600_000))
        assert client.is_closed(1)
    import confluent_kafka as ck

    config = client_config(secured, "SASL_PLAINTEXT", "SCRAM-SHA-512")
    producer = ck.Producer({**config, "message.max.bytes": 1_000_000})
    outcomes: list[Any] = []
    producer.produce(
        f"big-sasl-{uuid.uuid4().hex[:8]}", os.urandom(900_000), on_delivery=lambda e, m: outcomes.append(e)
    )
    assert producer.flush(30) == 0
    assert outcomes == [None]

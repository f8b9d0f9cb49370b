"""PLAIN and Kafka's JAAS user lists (logstore/security/plain.py); TLS names (tls.py); listener config."""

from __future__ import annotations

import pytest

from logstore.broker.config import BrokerConfig
from logstore.errors import InvalidConfigError
from logstore.security.errors import SaslAuthenticationError
from logstore.security.plain import PlainServer, parse_jaas, parse_jaas_users
from logstore.security.tls import rfc2253_name

pytestmark = pytest.mark.unit

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
    '  username="admin" password="admin-secret"\n'
    '  user_admin="admin-secret" user_alice="a \\"quoted\\" pw" user_bob=bare;'
)


def test_jaas_users() -> None:
    assert parse_jaas_users(JAAS) == {"admin": "admin-secret", "alice": 'a "quoted" pw', "bob": "bare"}
    ((module, flag, options),) = parse_jaas(JAAS)
    assert module.endswith("PlainLoginModule") and flag == "required" and options["username"] == "admin"


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ('org.apache.kafka.common.security.plain.PlainLoginModule required user_a="b"', "end with ';'"),
        ("org.apache.kafka.common.security.plain.PlainLoginModule maybe;", "control flag"),
        ("org.apache.kafka.common.security.scram.ScramLoginModule required;", "PlainLoginModule"),
        ("org.apache.kafka.common.security.plain.PlainLoginModule required user_a;", 'name="value"'),
        ("", "no login module"),
    ],
)
def test_bad_jaas_names_the_problem(text: str, complaint: str) -> None:
    with pytest.raises(InvalidConfigError, match=complaint):
        parse_jaas_users(text, "listener.name.sasl_plaintext.plain.sasl.jaas.config")


@pytest.mark.parametrize(
    ("message", "complaint"),
    [
        (b"\0alice\0wrong", "Authentication failed: Invalid username or password"),
        (b"\0nobody\0alice-pw", "Authentication failed: Invalid username or password"),
        (b"\0\0pw", "username not specified"),
        (b"\0alice\0", "password not specified"),
        (b"alice\0pw", "expected 3 tokens, got 2"),
        (b"bob\0alice\0alice-pw", "authorization id that is different"),
        (b"\xff\0alice\0alice-pw", "not UTF-8"),
    ],
)
def test_plain_failures(message: bytes, complaint: str) -> None:
    server = PlainServer({"alice": "alice-pw"})
    with pytest.raises(SaslAuthenticationError, match=complaint):
        server.evaluate(message)
    assert not server.complete and server.username is None


def test_plain_success_once() -> None:
    server = PlainServer({"alice": "alice-pw"})
    assert server.evaluate(b"alice\0alice\0alice-pw") == b"" and server.complete
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(b"\0alice\0alice-pw")


def test_rfc2253_names() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "eng"), ("commonName", "#alice ")),
    )
    assert rfc2253_name(subject) == "OU=eng+CN=\\#alice\\ ,O=Example\\, Inc,C=US"


def test_listener_config() -> None:
    config = BrokerConfig.from_dict(
        {
            "listeners": "PLAINTEXT://127.0.0.1:9092,CLIENT://127.0.0.1:9093",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_SSL",
            "ssl.client.auth": "none",
            "listener.name.client.ssl.client.auth": "required",
            "listener.name.client.plain.sasl.jaas.config": JAAS,
        }
    )
    assert config.listener_protocols() == {"PLAINTEXT": "PLAINTEXT", "CLIENT": "SASL_SSL"}
    assert config.listener_value("CLIENT", "ssl.client.auth") == "required"
    assert config.listener_value("PLAINTEXT", "ssl.client.auth") == "none"
    assert config.ignored == []  # listener-prefixed keys are used, not reported
    with pytest.raises(InvalidConfigError, match="not NAME:PROTOCOL"):
        BrokerConfig.from_dict({"listener.security.protocol.map": "PLAINTEXT:TLS"})


def test_a_sasl_listener_without_a_supported_mechanism_does_not_start(tmp_path: object) -> None:
    config = BrokerConfig.from_dict({"listeners": "SASL_PLAINTEXT://127.0.0.1:0"})  # Kafka's default: GSSAPI
    with pytest.raises(InvalidConfigError, match="logstore supports PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"):
        config.listener_security()
    plain = BrokerConfig.from_dict(
        {"listeners": "SASL_PLAINTEXT://127.0.0.1:0", "sasl.enabled.mechanisms": "PLAIN"}
    )
    with pytest.raises(InvalidConfigError, match="PLAIN needs its users"):
        plain.listener_security()
    ssl = BrokerConfig.from_dict({"listeners": "SSL://127.0.0.1:0"})
    with pytest.raises(InvalidConfigError, match="has no certificate"):
        ssl.listener_security()
    jks = BrokerConfig.from_dict({"listeners": "SSL://127.0.0.1:0", "ssl.keystore.location": "/x.jks"})
    with pytest.raises(InvalidConfigError, match=r"ssl\.keystore\.type=PEM"):
        jks.listener_security()

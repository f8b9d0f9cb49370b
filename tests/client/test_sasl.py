"""logstore's client side of SASL: its config, and its SCRAM exchange against the broker's own
ScramServer as the oracle (the wire exchange with a real broker is in tests/security/test_authentication.py)."""

from __future__ import annotations

import pytest

from logstore.client.config import ClientConfig, ConfigError
from logstore.client.sasl import SaslSettings
from logstore.security.errors import SaslAuthenticationError
from logstore.security.scram import MECHANISMS, ScramCredential, ScramServer

pytestmark = pytest.mark.unit


def _settings(**config: str) -> SaslSettings | None:
    parsed = ClientConfig.parse({"bootstrap.servers": "127.0.0.1:9092", **config}, "producer")
    return SaslSettings.from_config(parsed)


def _exchange(settings: SaslSettings, server: ScramServer, tamper: bool = False) -> None:
    """Drive the client's steps against ``server`` as the connection does."""
    steps = settings.steps()
    token = next(steps)
    for _ in range(4):
        answer = server.evaluate(token)
        if tamper and server.complete:
            answer = answer[:-2] + (b"A=" if answer[-2:] != b"A=" else b"B=")
        try:
            token = steps.send(answer)
        except StopIteration:
            return
    raise AssertionError("the exchange did not end")


def test_plaintext_by_default_and_sasl_when_asked() -> None:
    assert _settings() is None
    settings = _settings(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "SCRAM-SHA-512",
                            "sasl.username": "carol", "sasl.password": "pw"})  # fmt: skip
    assert settings == SaslSettings("SCRAM-SHA-512", "carol", "pw")
    assert "pw" not in repr(settings)


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"security.protocol": "SSL"}, "not TLS; for a TLS listener use confluent-kafka"),
        ({"security.protocol": "SASL_SSL"}, "not TLS"),
        ({"ssl.ca.location": "/etc/ca.pem"}, "ssl.ca.location='/etc/ca.pem': logstore's client .* not TLS"),
        ({"enable.ssl.certificate.verification": "false"}, "not TLS"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u"}, "needs sasl.username and sasl.password"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI", "sasl.username": "u",
          "sasl.password": "p"}, "is not one of PLAIN, SCRAM-SHA-256, SCRAM-SHA-512"),
    ],
)  # fmt: skip
def test_what_the_client_cannot_speak_is_a_config_error(config: dict[str, str], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        _settings(**config)


def test_credentials_from_a_jaas_config_as_java_and_spark_give_them() -> None:
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="carol" password="p w";'
    settings = _settings(**{"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
                            "sasl.jaas.config": jaas})  # fmt: skip
    assert settings == SaslSettings("SCRAM-SHA-256", "carol", "p w")
    given = _settings(
        **{"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": jaas, "sasl.username": "dave"}
    )
    assert given is not None and given.username == "dave" and given.password == "p w"  # its own key wins
    with pytest.raises(ConfigError, match="PlainLoginModule or ScramLoginModule"):
        _settings(**{"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"})
    with pytest.raises(ConfigError, match=r"sasl\.jaas\.config"):
        _settings(**{"sasl.jaas.config": "not a jaas config"})


def test_plain_sends_one_rfc4616_token() -> None:
    steps = SaslSettings("PLAIN", "alice", "s3cret").steps()
    assert next(steps) == b"\0alice\0s3cret"
    with pytest.raises(StopIteration):
        steps.send(b"")


@pytest.mark.parametrize("mechanism", sorted(MECHANISMS))
def test_scram_against_the_brokers_server(mechanism: str) -> None:
    scram = MECHANISMS[mechanism]
    credential = ScramCredential.from_password(scram, "pw", iterations=4096)
    lookup = {"carol": credential}.get
    server = ScramServer(scram, lookup)
    _exchange(SaslSettings(mechanism, "carol", "pw"), server)
    assert server.complete and server.username == "carol"
    with pytest.raises(SaslAuthenticationError, match="invalid credentials"):
        _exchange(SaslSettings(mechanism, "carol", "not-pw"), ScramServer(scram, lookup))
    # a server whose final signature does not come from the user's credentials is not believed
    with pytest.raises(ValueError, match="signature does not match"):
        _exchange(SaslSettings(mechanism, "carol", "pw"), ScramServer(scram, lookup), tamper=True)


def test_a_malformed_server_first_message_is_a_clear_error() -> None:
    steps = SaslSettings("SCRAM-SHA-256", "carol", "pw").steps()
    next(steps)
    with pytest.raises(ValueError, match="malformed SCRAM server-first"):
        steps.send(b"no fields here")

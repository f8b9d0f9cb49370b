"""Listeners (security/listeners.py) from the broker's config: per-listener protocols and values, and
a listener whose TLS or SASL settings are missing or unsupported refusing to start."""

from __future__ import annotations

import pytest

from logstore.broker.config.broker_config import BrokerConfig
from logstore.errors import InvalidConfigError

pytestmark = pytest.mark.unit

JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required\n"
    '  username="admin" password="admin-secret"\n'
    '  user_admin="admin-secret" user_alice="a \\"quoted\\" pw" user_bob=bare;'
)


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

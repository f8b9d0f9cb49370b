"""SASL PLAIN and Kafka's JAAS user lists (security/plain.py)."""

from __future__ import annotations

import pytest

from logstore.errors import InvalidConfigError
from logstore.security.errors import SaslAuthenticationError
from logstore.security.plain import PlainServer, parse_jaas, parse_jaas_users

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

"""SCRAM (logstore/security/scram.py) against the RFCs' exchanges, and its failure paths."""

from __future__ import annotations

import base64

import pytest

from logstore.security.errors import SaslAuthenticationError
from logstore.security.scram import (
    MECHANISMS,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    decode_saslname,
    encode_saslname,
)

pytestmark = pytest.mark.unit

SHA1 = ScramMechanism("SCRAM-SHA-1", 0, "sha1")  # RFC 5802's example mechanism (not offered by the broker)
SHA256 = MECHANISMS["SCRAM-SHA-256"]
SHA512 = MECHANISMS["SCRAM-SHA-512"]


def _server_for(mechanism: ScramMechanism, salt_b64: str, password: str, nonce: str) -> ScramServer:
    credential = ScramCredential.from_password(mechanism, password, base64.b64decode(salt_b64), 4096)
    return ScramServer(mechanism, lambda user, mech: credential if user == "user" else None, nonce)


@pytest.mark.parametrize(
    ("mechanism", "client_first", "server_first", "client_final", "server_final"),
    [
        (  # RFC 5802 section 5
            SHA1,
            b"n,,n=user,r=fyko+d2lbbFgONRv9qkxdawL",
            b"r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,s=QSXCR+Q6sek8bf92,i=4096",
            b"c=biws,r=fyko+d2lbbFgONRv9qkxdawL3rfcNHYJY1ZVvWVs7j,p=v0X8v3Bz2T0CJGbJQyF0X+HI4Ts=",
            b"v=rmF9pqV8S7suAoZWja4dJRkFsKQ=",
        ),
        (  # RFC 7677 section 3
            SHA256,
            b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO",
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096",
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
            b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=",
        ),
    ],
    ids=["rfc5802-sha1", "rfc7677-sha256"],
)
def test_rfc_exchange(
    mechanism: ScramMechanism,
    client_first: bytes,
    server_first: bytes,
    client_final: bytes,
    server_final: bytes,
) -> None:
    fields = dict(item.split("=", 1) for item in server_first.decode().split(","))
    client_nonce = client_first.decode().split("r=")[1]
    server = _server_for(mechanism, fields["s"], "pencil", fields["r"][len(client_nonce) :])
    assert server.evaluate(client_first) == server_first
    assert server.evaluate(client_final) == server_final
    assert server.complete and server.username == "user"
    # The client side reproduces the RFC's proof and accepts its signature.
    client = ScramClient(mechanism, "user", "pencil", client_nonce)
    assert client.first() == client_first
    assert client.final(server_first) == client_final
    assert client.verify(server_final)


def _exchange(server: ScramServer, client: ScramClient) -> bytes:
    return server.evaluate(client.final(server.evaluate(client.first())))


@pytest.mark.parametrize("mechanism", [SHA256, SHA512], ids=lambda m: m.name)
def test_wrong_password_and_unknown_user_fail_alike(mechanism: ScramMechanism) -> None:
    credential = ScramCredential.from_password(mechanism, "right")
    lookup = {"alice": credential}

    def server() -> ScramServer:
        return ScramServer(mechanism, lambda user, mech: lookup.get(user) if mech == mechanism.name else None)

    good = ScramClient(mechanism, "alice", "right")
    assert good.verify(_exchange(server(), good))
    for user, password in (("alice", "wrong"), ("nobody", "right")):
        s, client = server(), ScramClient(mechanism, user, password)
        first = s.evaluate(client.first())
        assert first.startswith(b"r=")  # an unknown user still gets a salt and iterations
        with pytest.raises(
            SaslAuthenticationError, match=f"credentials with SASL mechanism {mechanism.name}"
        ):
            s.evaluate(client.final(first))
        assert not s.complete


def test_the_salt_of_an_unknown_user_is_stable() -> None:
    def salt() -> bytes:
        return ScramServer(SHA256, lambda u, m: None).evaluate(b"n,,n=ghost,r=abc").split(b",")[1]

    assert salt() == salt()


@pytest.mark.parametrize(
    "message",
    [
        b"p=tls-unique,,n=user,r=abc",  # channel binding
        b"n,,r=abc",  # no user
        b"n,,n=,r=abc",  # empty user
        b"n,,n=user",  # no nonce
        b"n,,n=u=ZZ,r=abc",  # a bad saslname escape
        b"n,a=other,n=user,r=abc",  # authzid of someone else
        b"n,,n=user,r=abc,m=mandatory",  # a mandatory extension
        b"n,,n=user,r=abc,tokenauth=true",  # delegation tokens are not supported
        b"\xff\xfe",
        b"",
    ],
)
def test_bad_client_first_messages_fail(message: bytes) -> None:
    server = ScramServer(SHA256, lambda u, m: ScramCredential.from_password(SHA256, "pw"))
    with pytest.raises(SaslAuthenticationError):
        server.evaluate(message)
    with pytest.raises(SaslAuthenticationError):  # and the exchange is over
        server.evaluate(b"n,,n=user,r=abc")


def test_tampered_client_final_fails() -> None:
    credential = ScramCredential.from_password(SHA512, "pw")
    for tamper in (
        lambda m: m.replace(b"c=biws", b"c=eSws"),  # another GS2 header
        lambda m: m.replace(b",r=", b",r=x"),  # another nonce
        lambda m: m[:-4] + b"AAA=",  # another proof
        lambda m: m.split(b",p=")[0],  # no proof
        lambda m: m + b"!",  # not base64
    ):
        server = ScramServer(SHA512, lambda u, m: credential)
        client = ScramClient(SHA512, "alice", "pw")
        final = client.final(server.evaluate(client.first()))
        with pytest.raises(SaslAuthenticationError):
            server.evaluate(tamper(final))
        assert not server.complete


def test_credential_format_is_kafkas() -> None:
    credential = ScramCredential.from_password(SHA512, "pw", b"0123456789abcdef", 8192)
    text = credential.format()
    assert text.startswith("salt=MDEyMzQ1Njc4OWFiY2RlZg==,stored_key=") and text.endswith(",iterations=8192")
    assert ScramCredential.parse(text) == credential
    assert len(credential.stored_key) == len(credential.server_key) == 64
    with pytest.raises(ValueError, match="not a SCRAM credential"):
        ScramCredential.parse("salt=AA==,iterations=4096")
    # From the salted password alone (what AlterUserScramCredentials carries): the same keys.
    salted = SHA512.salted_password("pw", b"0123456789abcdef", 8192)
    assert ScramCredential.from_salted_password(SHA512, b"0123456789abcdef", salted, 8192) == credential


def test_saslnames() -> None:
    assert encode_saslname("a,b=c") == "a=2Cb=3Dc"
    assert decode_saslname("a=2Cb=3Dc") == "a,b=c"
    with pytest.raises(ValueError):
        decode_saslname("a=2")

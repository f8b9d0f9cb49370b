"""SASL for logstore's client: PLAIN and SCRAM-SHA-256/512 on SASL_PLAINTEXT listeners.

``security.protocol=SASL_PLAINTEXT`` with ``sasl.mechanism`` (librdkafka's
``sasl.mechanisms`` too), ``sasl.username`` and ``sasl.password``, as
confluent-kafka takes them. Each new connection authenticates right after
ApiVersions, as Kafka's clients do (KIP-152): SaslHandshake v1 names the
mechanism, then SaslAuthenticate carries its tokens, one round for PLAIN
(``\\0user\\0password``), two for SCRAM (RFC 5802: client-first, then the
proof, and the broker's signature checked, so a server without the user's
credentials cannot pose as the broker). Nothing else is sent on the
connection before that succeeds.

A mechanism is a generator: it yields the token to send and is sent the
broker's answer to it; it returns when the exchange is done, and raises
ValueError for an answer that breaks the mechanism.

TLS (``SSL``, ``SASL_SSL``) is not spoken by this client: its reader thread
and its writers share one socket, which one OpenSSL connection does not allow.
confluent-kafka has the same API for those listeners.
"""

from __future__ import annotations

from collections.abc import Generator, Mapping
from typing import Any, NamedTuple

from logstore.security.scram import MECHANISMS as SCRAM_MECHANISMS
from logstore.security.scram import ScramClient

MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)
Steps = Generator[bytes, bytes, None]


class SaslSettings(NamedTuple):
    """Who to authenticate as, and how."""

    mechanism: str
    username: str
    password: str

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> SaslSettings | None:
        """The settings of a checked client config; None unless ``security.protocol=sasl_plaintext``."""
        if config["security.protocol"] != "sasl_plaintext":
            return None
        return cls(config["sasl.mechanism"], config["sasl.username"], config["sasl.password"])

    def steps(self) -> Steps:
        """The mechanism's exchange (see the module's docstring)."""
        if self.mechanism == "PLAIN":
            return _plain(self.username, self.password)
        return _scram(ScramClient(SCRAM_MECHANISMS[self.mechanism], self.username, self.password))

    def __repr__(self) -> str:  # never the password
        return f"SaslSettings(mechanism={self.mechanism!r}, username={self.username!r})"


def _plain(username: str, password: str) -> Steps:
    yield b"\0" + username.encode() + b"\0" + password.encode()  # RFC 4616, no authorization id


def _scram(client: ScramClient) -> Steps:
    server_first = yield client.first()
    try:
        final = client.final(server_first)
    except (KeyError, ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"a malformed SCRAM server-first message ({e})") from None
    server_final = yield final
    if not client.verify(server_final):
        raise ValueError(
            "the broker's SCRAM signature does not match: it does not hold this user's credentials"
        )

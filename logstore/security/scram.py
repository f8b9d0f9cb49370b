"""SCRAM (RFC 5802, RFC 7677): credentials and the server side of the exchange, as Kafka's.

Mechanisms: ``SCRAM-SHA-256`` (Kafka's mechanism id 1) and ``SCRAM-SHA-512``
(id 2), each with Kafka's iteration bounds 4096..16384 for stored credentials.

A stored credential never holds the password: it is Kafka's
``salt=<b64>,stored_key=<b64>,server_key=<b64>,iterations=<n>`` where
``SaltedPassword = PBKDF2-HMAC(password, salt, iterations)``,
``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``. PBKDF2 runs once, when a
credential is made (the client, the ``logstore users`` CLI); a login costs
the server two HMACs and one hash, O(1) in the iteration count.

The exchange (:class:`ScramServer`), messages as RFC 5802 section 7::

    client-first  n,,n=<user>,r=<client nonce>
    server-first  r=<client nonce><server nonce>,s=<b64 salt>,i=<iterations>
    client-final  c=biws,r=<nonce>,p=<b64 ClientProof>
    server-final  v=<b64 ServerSignature>

The proof is checked with :func:`hmac.compare_digest`. Channel binding is
not supported (``p=`` in the GS2 header fails, as Kafka). An unknown user
goes through the same two rounds against a made-up credential (a salt
derived from the name, so it does not change between attempts), and fails
at the proof, so a client cannot tell unknown users from wrong passwords.
Usernames are RFC 5802 saslnames (``=2C`` is ``,`` and ``=3D`` is ``=``).

>>> mech = MECHANISMS["SCRAM-SHA-256"]
>>> cred = ScramCredential.from_password(mech, "pencil", b"salt" * 4, 4096)
>>> ScramCredential.parse(cred.format()) == cred
True
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from collections.abc import Callable
from dataclasses import dataclass

from logstore.security.errors import SaslAuthenticationError

SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"

MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


@dataclass(frozen=True, slots=True)
class ScramMechanism:
    """A SCRAM mechanism: its SASL name, Kafka's id (AlterUserScramCredentials), its hash."""

    name: str
    kafka_id: int
    hash_name: str

    @property
    def digest_size(self) -> int:
        return hashlib.new(self.hash_name).digest_size

    def h(self, data: bytes) -> bytes:
        return hashlib.new(self.hash_name, data).digest()

    def hmac(self, key: bytes, data: bytes) -> bytes:
        return hmac.new(key, data, self.hash_name).digest()

    def salted_password(self, password: str, salt: bytes, iterations: int) -> bytes:
        """RFC 5802 Hi(): PBKDF2-HMAC over the UTF-8 password (Kafka applies no SASLprep)."""
        return hashlib.pbkdf2_hmac(self.hash_name, password.encode("utf-8"), salt, iterations)


MECHANISMS = {
    "SCRAM-SHA-256": ScramMechanism("SCRAM-SHA-256", 1, "sha256"),
    "SCRAM-SHA-512": ScramMechanism("SCRAM-SHA-512", 2, "sha512"),
}
BY_ID = {m.kafka_id: m for m in MECHANISMS.values()}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    """What the server keeps for one user and mechanism (never the password)."""

    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: ScramMechanism, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        client_key = mechanism.hmac(salted_password, b"Client Key")
        return cls(salt, mechanism.h(client_key), mechanism.hmac(salted_password, b"Server Key"), iterations)

    @classmethod
    def from_password(
        cls, mechanism: ScramMechanism, password: str, salt: bytes | None = None, iterations: int = 4096
    ) -> ScramCredential:
        """A credential for ``password`` (PBKDF2 here: O(iterations)); a random 32-byte salt by default."""
        salt = os.urandom(32) if salt is None else salt
        salted = mechanism.salted_password(password, salt, iterations)
        return cls.from_salted_password(mechanism, salt, salted, iterations)

    def format(self) -> str:
        """Kafka's persisted form (``ScramCredentialUtils.credentialToString``)."""
        b64 = base64.b64encode
        return (
            f"salt={b64(self.salt).decode()},stored_key={b64(self.stored_key).decode()},"
            f"server_key={b64(self.server_key).decode()},iterations={self.iterations}"
        )

    @classmethod
    def parse(cls, text: str) -> ScramCredential:
        """Kafka's persisted form back; ValueError if a field is missing or malformed."""
        fields = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
        try:
            return cls(
                base64.b64decode(fields["salt"], validate=True),
                base64.b64decode(fields["stored_key"], validate=True),
                base64.b64decode(fields["server_key"], validate=True),
                int(fields["iterations"]),
            )
        except (KeyError, ValueError) as e:
            raise ValueError(
                f"not a SCRAM credential ({e}): salt=..,stored_key=..,server_key=..,iterations=.."
            ) from None


def decode_saslname(name: str) -> str:
    """RFC 5802 saslname -> username: ``=2C`` -> ``,``, ``=3D`` -> ``=``; ValueError on another ``=``."""
    out = []
    i = 0
    while i < len(name):
        c = name[i]
        if c == "=":
            code = name[i + 1 : i + 3]
            if code == "2C":
                out.append(",")
            elif code == "3D":
                out.append("=")
            else:
                raise ValueError("invalid '=' escape in the username")
            i += 3
        else:
            out.append(c)
            i += 1
    return "".join(out)


def encode_saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


Lookup = Callable[[str, str], "ScramCredential | None"]  # (username, mechanism name) -> credential

_FAKE_KEY = secrets.token_bytes(32)  # made-up credentials for unknown users, per process


def _b64_canonical(text: str) -> bytes:
    """Base64 in its one canonical spelling (padding bits zero), else ValueError: a proof
    spelled another way is another message."""
    data = base64.b64decode(text, validate=True)
    if base64.b64encode(data).decode("ascii") != text:
        raise ValueError("non-canonical base64")
    return data


class ScramServer:
    """The server side of one SCRAM exchange: :meth:`evaluate` each client message in turn.

    States: ``first`` (expects client-first) -> ``final`` (expects client-final)
    -> ``complete``; any error raises :class:`SaslAuthenticationError` and the
    exchange is over (the caller closes the connection). ``username`` is set
    once complete.
    """

    def __init__(self, mechanism: ScramMechanism, lookup: Lookup, server_nonce: str | None = None) -> None:
        self.mechanism = mechanism
        self._lookup = lookup
        self._server_nonce = server_nonce or secrets.token_urlsafe(24)
        self.state = "first"
        self.username: str | None = None
        self._credential: ScramCredential | None = None
        self._known = False
        self._gs2_header = ""
        self._nonce = ""
        self._client_first_bare = ""
        self._server_first = ""

    @property
    def complete(self) -> bool:
        return self.state == "complete"

    def _failed(self) -> SaslAuthenticationError:
        self.state = "failed"
        return SaslAuthenticationError(
            "Authentication failed during authentication due to invalid credentials with SASL "
            f"mechanism {self.mechanism.name}"
        )

    def evaluate(self, token: bytes) -> bytes:
        if self.state == "first":
            return self._client_first(token)
        if self.state == "final":
            return self._client_final(token)
        state, self.state = self.state, "failed"
        raise SaslAuthenticationError(f"Unexpected SCRAM message in state {state}")

    def _client_first(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            self.state = "failed"
            raise SaslAuthenticationError("Invalid SCRAM client first message: not UTF-8") from None
        parts = message.split(",", 2)
        if len(parts) != 3 or parts[0] not in ("n", "y"):
            self.state = "failed"
            if parts and parts[0].startswith("p="):
                raise SaslAuthenticationError("Channel binding is not supported (SCRAM-*-PLUS)")
            raise SaslAuthenticationError("Invalid SCRAM client first message: bad GS2 header")
        authzid = parts[1]
        bare = parts[2]
        fields = bare.split(",")
        if len(fields) < 2 or not fields[0].startswith("n=") or not fields[1].startswith("r="):
            self.state = "failed"
            raise SaslAuthenticationError("Invalid SCRAM client first message: expected n=<user>,r=<nonce>")
        try:
            username = decode_saslname(fields[0][2:])
        except ValueError as e:
            self.state = "failed"
            raise SaslAuthenticationError(f"Invalid SCRAM client first message: {e}") from None
        client_nonce = fields[1][2:]
        extensions = fields[2:]
        if not username or not client_nonce or any(not 0x21 <= ord(c) <= 0x7E for c in client_nonce):
            self.state = "failed"
            raise SaslAuthenticationError("Invalid SCRAM client first message: empty user or bad nonce")
        if authzid and authzid != f"a={encode_saslname(username)}":
            self.state = "failed"
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        for extension in extensions:
            key = extension.split("=", 1)[0]
            if key == "m" or (key == "tokenauth" and extension != "tokenauth=false"):
                self.state = "failed"
                raise SaslAuthenticationError(f"Unsupported SCRAM extension {key}")
        credential = self._lookup(username, self.mechanism.name)
        self._known = credential is not None
        if credential is None:  # same rounds, certain failure (see the module doc)
            fake = hmac.new(_FAKE_KEY, username.encode("utf-8"), "sha256").digest()
            credential = ScramCredential(fake[:16], secrets.token_bytes(32), secrets.token_bytes(32), 4096)
        self.username = username
        self._credential = credential
        self._gs2_header = f"{parts[0]},{authzid},"
        self._nonce = client_nonce + self._server_nonce
        self._client_first_bare = bare
        self._server_first = (
            f"r={self._nonce},s={base64.b64encode(credential.salt).decode()},i={credential.iterations}"
        )
        self.state = "final"
        return self._server_first.encode("ascii")

    def _client_final(self, token: bytes) -> bytes:
        try:
            message = token.decode("utf-8")
        except UnicodeDecodeError:
            raise self._failed() from None
        cut = message.rfind(",p=")
        if cut < 0:
            raise self._failed()
        without_proof = message[:cut]
        fields = without_proof.split(",")
        if len(fields) < 2 or not fields[0].startswith("c=") or not fields[1].startswith("r="):
            raise self._failed()
        try:
            binding = _b64_canonical(fields[0][2:])
            proof = _b64_canonical(message[cut + 3 :])
        except ValueError:
            raise self._failed() from None
        credential = self._credential
        assert credential is not None
        ok = hmac.compare_digest(binding, self._gs2_header.encode("utf-8"))
        ok &= hmac.compare_digest(fields[1][2:].encode("utf-8"), self._nonce.encode("utf-8"))
        if len(proof) != self.mechanism.digest_size:
            raise self._failed()
        auth_message = f"{self._client_first_bare},{self._server_first},{without_proof}".encode()
        client_signature = self.mechanism.hmac(credential.stored_key, auth_message)
        client_key = bytes(a ^ b for a, b in zip(proof, client_signature, strict=True))
        ok &= hmac.compare_digest(self.mechanism.h(client_key), credential.stored_key)
        if not (ok and self._known):
            raise self._failed()
        self.state = "complete"
        server_signature = self.mechanism.hmac(credential.server_key, auth_message)
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (tests, the benchmark): ``first()``, ``final(server_first)``, ``verify(server_final)``."""

    def __init__(
        self, mechanism: ScramMechanism, username: str, password: str, nonce: str | None = None
    ) -> None:
        self.mechanism = mechanism
        self.username = username
        self.password = password
        self.nonce = nonce or secrets.token_urlsafe(18)
        self._bare = f"n={encode_saslname(username)},r={self.nonce}"
        self._auth_message = b""
        self._salted = b""

    def first(self) -> bytes:
        return f"n,,{self._bare}".encode()

    def final(self, server_first: bytes, salted_password: bytes | None = None) -> bytes:
        text = server_first.decode()
        fields = dict(item.split("=", 1) for item in text.split(","))
        salt = base64.b64decode(fields["s"])
        iterations = int(fields["i"])
        if not fields["r"].startswith(self.nonce):
            raise ValueError("server nonce does not extend the client nonce")
        self._salted = salted_password or self.mechanism.salted_password(self.password, salt, iterations)
        without_proof = f"c=biws,r={fields['r']}"
        self._auth_message = f"{self._bare},{text},{without_proof}".encode()
        client_key = self.mechanism.hmac(self._salted, b"Client Key")
        signature = self.mechanism.hmac(self.mechanism.h(client_key), self._auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature, strict=True))
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        server_key = self.mechanism.hmac(self._salted, b"Server Key")
        expected = b"v=" + base64.b64encode(self.mechanism.hmac(server_key, self._auth_message))
        return hmac.compare_digest(expected, server_final)

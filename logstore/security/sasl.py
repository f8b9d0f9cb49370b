"""SASL on SASL_PLAINTEXT and SASL_SSL listeners: the per-connection state machine.

Mechanisms: ``PLAIN`` (users from the listener's JAAS config; see plain.py),
``SCRAM-SHA-256`` and ``SCRAM-SHA-512`` (the credential store; see scram.py,
credentials.py), chosen by ``sasl.enabled.mechanisms`` (Kafka's default,
GSSAPI, is not supported: a SASL listener without a supported mechanism
fails at startup).

The exchange, as Kafka's ``SaslServerAuthenticator`` (KIP-43, KIP-152, KIP-368)::

    unauthenticated --ApiVersions--> (answered) unauthenticated
    unauthenticated --SaslHandshake v1 (mechanism)--> handshaken
    handshaken --SaslAuthenticate (token)*--> authenticated   (a failure: error answer, close)
    unauthenticated --SaslHandshake v0--> legacy: raw size-prefixed tokens, no Kafka header
    authenticated --SaslHandshake v1+ --> re-authenticating (the principal must not change)

Before authentication only ApiVersions, SaslHandshake and SaslAuthenticate
are served; any other request closes the connection unanswered (Kafka's
ILLEGAL_SASL_STATE disconnect), and a frame larger than
``sasl.server.max.receive.size`` (Kafka's 512 KiB) closes it: an
unauthenticated client cannot make the broker buffer 100 MB requests.

With ``connections.max.reauth.ms`` > 0 a session lasts that long
(SaslAuthenticate v1+ says so in ``session_lifetime_ms``); a request other
than SaslHandshake/SaslAuthenticate arriving after that closes the
connection, and the idle reaper closes expired idle connections too.

Cost: PLAINTEXT connections never reach this module (``Connection.sasl`` is
None there: one attribute check per request); a SASL connection pays one
header read and two comparisons per request once authenticated.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from logstore.errors import InvalidConfigError
from logstore.protocol import API_VERSIONS_KEY, HEADER, SIZE, ProtocolError
from logstore.security import KafkaPrincipal
from logstore.security.credentials import CredentialStore
from logstore.security.errors import SaslAuthenticationError
from logstore.security.plain import PlainServer, parse_jaas_users
from logstore.security.scram import MECHANISMS, ScramServer


class Connection(Protocol):
    """What SASL needs of a broker connection (the broker's network/connection.py has it)."""

    peer: str
    principal: KafkaPrincipal
    listener_name: str
    frame_limit: int

    def close(self, reason: str, abort: bool = False, quiet: bool = False) -> None: ...

    def write_now(self, chunks: list[Any]) -> None: ...


# The broker's request path: a frame (without its size) -> the answer (dispatch.py's Answer).
Dispatch = Callable[[Any, Any], Awaitable[Any]]

_log = logging.getLogger("logstore.security")

SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36
SUPPORTED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
_BEFORE_AUTH = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})
_REAUTH = frozenset({SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY})


@dataclass
class SaslListener:
    """What one SASL listener accepts: its mechanisms, PLAIN users, the SCRAM store, session lifetime."""

    name: str
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]
    credentials: CredentialStore
    reauth_ms: int = 0
    max_receive_size: int = 524_288  # sasl.server.max.receive.size: frames before authentication

    @classmethod
    def from_config(cls, listener: str, setting: Any, credentials: CredentialStore) -> SaslListener:
        """``setting(key)``: the listener's value of a broker key (listener-prefixed first)."""
        mechanisms = tuple(
            m.strip().upper() for m in str(setting("sasl.enabled.mechanisms") or "").split(",") if m.strip()
        )
        usable = tuple(m for m in mechanisms if m in SUPPORTED_MECHANISMS)
        if not usable:
            raise InvalidConfigError(
                f"listener {listener}: sasl.enabled.mechanisms={','.join(mechanisms) or '(empty)'} has no "
                f"mechanism logstore supports; logstore supports {', '.join(SUPPORTED_MECHANISMS)} "
                "(GSSAPI and OAUTHBEARER are not), e.g. sasl.enabled.mechanisms=SCRAM-SHA-512"
            )
        for unsupported in set(mechanisms) - set(usable):
            _log.warning(
                "listener %s: SASL mechanism %s is not supported; not offered", listener, unsupported
            )
        plain_users: dict[str, str] = {}
        if "PLAIN" in usable:
            prefixed = f"listener.name.{listener.lower()}.plain.sasl.jaas.config"
            jaas = setting(prefixed) or setting("sasl.jaas.config")
            if not jaas:
                raise InvalidConfigError(
                    f"listener {listener}: PLAIN needs its users: set {prefixed}="
                    '"org.apache.kafka.common.security.plain.PlainLoginModule required '
                    'user_alice=\\"alice-secret\\";"'
                )
            plain_users = parse_jaas_users(str(jaas), prefixed)
        return cls(
            listener,
            usable,
            plain_users,
            credentials,
            int(setting("connections.max.reauth.ms") or 0),
            int(setting("sasl.server.max.receive.size") or 524_288),
        )

    def server(self, mechanism: str) -> PlainServer | ScramServer:
        if mechanism == "PLAIN":
            return PlainServer(self.plain_users)
        return ScramServer(MECHANISMS[mechanism], self.credentials.get)


@dataclass
class SaslSession:
    """One connection's SASL state (see the module doc)."""

    listener: SaslListener
    request_max_bytes: int  # the connection's frame limit once authenticated (socket.request.max.bytes)
    authenticated: bool = False
    mechanism: str | None = None
    server: Any = None
    legacy: bool = False  # after SaslHandshake v0: raw tokens
    expires_at: float | None = None  # time.monotonic() past which the session is over
    close_after_response: bool = False
    close_reason: str = "SASL state illegal"
    _reauthenticating: bool = field(default=False)

    # -- the gate on every request of a SASL connection ------------------------

    async def serve(self, frame: Any, connection: Connection, dispatch: Dispatch) -> Any:
        """Serve one frame of a SASL connection: a raw token, an allowed request, or a close."""
        if self.legacy:
            return self._raw_token(bytes(frame), connection)
        if len(frame) < HEADER.size:
            raise ProtocolError(f"a {len(frame)}-byte frame is too short for a request header")
        api_key = HEADER.unpack_from(frame, 0)[0]
        if not self.authenticated:
            if api_key not in _BEFORE_AUTH:
                connection.close(
                    f"request with API key {api_key} before SASL authentication completed (ILLEGAL_SASL_STATE)"
                )
                return None
        elif self.expires_at is not None and api_key not in _REAUTH and time.monotonic() > self.expires_at:
            connection.close(
                f"SASL session of {connection.principal} expired (connections.max.reauth.ms="
                f"{self.listener.reauth_ms}) without re-authentication"
            )
            return None
        chunks = await dispatch(frame, connection)
        if self.close_after_response:
            if chunks:
                connection.write_now(chunks)
            connection.close(self.close_reason)
            return None
        return chunks

    def expired(self, now: float) -> bool:
        return self.expires_at is not None and now > self.expires_at and not self._reauthenticating

    # -- SaslHandshake ----------------------------------------------------------

    def handshake(self, mechanism: str, version: int) -> str:
        """Start an exchange; returns "ok", "unsupported" (close after answering) or "illegal"."""
        self.close_after_response = True  # unless it goes well
        if self.mechanism is not None and not self.authenticated:
            self.close_reason = "a second SaslHandshake in the middle of an exchange (ILLEGAL_SASL_STATE)"
            return "illegal"
        if self.authenticated and (version < 1 or mechanism != self.mechanism):
            # Re-authentication: SaslHandshake v1+ and the same mechanism (Kafka's rule).
            self.close_reason = f"re-authentication with SaslHandshake v{version} {mechanism[:40]!r} refused"
            return "illegal" if version < 1 else "unsupported"
        if mechanism not in self.listener.mechanisms:
            self.close_reason = (
                f"SASL mechanism {mechanism[:40]!r} is not enabled (UNSUPPORTED_SASL_MECHANISM)"
            )
            return "unsupported"
        self.close_after_response = False
        self._reauthenticating = self.authenticated
        self.mechanism = mechanism
        self.server = self.listener.server(mechanism)
        self.legacy = version == 0
        return "ok"

    # -- SaslAuthenticate -------------------------------------------------------

    def authenticate(self, token: bytes, connection: Connection, version: int) -> tuple[bytes, int]:
        """One token of the exchange -> (the server's token, session lifetime ms or 0).

        Raises :class:`SaslAuthenticationError` (the caller answers SASL_AUTHENTICATION_FAILED
        and closes) or returns; the connection's principal is set once the exchange completes.
        """
        server = self.server
        if server is None or (self.authenticated and not self._reauthenticating):
            self.close_after_response = True
            self.close_reason = "SaslAuthenticate before SaslHandshake (ILLEGAL_SASL_STATE)"
            raise IllegalSaslState("SaslAuthenticate before SaslHandshake")
        try:
            response: bytes = server.evaluate(token)
        except SaslAuthenticationError as e:
            self.close_after_response = True
            self.close_reason = f"{self.mechanism} authentication failed: {e}"
            self.server = None
            raise
        lifetime = 0
        if server.complete:
            principal = KafkaPrincipal("User", server.username)
            if self._reauthenticating and principal != connection.principal:
                self.close_after_response = True
                self.close_reason = "re-authentication as another principal"
                raise SaslAuthenticationError(
                    f"Cannot change principals during re-authentication from {connection.principal}: {principal}"
                )
            connection.principal = principal
            # Frames up to socket.request.max.bytes from now on (sasl.server.max.receive.size before).
            connection.frame_limit = self.request_max_bytes
            self.authenticated = True
            self._reauthenticating = False
            self.server = None
            if self.listener.reauth_ms > 0:
                lifetime = self.listener.reauth_ms
                self.expires_at = time.monotonic() + lifetime / 1000
            _log.info(
                "%s authenticated %s with %s on listener %s",
                connection.peer, principal, self.mechanism, self.listener.name,
            )  # fmt: skip
        return response, (lifetime if version >= 1 else 0)

    def _raw_token(self, token: bytes, connection: Connection) -> list[Any] | None:
        """A token after SaslHandshake v0 (KIP-43): raw in, raw out; a failure closes unanswered."""
        try:
            response, _ = self.authenticate(token, connection, 0)
        except (SaslAuthenticationError, IllegalSaslState) as e:
            connection.close(f"SASL authentication failed: {e}")
            return None
        if self.authenticated:
            self.legacy = False
        return [SIZE.pack(len(response)) + response]


class IllegalSaslState(Exception):
    """A SASL request out of order (ILLEGAL_SASL_STATE)."""

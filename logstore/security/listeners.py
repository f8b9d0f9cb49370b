"""A broker's listeners and what each asks of a connection: TLS, SASL, both or neither.

``listeners=PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093,SASL_SSL://127.0.0.1:9094``
names each listener; ``listener.security.protocol.map`` (Kafka's default
maps each of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL to itself) gives its
security protocol. :class:`BrokerSecurity` is built from those config values
(the broker's config hands them in: ``BrokerConfig.listener_security``) when
the broker is made, so a wrong TLS file or SASL setting fails at startup
with the key to fix; it holds one :class:`ssl.SSLContext` per TLS listener
and one :class:`SaslListener` per SASL listener, and sets a new
connection's TLS flag, principal and SASL session (:meth:`on_connect`).
PLAINTEXT connections are untouched (``Connection.sasl`` stays None).

Clients are told the endpoints of the listener they connected to
(:meth:`logstore.broker.metadata_cache.BrokerEndpoint.for_listener`), as Kafka.
In a cluster, brokers talk to each other on the inter-broker listener
(``inter.broker.listener.name``, else the listener of
``security.inter.broker.protocol``), which must be PLAINTEXT here.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from logstore.errors import InvalidConfigError
from logstore.security import ANONYMOUS
from logstore.security.credentials import CredentialStore
from logstore.security.sasl import Connection, SaslListener, SaslSession
from logstore.security.tls import peer_principal, server_context

_log = logging.getLogger("logstore.security")


class SecuredConnection(Connection, Protocol):
    """What a TLS or SASL listener sets on a new broker connection."""

    security_protocol: str
    tls: bool
    sasl: SaslSession | None


class BrokerSecurity:
    """The listeners' TLS contexts and SASL settings (see the module doc)."""

    def __init__(
        self,
        protocols: Mapping[str, str],
        listener_value: Callable[[str, str], Any],
        inter_broker_listener: str | None = None,
        inter_broker_protocol: str | None = None,
    ) -> None:
        """``protocols``: each listener's security protocol, by name; ``listener_value(listener,
        key)``: a TLS or SASL setting of one listener; ``inter_broker_listener`` and
        ``inter_broker_protocol``: ``inter.broker.listener.name`` and
        ``security.inter.broker.protocol`` (None: not set)."""
        self.protocols = dict(protocols)  # listener name -> security protocol
        self.contexts: dict[str, ssl.SSLContext] = {}
        self.sasl: dict[str, SaslListener] = {}
        self.credentials: CredentialStore | None = None
        for name, protocol in self.protocols.items():

            def setting(key: str, name: str = name) -> Any:
                return listener_value(name, key)

            if protocol in ("SSL", "SASL_SSL"):
                self.contexts[name] = server_context(name, setting)
            if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
                self.sasl[name] = SaslListener.from_config(name, setting, _Pending())
        self.inter_broker_listener = self._inter_broker(inter_broker_listener, inter_broker_protocol)

    def _inter_broker(self, named: str | None, protocol: str | None) -> str:
        if named:
            name = str(named).upper()
            if name not in self.protocols:
                raise InvalidConfigError(
                    f"inter.broker.listener.name={name} is not one of the listeners ({', '.join(self.protocols)})"
                )
            return name
        wanted = str(protocol or "PLAINTEXT").upper()
        for name, protocol in self.protocols.items():
            if protocol == wanted:
                return name
        return next(iter(self.protocols))

    def check_cluster(self) -> None:
        """In a cluster, brokers connect to each other unauthenticated: that listener must be PLAINTEXT."""
        protocol = self.protocols[self.inter_broker_listener]
        if protocol != "PLAINTEXT":
            raise InvalidConfigError(
                f"the inter-broker listener {self.inter_broker_listener} is {protocol}; brokers of a logstore "
                "cluster talk to each other over PLAINTEXT only: add a PLAINTEXT listener on a private "
                "address and set inter.broker.listener.name to it"
            )

    def use_credentials(self, store: CredentialStore) -> None:
        self.credentials = store
        for listener in self.sasl.values():
            listener.credentials = store

    def context(self, listener: str) -> ssl.SSLContext | None:
        return self.contexts.get(listener)

    def on_connect(self, connection: SecuredConnection, transport: Any) -> None:
        """A new connection on a TLS or SASL listener: its TLS flag, principal and SASL session."""
        ssl_object = transport.get_extra_info("ssl_object")
        if ssl_object is not None:
            connection.tls = True
            if connection.security_protocol == "SSL":
                connection.principal = peer_principal(ssl_object)
                if connection.principal != ANONYMOUS:
                    _log.info(
                        "%s authenticated %s by its TLS certificate on listener %s",
                        connection.peer, connection.principal, connection.listener_name,
                    )  # fmt: skip
        listener = self.sasl.get(connection.listener_name)
        if listener is not None:
            connection.sasl = SaslSession(listener, connection.frame_limit)
            connection.frame_limit = min(connection.frame_limit, listener.max_receive_size)


class _Pending(CredentialStore):
    """The credential store until the broker has its own (made at start)."""

"""Raw SASL clients for the security tests: SaslHandshake/SaslAuthenticate by hand, over TCP or TLS.

``SaslWire(bootstrap, tls=context)`` is a :class:`wire.WireClient` whose socket may
be TLS; ``plain``/``scram`` run a whole exchange and return the last
SaslAuthenticate response; ``answered`` tells whether a request gets a
response or the connection closes (or stays silent) instead.
"""

from __future__ import annotations

import os
import ssl
import struct
import subprocess
import sys
from typing import Any

from kio.index import load_payload_module
from kio.static.constants import EntityType

from logstore.security.scram import MECHANISMS, ScramClient
from tests.kit.brokerkit import BrokerProcess, free_port
from tests.kit.wire import WireClient, encode_request, request_class


def metadata_request(topic: str | None = None, version: int = 4) -> Any:
    """Metadata that would auto-create ``topic`` if it were served (a canary)."""
    module = load_payload_module(3, version, EntityType.request)
    topics = None if topic is None else (module.MetadataRequestTopic(name=topic),)
    return module.MetadataRequest(topics=topics, allow_auto_topic_creation=True)


def handshake_request(mechanism: str, version: int = 1) -> Any:
    return request_class(17, version)(mechanism=mechanism)


def authenticate_request(token: bytes, version: int = 2) -> Any:
    return request_class(36, version)(auth_bytes=token)


def tls_context(ca: str, cert: str | None = None, key: str | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=ca)
    if cert:
        context.load_cert_chain(cert, key)
    return context


class SaslWire(WireClient):
    """A raw connection to a (SASL, TLS) listener."""

    def __init__(self, bootstrap: str, timeout: float = 10, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(bootstrap, timeout)
        if tls is not None:
            self.sock = tls.wrap_socket(self.sock, server_hostname=bootstrap.rsplit(":", 1)[0])

    def __enter__(self) -> SaslWire:
        return self

    def handshake(self, mechanism: str, version: int = 1) -> Any:
        return self.call(handshake_request(mechanism, version))

    def authenticate(self, token: bytes, version: int = 2) -> Any:
        return self.call(authenticate_request(token, version))

    def plain(self, user: str, password: str, version: int = 2) -> Any:
        assert self.handshake("PLAIN").error_code.value == 0
        return self.authenticate(f"\0{user}\0{password}".encode(), version)

    def scram(self, mechanism: str, user: str, password: str, version: int = 2) -> Any:
        assert self.handshake(mechanism).error_code.value == 0
        client = ScramClient(MECHANISMS[mechanism], user, password)
        first = self.authenticate(client.first(), version)
        if first.error_code.value != 0:
            return first
        final = self.authenticate(client.final(first.auth_bytes), version)
        if final.error_code.value == 0:
            assert client.verify(final.auth_bytes), "the broker's server signature does not verify"
        return final

    def raw_token(self, token: bytes) -> bytes:
        """A KIP-43 raw token (after SaslHandshake v0): size-prefixed, no header; the raw answer."""
        self.sock.sendall(struct.pack(">i", len(token)) + token)
        return self.read_frame()

    def answered(self, request: Any, wait: float = 3.0) -> bool:
        """Whether ``request`` gets a response; False when the broker closes or stays silent."""
        try:
            correlation_id = self.send(request)
        except OSError:
            return False
        return self.answered_after(correlation_id, wait)

    def answered_after(self, correlation_id: int, wait: float = 3.0) -> bool:
        self.sock.settimeout(wait)
        try:
            while True:
                frame = self.read_frame()
                if struct.unpack_from(">i", frame, 0)[0] == correlation_id:
                    return True
        except (ConnectionError, TimeoutError, ssl.SSLError, OSError):
            return False

    def is_closed(self, wait: float = 5.0) -> bool:
        """True once the broker closes the connection (EOF or reset) within ``wait`` seconds."""
        self.sock.settimeout(wait)
        try:
            while True:
                if not self.sock.recv(65536):
                    return True
        except (ConnectionError, ssl.SSLError):
            return True
        except TimeoutError:
            return False


__all__ = [
    "SaslWire",
    "authenticate_request",
    "encode_request",
    "handshake_request",
    "metadata_request",
    "tls_context",
]


def scram_acl_broker(
    directory: str, passwords: dict[str, str], overrides: dict[str, str], sasl_port: int
) -> BrokerProcess:
    """A broker (not started) with a PLAINTEXT listener and a SASL_PLAINTEXT one on ``sasl_port``,
    SCRAM-SHA-512 users ``passwords`` (user -> password) stored with ``logstore users add``, and the
    ACL authorizer on; ``overrides`` on top (``super.users`` among them)."""
    plain = free_port()
    process = BrokerProcess(
        os.path.join(directory, "data"),
        {
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": "SCRAM-SHA-512",
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            **overrides,
        },
        port=plain,
        listeners=f"PLAINTEXT://127.0.0.1:{plain},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
    )
    for user, password in passwords.items():
        made = subprocess.run(
            [sys.executable, "-m", "logstore", "users", "add", "--data-dir", process.data_dir, "--user", user,
             "--password", password, "--mechanism", "SCRAM-SHA-512"],
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert made.returncode == 0, made.stderr
    return process

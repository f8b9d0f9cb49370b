"""TLS for SSL and SASL_SSL listeners: Kafka's ``ssl.*`` configs over Python's :mod:`ssl`.

Keystore and truststore are PEM (``ssl.keystore.type=PEM``,
``ssl.truststore.type=PEM``; Kafka's JKS/PKCS12 defaults are refused with a
message saying so):

* ``ssl.keystore.location``: a PEM file with the private key and the
  certificate chain (``ssl.key.password`` decrypts an encrypted key), or
  inline ``ssl.keystore.key`` + ``ssl.keystore.certificate.chain`` (PEM text).
* ``ssl.truststore.location`` (a PEM bundle of CA certificates) or inline
  ``ssl.truststore.certificates``: whom client certificates must chain to.
* ``ssl.client.auth``: ``none`` (no client certificate asked),
  ``requested`` (asked; a connection without one stays ``User:ANONYMOUS``;
  one that presents an untrusted or expired certificate fails the
  handshake), ``required`` (a trusted certificate or no connection).
* ``ssl.enabled.protocols`` (``TLSv1.2,TLSv1.3``) bound the versions;
  ``ssl.cipher.suites`` (OpenSSL names) narrows TLS 1.2 ciphers.

Each key may be given per listener as ``listener.name.<listener>.ssl.<key>``.

The principal of a connection with a client certificate is Kafka's default:
``User:`` + the subject's RFC 2253 distinguished name (last RDN first,
``CN=alice,OU=eng,O=Example,C=US``); without one it is ``User:ANONYMOUS``.

>>> rfc2253_name(((("countryName", "US"),), (("organizationName", "Acme, Inc"),), (("commonName", "alice"),)))
'CN=alice,O=Acme\\\\, Inc,C=US'
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Callable
from typing import Any

from logstore.errors import InvalidConfigError
from logstore.security import ANONYMOUS, KafkaPrincipal

_TLS_VERSIONS = {
    "TLSv1.2": ssl.TLSVersion.TLSv1_2,
    "TLSv1.3": ssl.TLSVersion.TLSv1_3,
}
_CLIENT_AUTH = {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}

# Attribute keywords of RFC 2253 (and those Java's X500Principal writes by name).
_SHORT_NAMES = {
    "commonName": "CN",
    "countryName": "C",
    "localityName": "L",
    "stateOrProvinceName": "ST",
    "organizationName": "O",
    "organizationalUnitName": "OU",
    "streetAddress": "STREET",
    "domainComponent": "DC",
    "userId": "UID",
}

Setting = Callable[[str], Any]  # ssl key -> its value for one listener


def _escape(value: str) -> str:
    out = []
    for i, c in enumerate(value):
        if c in ',+"\\<>;' or (c == "#" and i == 0) or (c == " " and i in (0, len(value) - 1)):
            out.append("\\" + c)
        else:
            out.append(c)
    return "".join(out)


def rfc2253_name(subject: Any) -> str:
    """The RFC 2253 string of a subject as :meth:`ssl.SSLSocket.getpeercert` gives it."""
    rdns = []
    for rdn in reversed(subject):
        rdns.append("+".join(f"{_SHORT_NAMES.get(key, key)}={_escape(str(value))}" for key, value in rdn))
    return ",".join(rdns)


def peer_principal(ssl_object: Any) -> KafkaPrincipal:
    """``User:<RFC 2253 subject>`` of a verified client certificate, else ``User:ANONYMOUS``."""
    if ssl_object is None:
        return ANONYMOUS
    cert = ssl_object.getpeercert()
    if not cert or not cert.get("subject"):
        return ANONYMOUS
    return KafkaPrincipal("User", rfc2253_name(cert["subject"]))


def server_context(listener: str, setting: Setting) -> ssl.SSLContext:
    """An :class:`ssl.SSLContext` for ``listener`` from its ``ssl.*`` settings; InvalidConfigError
    naming the key when one is wrong (a missing file, a wrong password, a non-PEM type)."""

    def key(name: str) -> str:
        return f"ssl.{name} (listener {listener})"

    for store in ("keystore", "truststore"):
        store_type = str(setting(f"ssl.{store}.type") or "JKS").upper()
        given = setting(f"ssl.{store}.location") or setting(
            "ssl.keystore.key" if store == "keystore" else "ssl.truststore.certificates"
        )
        if given and store_type != "PEM":
            raise InvalidConfigError(
                f"{key(store + '.type')}={store_type} is not supported: logstore reads PEM files; "
                f"set ssl.{store}.type=PEM and give PEM files"
            )
    protocols = [p.strip() for p in str(setting("ssl.enabled.protocols") or "").split(",") if p.strip()]
    unknown = [p for p in protocols if p not in _TLS_VERSIONS]
    if unknown or not protocols:
        raise InvalidConfigError(
            f"{key('enabled.protocols')}: {', '.join(unknown) or '(empty)'} not supported; use TLSv1.2 and/or TLSv1.3"
        )
    client_auth = str(setting("ssl.client.auth") or "none").lower()
    if client_auth not in _CLIENT_AUTH:
        raise InvalidConfigError(f"{key('client.auth')}={client_auth}: use none, requested or required")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_TLS_VERSIONS[p] for p in protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    ciphers = str(setting("ssl.cipher.suites") or "")
    if ciphers:
        try:
            context.set_ciphers(ciphers.replace(",", ":"))
        except ssl.SSLError as e:
            raise InvalidConfigError(f"{key('cipher.suites')}: {e}") from None
    password = setting("ssl.key.password") or setting("ssl.keystore.password")
    location = setting("ssl.keystore.location")
    inline_key, inline_chain = setting("ssl.keystore.key"), setting("ssl.keystore.certificate.chain")
    try:
        if location:
            context.load_cert_chain(location, password=password or None)
        elif inline_key and inline_chain:
            _load_inline_chain(context, str(inline_key), str(inline_chain), password)
        else:
            raise InvalidConfigError(
                f"listener {listener} uses TLS but has no certificate: set ssl.keystore.type=PEM and "
                "ssl.keystore.location (a PEM file with the key and certificate chain), or "
                "ssl.keystore.key and ssl.keystore.certificate.chain"
            )
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(
            f"{key('keystore.location')}: cannot load the key and certificate chain ({e}); check the "
            "file is PEM with the key and its certificates, and ssl.key.password for an encrypted key"
        ) from None
    trust_location, trust_inline = setting("ssl.truststore.location"), setting("ssl.truststore.certificates")
    try:
        if trust_location:
            context.load_verify_locations(cafile=trust_location)
        elif trust_inline:
            context.load_verify_locations(cadata=str(trust_inline))
    except (OSError, ssl.SSLError) as e:
        raise InvalidConfigError(
            f"{key('truststore.location')}: cannot load the CA certificates ({e})"
        ) from None
    context.verify_mode = _CLIENT_AUTH[client_auth]
    if client_auth != "none" and not (trust_location or trust_inline):
        raise InvalidConfigError(
            f"{key('client.auth')}={client_auth} needs CA certificates to check client certificates: "
            "set ssl.truststore.type=PEM and ssl.truststore.location"
        )
    return context


def _load_inline_chain(context: ssl.SSLContext, key: str, chain: str, password: Any) -> None:
    """ssl loads keys from files only: write the inline PEM to a private temporary file, load, remove."""
    fd, path = tempfile.mkstemp(prefix="logstore-keystore-", suffix=".pem")
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password or None)
    finally:
        os.unlink(path)

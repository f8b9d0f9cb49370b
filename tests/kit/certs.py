"""Test certificates made with ``cryptography``: a CA, server and client certificates, PEM files.

    pki = TestPKI(tmp_path)                      # a CA ("logstore test CA")
    server = pki.issue("broker", ip="127.0.0.1")  # key + chain in server.pem (the broker's keystore)
    client = pki.issue("alice", org="Example")    # CN=alice,O=Example
    old = pki.issue("old", expired=True)          # not valid since yesterday
    other = TestPKI(tmp_path, name="untrusted CA").issue("mallory")

Each :class:`Issued` has ``key``/``cert`` (separate PEM files, what librdkafka's
``ssl.key.location``/``ssl.certificate.location`` and kafka-python's
``ssl_keyfile``/``ssl_certfile`` take) and ``keystore`` (key then chain in one
file: a logstore/Kafka PEM keystore). ``pki.ca_path`` is the CA bundle for
``ssl.truststore.location`` / ``ssl.ca.location``. Keys are EC P-256 (fast to
make); ``password`` encrypts the keystore's key.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    """One issued certificate's files."""

    name: str
    key: str  # PEM private key (unencrypted)
    cert: str  # PEM certificate followed by the CA's
    keystore: str  # key (encrypted with the password, if any) then the chain


class TestPKI:
    """A certificate authority in ``directory`` that issues certificates (see the module doc)."""

    __test__ = False  # not a pytest class

    def __init__(self, directory: str | os.PathLike[str], name: str = "logstore test CA") -> None:
        self.directory = str(directory)
        os.makedirs(self.directory, exist_ok=True)
        self.slug = name.replace(" ", "-")
        self.key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=2))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self.key, hashes.SHA256())
        )
        self.ca_path = os.path.join(self.directory, f"{self.slug}.pem")
        with open(self.ca_path, "wb") as f:
            f.write(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        cn: str,
        *,
        org: str | None = None,
        ip: str | None = None,
        dns: str | None = None,
        expired: bool = False,
        password: str | None = None,
    ) -> Issued:
        key = ec.generate_private_key(ec.SECP256R1())
        # Encoded most significant first (O, then CN), as openssl -subj /O=../CN=.. does: the
        # RFC 2253 name (Kafka's principal) reads it backwards, CN=alice,O=Example.
        attributes = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)] if org else []
        attributes.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=2), now - datetime.timedelta(days=1))
            if expired
            else (now - datetime.timedelta(days=1), now + datetime.timedelta(days=30))
        )
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        names: list[x509.GeneralName] = []
        if ip:
            names.append(x509.IPAddress(ipaddress.ip_address(ip)))
        if dns:
            names.append(x509.DNSName(dns))
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self.key, hashes.SHA256())
        chain = cert.public_bytes(serialization.Encoding.PEM) + self.cert.public_bytes(
            serialization.Encoding.PEM
        )
        plain_key = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        store_key = (
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(password.encode()),
            )
            if password
            else plain_key
        )
        base = os.path.join(self.directory, f"{self.slug}-{cn}")
        paths = Issued(cn, f"{base}.key", f"{base}.crt", f"{base}-keystore.pem")
        for path, data in ((paths.key, plain_key), (paths.cert, chain), (paths.keystore, store_key + chain)):
            with open(path, "wb") as f:
                f.write(data)
        return paths

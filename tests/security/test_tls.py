"""TLS (security/tls.py): a certificate's subject as Kafka's RFC 2253 principal name."""

from __future__ import annotations

import pytest

from logstore.security.tls import rfc2253_name

pytestmark = pytest.mark.unit


def test_rfc2253_names() -> None:
    subject = (
        (("countryName", "US"),),
        (("organizationName", "Example, Inc"),),
        (("organizationalUnitName", "eng"), ("commonName", "#alice ")),
    )
    assert rfc2253_name(subject) == "OU=eng+CN=\\#alice\\ ,O=Example\\, Inc,C=US"

"""Errors of the security layer."""

from __future__ import annotations

from logstore.errors import LogstoreError


class SaslAuthenticationError(LogstoreError):
    """A SASL exchange failed; the message is what the client is told (SASL_AUTHENTICATION_FAILED)."""

"""Security: who a connection is (the principal), and what it may do.

A connection starts as ``User:ANONYMOUS`` (Kafka's principal for PLAINTEXT and
for SSL without a client certificate); TLS client authentication or SASL
replace it with the authenticated principal. Authorization (ACLs) and quotas
key on that principal.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class KafkaPrincipal:
    """A principal as Kafka writes it: ``<type>:<name>``, e.g. ``User:alice``."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``"User:alice"`` -> KafkaPrincipal("User", "alice"); ValueError without a type."""
        principal_type, sep, name = text.partition(":")
        if not sep or not principal_type:
            raise ValueError(f"principal {text!r} is not of the form <type>:<name> (e.g. User:alice)")
        return cls(principal_type, name)


ANONYMOUS = KafkaPrincipal("User", "ANONYMOUS")

__all__ = ["ANONYMOUS", "KafkaPrincipal"]

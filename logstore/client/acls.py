"""ACL types of logstore's AdminClient, as confluent-kafka names them.

:class:`AclBinding` is one ACL, :class:`AclBindingFilter` selects ACLs (None matches
any name, principal or host; ANY types and MATCH patterns as Kafka's filters). The
codes are Kafka's: ``ResourceType`` (the admin module's; BROKER is Kafka's CLUSTER, 4),
:class:`ResourcePatternType`, the admin module's ``AclOperation``, and
:class:`AclPermissionType`.

>>> from logstore.client.admin import AclOperation, ResourceType
>>> b = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
...                AclOperation.READ, AclPermissionType.ALLOW)
>>> b == AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
...                 AclOperation.READ, AclPermissionType.ALLOW), b.restype.value
(True, 2)
"""

from __future__ import annotations

from enum import Enum
from typing import Any


class ResourcePatternType(Enum):
    """Kafka's PatternType: LITERAL and PREFIXED in ACLs; MATCH and ANY in filters too."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(Enum):
    """Kafka's AclPermissionType."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclBinding:
    """One ACL: principal ``<type>:<name>`` from ``host`` may (ALLOW) or may not (DENY) do
    ``operation`` on the resources the pattern selects."""

    _nullable = False

    def __init__(
        self,
        restype: Any,
        name: str | None,
        resource_pattern_type: ResourcePatternType,
        principal: str | None,
        host: str | None,
        operation: Any,
        permission_type: AclPermissionType,
    ) -> None:
        for what, value in (("name", name), ("principal", principal), ("host", host)):
            if value is None and not self._nullable:
                raise ValueError(f"{type(self).__name__}: {what} must not be None")
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{type(self).__name__}: {what} must be a str, not {type(value).__name__}")
        self.restype = restype
        self.name = name
        self.resource_pattern_type = resource_pattern_type
        self.principal = principal
        self.host = host
        self.operation = operation
        self.permission_type = permission_type

    def _key(self) -> tuple[Any, ...]:
        return (self.restype, self.name, self.resource_pattern_type, self.principal, self.host,
                self.operation, self.permission_type)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        parts = [str(k) if not isinstance(k, Enum) else f"{type(k).__name__}.{k.name}" for k in self._key()]
        return f"{type(self).__name__}({','.join(parts)})"

    def wire(self) -> dict[str, Any]:
        """The fields of a CreateAcls creation (also a filter's, renamed by the caller)."""
        return {
            "resource_type": self.restype.value,
            "resource_name": self.name,
            "resource_pattern_type": self.resource_pattern_type.value,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.value,
            "permission_type": self.permission_type.value,
        }


class AclBindingFilter(AclBinding):
    """Selects ACLs (DescribeAcls, DeleteAcls); None name, principal or host match any."""

    _nullable = True

    def wire_filter(self) -> dict[str, Any]:
        return {
            "resource_type_filter": self.restype.value,
            "resource_name_filter": self.name,
            "pattern_type_filter": self.resource_pattern_type.value,
            "principal_filter": self.principal,
            "host_filter": self.host,
            "operation": self.operation.value,
            "permission_type": self.permission_type.value,
        }


__all__ = ["AclBinding", "AclBindingFilter", "AclPermissionType", "ResourcePatternType"]

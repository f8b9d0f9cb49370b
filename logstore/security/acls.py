"""ACLs as Kafka models them: resource patterns, entries, bindings and filters.

Codes are Kafka's (``org.apache.kafka.common.resource.ResourceType``,
``PatternType``, ``acl.AclOperation``, ``acl.AclPermissionType``), so they go
on the wire as they are. An :class:`AclBinding` is one ACL: a
:class:`ResourcePattern` (type, name, LITERAL or PREFIXED; the literal name
``*`` matches every resource of its type) and an :class:`AccessControlEntry`
(principal ``<type>:<name>``, ``User:*`` for everyone; host ``*`` or an IP;
operation; ALLOW or DENY). An :class:`AclBindingFilter` selects bindings
(DescribeAcls, DeleteAcls) with Kafka's ``AclBindingFilter.matches``.

Stored form (the single broker's ``acls.json`` and each ZooKeeper znode), Kafka's::

    {"version": 1, "acls": [{"principal": "User:alice", "permissionType": "Allow",
                             "operation": "Read", "host": "*"}]}

>>> b = AclBinding(ResourcePattern(ResourceType.TOPIC, "t", PatternType.LITERAL),
...                AccessControlEntry("User:alice", "*", AclOperation.READ, AclPermissionType.ALLOW))
>>> AclBindingFilter.ANY.matches(b), validate_binding(b)
(True, None)
>>> str(b)
'(Topic:LITERAL:t, User:alice from * Allow Read)'
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

CLUSTER_NAME = "kafka-cluster"  # the only name of the CLUSTER resource
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"


class ResourceType(enum.IntEnum):
    """Kafka's ``ResourceType`` codes."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7

    @property
    def title(self) -> str:
        """Kafka's name in ZooKeeper paths and strings: ``Topic``, ``TransactionalId``..."""
        return _TITLES[self]


class PatternType(enum.IntEnum):
    """Kafka's ``PatternType`` codes; MATCH and ANY only in filters."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    """Kafka's ``AclOperation`` codes (also the bit positions of ``authorized_operations``)."""

    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14

    @property
    def title(self) -> str:
        """Kafka's name in the stored JSON: ``Read``, ``ClusterAction``..."""
        return "".join(part.capitalize() for part in self.name.split("_"))


class AclPermissionType(enum.IntEnum):
    """Kafka's ``AclPermissionType`` codes."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3

    @property
    def title(self) -> str:
        return self.name.capitalize()


_TITLES = {
    ResourceType.UNKNOWN: "Unknown",
    ResourceType.ANY: "Any",
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}
RESOURCE_TYPE_BY_TITLE = {title.lower(): rt for rt, title in _TITLES.items()}
OPERATION_BY_TITLE = {op.title.lower(): op for op in AclOperation}
PERMISSION_BY_TITLE = {p.title.lower(): p for p in AclPermissionType}

# The operations each resource type supports (Kafka's AclEntry.supportedOperations): the bits
# an ``authorized_operations`` field can carry.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.TOPIC: (
        AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DESCRIBE,
        AclOperation.DELETE, AclOperation.ALTER, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.GROUP: (AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE),
    ResourceType.CLUSTER: (
        AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER, AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE),
    ResourceType.DELEGATION_TOKEN: (AclOperation.DESCRIBE,),
    ResourceType.USER: (AclOperation.CREATE_TOKENS, AclOperation.DESCRIBE_TOKENS),
}  # fmt: skip

# An ALLOW ACL on an operation of the value grants the key too (besides ALL), as in Kafka.
IMPLIED_BY: dict[AclOperation, frozenset[AclOperation]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}),
}


def bits(operations: Iterable[AclOperation]) -> int:
    """The ``authorized_operations`` bit field of ``operations`` (bit n = operation code n)."""
    field = 0
    for op in operations:
        field |= 1 << int(op)
    return field


@dataclass(frozen=True, slots=True)
class ResourcePattern:
    """A resource an ACL applies to: ``(type, name, LITERAL | PREFIXED)``."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return f"{self.resource_type.title}:{self.pattern_type.name}:{self.name}"


@dataclass(frozen=True, slots=True)
class AccessControlEntry:
    """Who (principal, host) may or may not (permission) do what (operation)."""

    principal: str
    host: str
    operation: AclOperation
    permission: AclPermissionType

    def __str__(self) -> str:
        return f"{self.principal} from {self.host} {self.permission.title} {self.operation.title}"

    def to_json(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "permissionType": self.permission.title,
            "operation": self.operation.title,
            "host": self.host,
        }

    @classmethod
    def from_json(cls, item: Mapping[str, Any]) -> AccessControlEntry:
        """One entry of a stored ``acls`` list; ValueError (with the field) on a bad one."""
        try:
            operation = OPERATION_BY_TITLE[str(item["operation"]).lower()]
            permission = PERMISSION_BY_TITLE[str(item["permissionType"]).lower()]
            return cls(str(item["principal"]), str(item["host"]), operation, permission)
        except KeyError as e:
            raise ValueError(f"bad ACL entry {dict(item)!r}: {e}") from None


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a pattern and an entry."""

    pattern: ResourcePattern
    entry: AccessControlEntry

    def __str__(self) -> str:
        return f"({self.pattern}, {self.entry})"


@dataclass(frozen=True, slots=True)
class AclBindingFilter:
    """Selects bindings, as Kafka's ``AclBindingFilter`` (``None`` name/principal/host: any).

    ``pattern_type`` MATCH selects the patterns that would apply to the resource
    ``name`` (the literal name, the wildcard ``*``, the prefixes of ``name``);
    ANY selects every pattern type with exactly ``name``.
    """

    resource_type: ResourceType
    name: str | None
    pattern_type: PatternType
    principal: str | None
    host: str | None
    operation: AclOperation
    permission: AclPermissionType

    ANY: ClassVar[AclBindingFilter]

    def is_unknown(self) -> bool:
        return (
            self.resource_type == ResourceType.UNKNOWN
            or self.pattern_type == PatternType.UNKNOWN
            or self.operation == AclOperation.UNKNOWN
            or self.permission == AclPermissionType.UNKNOWN
        )

    def matches(self, binding: AclBinding) -> bool:
        """Kafka's ``ResourcePatternFilter.matches`` and ``AccessControlEntryFilter.matches``."""
        pattern, entry = binding.pattern, binding.entry
        if self.resource_type != ResourceType.ANY and self.resource_type != pattern.resource_type:
            return False
        if (
            self.pattern_type not in (PatternType.ANY, PatternType.MATCH)
            and self.pattern_type != pattern.pattern_type
        ):
            return False
        if self.name is not None:
            if self.pattern_type in (PatternType.ANY, pattern.pattern_type):
                if self.name != pattern.name:
                    return False
            elif pattern.pattern_type == PatternType.LITERAL:
                if self.name != pattern.name and pattern.name != WILDCARD_RESOURCE:
                    return False
            elif pattern.pattern_type == PatternType.PREFIXED:
                if not self.name.startswith(pattern.name):
                    return False
            else:
                return False
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation != AclOperation.ANY and self.operation != entry.operation:
            return False
        return self.permission == AclPermissionType.ANY or self.permission == entry.permission


AclBindingFilter.ANY = AclBindingFilter(
    ResourceType.ANY, None, PatternType.ANY, None, None, AclOperation.ANY, AclPermissionType.ANY
)


def _enum(kind: type[enum.IntEnum], code: int) -> Any:
    try:
        return kind(code)
    except ValueError:
        return kind(0)  # UNKNOWN, as Kafka's fromCode


def binding_of(
    resource_type: int,
    name: str,
    pattern_type: int,
    principal: str,
    host: str,
    operation: int,
    permission: int,
) -> AclBinding:
    """A binding from wire codes; unknown codes become UNKNOWN (see :func:`validate_binding`)."""
    return AclBinding(
        ResourcePattern(_enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type)),
        AccessControlEntry(
            principal, host, _enum(AclOperation, operation), _enum(AclPermissionType, permission)
        ),
    )


def filter_of(
    resource_type: int,
    name: str | None,
    pattern_type: int,
    principal: str | None,
    host: str | None,
    operation: int,
    permission: int,
) -> AclBindingFilter:
    """A filter from wire codes; unknown codes become UNKNOWN (:meth:`AclBindingFilter.is_unknown`)."""
    return AclBindingFilter(
        _enum(ResourceType, resource_type), name, _enum(PatternType, pattern_type), principal, host,
        _enum(AclOperation, operation), _enum(AclPermissionType, permission),
    )  # fmt: skip


def validate_binding(binding: AclBinding) -> str | None:
    """Why a new ACL is refused (Kafka's ``AclControlManager.validateNewAcl`` and
    ``AclApis``: INVALID_REQUEST with this message), or None if it is valid."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type in (ResourceType.UNKNOWN, ResourceType.ANY):
        return f"Invalid resourceType {pattern.resource_type.name}"
    if pattern.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        return f"Invalid patternType {pattern.pattern_type.name}"
    if entry.operation in (AclOperation.UNKNOWN, AclOperation.ANY):
        return f"Invalid operation {entry.operation.name}"
    if entry.permission not in (AclPermissionType.ALLOW, AclPermissionType.DENY):
        return f"Invalid permissionType {entry.permission.name}"
    if not pattern.name:
        return "Invalid empty resource name"
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        return f"The only valid name for the CLUSTER resource is {CLUSTER_NAME}"
    principal_type, sep, _ = entry.principal.partition(":")
    if not sep or not principal_type:
        return (
            f"Could not parse principal from `{entry.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )
    if not entry.host:
        return "Invalid empty host (use * for every host)"
    return None


def encode_entries(entries: Iterable[AccessControlEntry]) -> bytes:
    """Kafka's stored JSON of one resource's ACLs (see the module doc), sorted for stable output."""
    items = sorted((e.to_json() for e in entries), key=lambda d: tuple(d.values()))
    return json.dumps({"version": 1, "acls": items}, separators=(",", ":")).encode()


def decode_entries(data: bytes | str) -> list[AccessControlEntry]:
    """The ACLs of one stored resource; ValueError on a malformed document."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ValueError(f"ACL document is not JSON: {e}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("acls"), list):
        raise ValueError("ACL document has no 'acls' list")
    return [AccessControlEntry.from_json(item) for item in doc["acls"]]


def group_by_pattern(bindings: Sequence[AclBinding]) -> dict[ResourcePattern, list[AccessControlEntry]]:
    """Bindings by resource pattern, in first-seen order (DescribeAcls's response shape)."""
    grouped: dict[ResourcePattern, list[AccessControlEntry]] = {}
    for binding in bindings:
        grouped.setdefault(binding.pattern, []).append(binding.entry)
    return grouped

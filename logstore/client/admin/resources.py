"""Kafka's resource types and ACL operations: the enums every area of the admin client shares.

:class:`ResourceType` names what ACLs and configs are about (a config resource is TOPIC,
GROUP or BROKER); :class:`AclOperation` is what an ACL allows, and what the
``authorized_operations`` of DescribeCluster, Metadata (per topic) and DescribeGroups list
(:func:`operations` reads Kafka's bit field, bit n for operation n). Both carry
confluent-kafka's names and values. The admin enums order by value (:class:`OrderedEnum`),
as confluent's do.

>>> sorted([ResourceType.BROKER, ResourceType.TOPIC])
[<ResourceType.TOPIC: 2>, <ResourceType.BROKER: 4>]
>>> operations((1 << AclOperation.READ.value) | (1 << AclOperation.WRITE.value))
[<AclOperation.READ: 3>, <AclOperation.WRITE: 4>]
"""

from __future__ import annotations

from enum import Enum

NO_OPERATIONS = -(2**31)  # Kafka's "authorized operations not asked for"


class OrderedEnum(Enum):
    """An enum whose members order by value (among members of the same enum)."""

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, type(self)):
            return NotImplemented
        return bool(self.value < other.value)


class ResourceType(OrderedEnum):
    """Kafka resource types, with confluent-kafka's values (a config resource is TOPIC, GROUP or BROKER)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5


RESOURCE_UNKNOWN = ResourceType.UNKNOWN.value
RESOURCE_ANY = ResourceType.ANY.value
RESOURCE_TOPIC = ResourceType.TOPIC.value
RESOURCE_GROUP = ResourceType.GROUP.value
RESOURCE_BROKER = ResourceType.BROKER.value
RESOURCE_TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID.value


class AclOperation(OrderedEnum):
    """Kafka's ACL operations: what ``authorized_operations`` lists."""

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


def operations(bits: int) -> list[AclOperation] | None:
    """The operations of Kafka's bit field (bit n = operation n); None when not asked for."""
    if bits == NO_OPERATIONS:
        return None
    return [op for op in AclOperation if op.value > 2 and bits & (1 << op.value)]

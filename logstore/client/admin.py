"""The admin client, shaped like ``confluent_kafka.admin``: topics, configs, groups, offsets, records.

:class:`AdminClient` has confluent-kafka's method names, arguments and result
shapes, and this module has the helper classes with confluent's names and
constructor signatures (:class:`NewTopic`, :class:`ConfigResource`,
:class:`OffsetSpec`, :class:`ConsumerGroupDescription`, ...), so that code
written against ``confluent_kafka.admin`` runs against this one with a change
of import. Where confluent's shape is odd (``alter_configs`` deprecated with a
warning, offsets listed for one group per call, ``list_topics`` synchronous
while everything else returns futures) it is kept.

Every asynchronous method checks its arguments in the caller's thread (a bad
type is TypeError, a bad value ValueError, before any request is sent) and
returns at once: a dict of :class:`concurrent.futures.Future`, one per
resource (topic, :class:`ConfigResource`, group id, :class:`TopicPartition`),
or one future. The requests run on the client's worker threads. A resource
the broker answers with an error code fails only that resource's future,
with ``KafkaException(KafkaError(code, broker's message))``; a request that
cannot be sent or answered fails the futures of every resource it carried.
Every future settles: a resource the broker left out of its answer fails
with ``_BAD_MSG``, and one still waiting when ``request_timeout`` (seconds,
default ``socket.timeout.ms``) runs out fails with ``_TIMED_OUT``.

Routing follows Kafka's ``KafkaAdminClient``: topic and config operations go
to the controller named by metadata (any broker when it names none), a
BROKER config resource to that broker, group operations to the group's
coordinator (FindCoordinator), ListOffsets and DeleteRecords to each
partition's leader, ListGroups to every broker (answers merged). An answer of
NOT_CONTROLLER, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a leader change,
or a dropped connection is retried once, for the resources it concerns,
after the metadata or coordinator is looked up again.

Beyond confluent: :meth:`AdminClient.delete_consumer_group_offsets`
(OffsetDelete, Java's ``deleteConsumerGroupOffsets``) and
:meth:`AdminClient.describe_log_dirs` (DescribeLogDirs). The admin client
never creates a topic by asking for its metadata.
"""

from __future__ import annotations

import concurrent.futures
import functools
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from enum import Enum, IntEnum
from typing import Any, ClassVar, TypeVar

from logstore.client.acls import AclBinding, AclBindingFilter, AclPermissionType, ResourcePatternType
from logstore.client.cluster import BrokerMeta, Cluster
from logstore.client.config import ClientConfig
from logstore.client.consumer_protocol import ConsumerProtocolError, decode_assignment
from logstore.client.errors import KafkaError, KafkaException, from_code, local
from logstore.client.types import OFFSET_INVALID, TopicPartition

# API keys.
LIST_OFFSETS = 2
METADATA = 3
OFFSET_COMMIT = 8
OFFSET_FETCH = 9
DESCRIBE_GROUPS = 15
LIST_GROUPS = 16
CREATE_TOPICS = 19
DELETE_TOPICS = 20
DELETE_RECORDS = 21
DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
DESCRIBE_LOG_DIRS = 35
CREATE_PARTITIONS = 37
DELETE_GROUPS = 42
ELECT_LEADERS = 43
INCREMENTAL_ALTER_CONFIGS = 44
ALTER_PARTITION_REASSIGNMENTS = 45
LIST_PARTITION_REASSIGNMENTS = 46
OFFSET_DELETE = 47
DESCRIBE_CLIENT_QUOTAS = 48
ALTER_CLIENT_QUOTAS = 49
DESCRIBE_CLUSTER = 60
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31

# Kafka's error codes this module acts on.
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
NOT_CONTROLLER = 41
FENCED_LEADER_EPOCH = 74
UNKNOWN_LEADER_EPOCH = 75
_TRANSPORT = -195

_CONTROLLER_RETRY = frozenset({NOT_CONTROLLER, _TRANSPORT})
_COORDINATOR_RETRY = frozenset(
    {NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS, _TRANSPORT}
)
_LEADER_RETRY = frozenset({UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER,
                           FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH, _TRANSPORT})  # fmt: skip
_ANY_RETRY = frozenset({_TRANSPORT})

WORKERS = 4
"""Worker threads per client: each runs one admin call at a time (its lookups, requests and retry)."""

_ZERO_UUID = uuid.UUID(int=0)
_NO_OPERATIONS = -(2**31)  # Kafka's "authorized operations not asked for"

K = TypeVar("K", bound=Hashable)


# -- enums ---------------------------------------------------------------------------------------


class ResourceType(Enum):
    """Kafka resource types, with confluent-kafka's values (a config resource is TOPIC, GROUP or BROKER)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    BROKER = 4
    TRANSACTIONAL_ID = 5

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ResourceType):
            return NotImplemented
        return self.value < other.value


RESOURCE_UNKNOWN = ResourceType.UNKNOWN.value
RESOURCE_ANY = ResourceType.ANY.value
RESOURCE_TOPIC = ResourceType.TOPIC.value
RESOURCE_GROUP = ResourceType.GROUP.value
RESOURCE_BROKER = ResourceType.BROKER.value
RESOURCE_TRANSACTIONAL_ID = ResourceType.TRANSACTIONAL_ID.value

# ResourceType -> Kafka's ConfigResource.Type on the wire (GROUP is 32 there, KIP-848).
_CONFIG_WIRE_TYPE = {ResourceType.TOPIC: 2, ResourceType.BROKER: 4, ResourceType.GROUP: 32}
_CONFIG_TYPE_OF_WIRE = {wire: restype for restype, wire in _CONFIG_WIRE_TYPE.items()}


class ConfigSource(IntEnum):
    """Where a described config value comes from (DescribeConfigs' ``config_source``).

    An IntEnum: confluent-kafka's described entries carry the bare int, so both
    ``source == CONFIG_SOURCE_DEFAULT_CONFIG`` and ``source is ConfigSource.DEFAULT_CONFIG`` hold here.
    """

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


CONFIG_SOURCE_UNKNOWN_CONFIG = ConfigSource.UNKNOWN_CONFIG.value
CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG = ConfigSource.DYNAMIC_BROKER_CONFIG.value
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
CONFIG_SOURCE_STATIC_BROKER_CONFIG = ConfigSource.STATIC_BROKER_CONFIG.value
CONFIG_SOURCE_DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG.value
CONFIG_SOURCE_GROUP_CONFIG = ConfigSource.GROUP_CONFIG.value


class AlterConfigOpType(Enum):
    """The operation of one entry of ``incremental_alter_configs`` (IncrementalAlterConfigs' op codes)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConsumerGroupState(Enum):
    """A classic group's state, as DescribeGroups and ListGroups name it."""

    UNKNOWN = 0
    UNKOWN = 0  # confluent's deprecated misspelling: an alias of UNKNOWN
    PREPARING_REBALANCING = 1
    COMPLETING_REBALANCING = 2
    STABLE = 3
    DEAD = 4
    EMPTY = 5

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConsumerGroupState):
            return NotImplemented
        return self.value < other.value


_STATE_NAMES = {
    ConsumerGroupState.UNKNOWN: "Unknown",
    ConsumerGroupState.PREPARING_REBALANCING: "PreparingRebalance",
    ConsumerGroupState.COMPLETING_REBALANCING: "CompletingRebalance",
    ConsumerGroupState.STABLE: "Stable",
    ConsumerGroupState.DEAD: "Dead",
    ConsumerGroupState.EMPTY: "Empty",
}
_STATE_OF_NAME = {name.lower(): state for state, name in _STATE_NAMES.items()}


class ConsumerGroupType(Enum):
    """A group's protocol: CLASSIC (JoinGroup/SyncGroup) or CONSUMER (KIP-848)."""

    UNKNOWN = 0
    CONSUMER = 1
    CLASSIC = 2

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConsumerGroupType):
            return NotImplemented
        return self.value < other.value


_TYPE_OF_NAME = {"consumer": ConsumerGroupType.CONSUMER, "classic": ConsumerGroupType.CLASSIC}


class IsolationLevel(Enum):
    """What ``list_offsets`` sees of transactions: every record, or only committed ones."""

    READ_UNCOMMITTED = 0
    READ_COMMITTED = 1

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, IsolationLevel):
            return NotImplemented
        return self.value < other.value


class AclOperation(Enum):
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

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, AclOperation):
            return NotImplemented
        return self.value < other.value


def _operations(bits: int) -> list[AclOperation] | None:
    """The operations of Kafka's bit field (bit n = operation n); None when not asked for."""
    if bits == _NO_OPERATIONS:
        return None
    return [op for op in AclOperation if op.value > 2 and bits & (1 << op.value)]


# -- requests ------------------------------------------------------------------------------------


class NewTopic:
    """A topic to create: a partition count and replication factor, or an explicit replica assignment.

    -1 leaves the count or factor to the broker's defaults (or to ``replica_assignment``,
    a list per partition of broker ids). ``config`` is a dict of topic configs (str: str).
    """

    def __init__(
        self,
        topic: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        replica_assignment: list[list[int]] | None = None,
        config: dict[str, str] | None = None,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"NewTopic: argument 1 (topic) must be str, not {type(topic).__name__}")
        self.topic = topic
        self.num_partitions = _int("num_partitions", num_partitions)
        self.replication_factor = _int("replication_factor", replication_factor)
        self.replica_assignment = replica_assignment
        self.config = config

    def __repr__(self) -> str:
        if self.num_partitions == -1:
            return f"NewTopic(topic={self.topic})"
        return f"NewTopic(topic={self.topic},num_partitions={self.num_partitions})"

    __str__ = __repr__


class NewPartitions:
    """A topic's new total partition count, and optionally the replicas of each added partition."""

    def __init__(
        self, topic: str, new_total_count: int, replica_assignment: list[list[int]] | None = None
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"NewPartitions: argument 1 (topic) must be str, not {type(topic).__name__}")
        self.topic = topic
        self.new_total_count = _int("new_total_count", new_total_count)
        self.replica_assignment = replica_assignment

    def __repr__(self) -> str:
        return f"NewPartitions(topic={self.topic},new_total_count={self.new_total_count})"

    __str__ = __repr__


class ConfigEntry:
    """One config property: described by ``describe_configs``, or an operation for ``incremental_alter_configs``.

    ``synonyms`` maps each synonym's name to its ConfigEntry (``is_synonym`` True), highest
    precedence first, as DescribeConfigs lists them (the entry's own source among them).
    """

    def __init__(
        self,
        name: str,
        value: str | None,
        source: ConfigSource = ConfigSource.UNKNOWN_CONFIG,
        is_read_only: bool = False,
        is_default: bool = False,
        is_sensitive: bool = False,
        is_synonym: bool = False,
        synonyms: dict[str, ConfigEntry] | None = None,
        incremental_operation: AlterConfigOpType | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.is_read_only = bool(is_read_only)
        self.is_default = bool(is_default)
        self.is_sensitive = bool(is_sensitive)
        self.is_synonym = bool(is_synonym)
        self.synonyms = {} if synonyms is None else synonyms
        self.incremental_operation = incremental_operation

    def __repr__(self) -> str:
        return f'ConfigEntry({self.name}="{self.value}")'

    def __str__(self) -> str:
        return f'{self.name}="{self.value}"'


@functools.total_ordering
class ConfigResource:
    """A resource with configs (TOPIC by name, BROKER by id as a string, GROUP), and what to set on it.

    ``set_config`` (dict str: str) is what ``alter_configs`` writes (every other key reverts
    to its default); ``incremental_configs`` (ConfigEntry with ``incremental_operation``) is
    what ``incremental_alter_configs`` applies. Equal and hashed by (type, name).
    """

    Type = ResourceType

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str,
        set_config: dict[str, str] | None = None,
        described_configs: dict[str, ConfigEntry] | None = None,
        error: KafkaError | None = None,
        incremental_configs: list[ConfigEntry] | None = None,
    ) -> None:
        if name is None:
            raise ValueError("Expected resource name to be a string")
        if isinstance(restype, str):
            try:
                restype = ResourceType[restype.upper()]
            except KeyError:
                raise ValueError(
                    f'Unknown resource type "{restype}": should be a ConfigResource.Type'
                ) from None
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        self.restype = restype
        self.restype_int = int(restype.value)
        self.name = name
        self.set_config_dict = dict(set_config) if set_config is not None else {}
        self.incremental_configs = list(incremental_configs or [])
        self.configs = described_configs
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ConfigResource({self.restype},{self.name},{self.error!r})"
        return f"ConfigResource({self.restype},{self.name})"

    def __hash__(self) -> int:
        return hash((self.restype, self.name))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        if self.restype != other.restype:
            return self.restype < other.restype
        return self.name < other.name

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return self.restype == other.restype and self.name == other.name

    def __len__(self) -> int:
        return len(self.set_config_dict)

    def set_config(self, name: str, value: str, overwrite: bool = True) -> None:
        """Set ``name`` for ``alter_configs`` (kept as it is when ``overwrite`` is False and it is set)."""
        if not overwrite and name in self.set_config_dict:
            return
        self.set_config_dict[name] = value

    def add_incremental_config(self, config_entry: ConfigEntry) -> None:
        """Add an entry (with its ``incremental_operation``) for ``incremental_alter_configs``."""
        self.incremental_configs.append(config_entry)


class ConsumerGroupTopicPartitions:
    """A group and partitions of it: the request and the result of the group offset operations."""

    def __init__(self, group_id: str, topic_partitions: list[TopicPartition] | None = None) -> None:
        self.group_id = group_id
        self.topic_partitions = topic_partitions

    def __repr__(self) -> str:
        return f"ConsumerGroupTopicPartitions({self.group_id!r}, {self.topic_partitions!r})"


class TopicCollection:
    """Topics named for ``describe_topics``."""

    def __init__(self, topic_names: list[str]) -> None:
        self.topic_names = topic_names


class OffsetSpec:
    """Which offset ``list_offsets`` asks for: ``earliest()``, ``latest()``, ``max_timestamp()``,
    or ``for_timestamp(ms)`` (the first offset whose timestamp is at or after ``ms``).

    As in confluent-kafka, ``OffsetSpec(n)`` is one of those: -2 earliest, -1 latest,
    -3 max timestamp, n >= 0 a timestamp.
    """

    _values: ClassVar[dict[int, OffsetSpec]] = {}

    def __new__(cls, index: int) -> OffsetSpec:
        if index < 0:
            try:
                return cls._values[index]
            except KeyError:
                raise ValueError(
                    f"OffsetSpec({index}): -1 latest, -2 earliest, -3 max timestamp, or >= 0"
                ) from None
        return TimestampSpec(index)

    @property
    def _value(self) -> int:
        raise NotImplementedError

    @classmethod
    def earliest(cls) -> OffsetSpec:
        return cls._values[-2]

    @classmethod
    def latest(cls) -> OffsetSpec:
        return cls._values[-1]

    @classmethod
    def max_timestamp(cls) -> OffsetSpec:
        return cls._values[-3]

    @classmethod
    def for_timestamp(cls, timestamp: int) -> OffsetSpec:
        return TimestampSpec(timestamp)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, OffsetSpec):
            return NotImplemented
        return self._value < other._value

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._value})"


class TimestampSpec(OffsetSpec):
    """The first offset whose record timestamp is at or after ``timestamp`` (ms)."""

    def __new__(cls, timestamp: int) -> TimestampSpec:
        return object.__new__(cls)

    def __init__(self, timestamp: int) -> None:
        self.timestamp = timestamp

    @property
    def _value(self) -> int:
        return self.timestamp


class _LogicalSpec(OffsetSpec):
    """A spec Kafka names by a negative timestamp (``code``): one instance of each."""

    code: ClassVar[int]

    def __new__(cls) -> _LogicalSpec:
        return object.__new__(cls)

    @property
    def _value(self) -> int:
        return self.code


class MaxTimestampSpec(_LogicalSpec):
    """The offset of the record with the largest timestamp (ListOffsets v7+)."""

    code = -3


class LatestSpec(_LogicalSpec):
    """The log end offset (the offset the next record will get)."""

    code = -1


class EarliestSpec(_LogicalSpec):
    """The log start offset."""

    code = -2


OffsetSpec._values.update({spec.code: spec() for spec in (MaxTimestampSpec, EarliestSpec, LatestSpec)})


# -- results -------------------------------------------------------------------------------------


class Node:
    """A broker: id, host, port, rack."""

    def __init__(self, id: int, host: str, port: int, rack: str | None = None) -> None:
        self.id = id
        self.id_string = str(id)
        self.host = host
        self.port = port
        self.rack = rack

    def __str__(self) -> str:
        rack = f"(Rack - {self.rack})" if self.rack else ""
        return f"({self.id}) {self.host}:{self.port} {rack}"

    def __repr__(self) -> str:
        return f"Node({self.id}, {self.host!r}, {self.port}, {self.rack!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Node):
            return NotImplemented
        return (self.id, self.host, self.port, self.rack) == (other.id, other.host, other.port, other.rack)

    def __hash__(self) -> int:
        return hash((self.id, self.host, self.port))


class ClusterMetadata:
    """What ``list_topics`` returns: brokers, topics, the controller, and which broker answered."""

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None

    def __repr__(self) -> str:
        return f"ClusterMetadata({self.cluster_id})"

    def __str__(self) -> str:
        return str(self.cluster_id)


class BrokerMetadata:
    """One broker of :class:`ClusterMetadata`."""

    def __init__(self) -> None:
        self.id = -1
        self.host: str | None = None
        self.port = -1

    def __repr__(self) -> str:
        return f"BrokerMetadata({self.id}, {self.host}:{self.port})"

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class TopicMetadata:
    """One topic of :class:`ClusterMetadata`: its partitions, or its error."""

    def __init__(self) -> None:
        self.topic: str | None = None
        self.partitions: dict[int, PartitionMetadata] = {}
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions, {self.error})"
        return f"TopicMetadata({self.topic}, {len(self.partitions)} partitions)"

    def __str__(self) -> str:
        return str(self.topic)


class PartitionMetadata:
    """One partition of :class:`TopicMetadata`: leader, replicas, in-sync replicas."""

    def __init__(self) -> None:
        self.id = -1
        self.leader = -1
        self.replicas: list[int] = []
        self.isrs: list[int] = []
        self.error: KafkaError | None = None

    def __repr__(self) -> str:
        if self.error is not None:
            return f"PartitionMetadata({self.id}, {self.error})"
        return f"PartitionMetadata({self.id})"

    def __str__(self) -> str:
        return str(self.id)


class ElectionType(IntEnum):
    """ElectLeaders' election types (confluent-kafka's ``ElectionType``)."""

    PREFERRED = 0  #: the first assigned replica, if it is alive and in sync
    UNCLEAN = 1  #: any live replica, for a partition with no leader (may lose acknowledged records)


class PartitionReassignment:
    """A reassignment in progress (Java's ``PartitionReassignment``): the partition's replicas (the
    target first, then the original replicas not in it), those being added and those being removed."""

    def __init__(self, replicas: list[int], adding_replicas: list[int], removing_replicas: list[int]) -> None:
        self.replicas = replicas
        self.adding_replicas = adding_replicas
        self.removing_replicas = removing_replicas

    def __repr__(self) -> str:
        return (
            f"PartitionReassignment(replicas={self.replicas}, adding_replicas={self.adding_replicas}, "
            f"removing_replicas={self.removing_replicas})"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PartitionReassignment) and (
            self.replicas,
            self.adding_replicas,
            self.removing_replicas,
        ) == (other.replicas, other.adding_replicas, other.removing_replicas)


class DescribeClusterResult:
    """What ``describe_cluster`` returns: the controller and every broker as :class:`Node`."""

    def __init__(
        self,
        controller: Node | None,
        nodes: list[Node],
        cluster_id: str | None = None,
        authorized_operations: list[AclOperation] | None = None,
    ) -> None:
        self.cluster_id = cluster_id
        self.controller = controller
        self.nodes = nodes
        self.authorized_operations = authorized_operations or None


class TopicPartitionInfo:
    """One partition of :class:`TopicDescription`."""

    def __init__(self, id: int, leader: Node | None, replicas: list[Node], isr: list[Node]) -> None:
        self.id = id
        self.leader = leader
        self.replicas = replicas
        self.isr = isr


class TopicDescription:
    """What ``describe_topics`` returns for a topic."""

    def __init__(
        self,
        name: str,
        topic_id: uuid.UUID | None,
        is_internal: bool,
        partitions: list[TopicPartitionInfo],
        authorized_operations: list[AclOperation] | None = None,
    ) -> None:
        self.name = name
        self.topic_id = topic_id
        self.is_internal = is_internal
        self.partitions = partitions
        self.authorized_operations = authorized_operations or None


class ConsumerGroupListing:
    """One group of ``list_consumer_groups``: simple means it has no protocol type (offsets only)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        state: ConsumerGroupState | None = None,
        type: ConsumerGroupType | None = None,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.state = state
        self.type = type

    def __repr__(self) -> str:
        return f"ConsumerGroupListing({self.group_id!r}, {self.state}, {self.type})"


class ListConsumerGroupsResult:
    """``valid``: the groups every broker listed; ``errors``: a KafkaException per broker that failed."""

    def __init__(
        self, valid: list[ConsumerGroupListing] | None = None, errors: list[KafkaException] | None = None
    ) -> None:
        self.valid = valid
        self.errors = errors


class MemberAssignment:
    """The partitions assigned to a member."""

    def __init__(self, topic_partitions: list[TopicPartition] | None) -> None:
        self.topic_partitions = topic_partitions or []


class MemberDescription:
    """One member of a described group."""

    def __init__(
        self,
        member_id: str,
        client_id: str,
        host: str,
        assignment: MemberAssignment,
        group_instance_id: str | None = None,
        target_assignment: MemberAssignment | None = None,
    ) -> None:
        self.member_id = member_id
        self.client_id = client_id
        self.host = host
        self.assignment = assignment
        self.target_assignment = target_assignment
        self.group_instance_id = group_instance_id

    def __repr__(self) -> str:
        return f"MemberDescription({self.member_id!r}, {self.client_id!r}, {self.host!r})"


class ConsumerGroupDescription:
    """What ``describe_consumer_groups`` returns for a group (an unknown group is DEAD with no members)."""

    def __init__(
        self,
        group_id: str,
        is_simple_consumer_group: bool,
        members: list[MemberDescription],
        partition_assignor: str,
        state: ConsumerGroupState | None,
        coordinator: Node | None,
        authorized_operations: list[AclOperation] | None = None,
        type: ConsumerGroupType = ConsumerGroupType.UNKNOWN,
    ) -> None:
        self.group_id = group_id
        self.is_simple_consumer_group = is_simple_consumer_group
        self.members = members
        self.authorized_operations = authorized_operations or None
        self.partition_assignor = partition_assignor
        self.state = state
        self.type = type
        self.coordinator = coordinator

    def __repr__(self) -> str:
        return f"ConsumerGroupDescription({self.group_id!r}, {self.state}, {len(self.members)} members)"


class ListOffsetsResultInfo:
    """One partition's ``list_offsets`` answer; ``leader_epoch`` None when unknown."""

    def __init__(self, offset: int, timestamp: int, leader_epoch: int) -> None:
        self.offset = offset
        self.timestamp = timestamp
        self.leader_epoch: int | None = leader_epoch if leader_epoch >= 0 else None

    def __repr__(self) -> str:
        return f"ListOffsetsResultInfo(offset={self.offset}, timestamp={self.timestamp})"


class DeletedRecords:
    """One partition's ``delete_records`` answer: its new log start offset."""

    def __init__(self, low_watermark: int) -> None:
        self.low_watermark = low_watermark

    def __repr__(self) -> str:
        return f"DeletedRecords(low_watermark={self.low_watermark})"


# -- argument checks -----------------------------------------------------------------------------


def _int(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")
    return value


def _seconds(name: str, value: Any, default: float) -> float:
    """A timeout argument in seconds (None: ``default``); TypeError/ValueError when it is not one."""
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a number of seconds, not {type(value).__name__}")
    if value < 0 or value > 3600:
        raise ValueError(f"{name}={value!r} is out of range [0, 3600] seconds")
    return float(value)


def _bool(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"Expected {name} to be bool type, not {type(value).__name__}")
    return value


def _nonempty_list(what: str, value: Any, kind: type | tuple[type, ...], kind_name: str) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"Expected {what} to be a list of {kind_name}, not {type(value).__name__}")
    if not value:
        raise ValueError(f"Expected non-empty list of {kind_name}")
    for item in value:
        if not isinstance(item, kind):
            raise TypeError(f"Expected list of {kind_name}, found {type(item).__name__} {item!r}")
    return value


def _no_duplicates(what: str, keys: Iterable[Hashable]) -> None:
    seen: set[Hashable] = set()
    for key in keys:
        if key in seen:
            raise ValueError(f"duplicate {what} {key!r} in one request")
        seen.add(key)


def _config_text(owner: str, name: Any, value: Any) -> str:
    if not isinstance(name, str):
        raise TypeError(f"{owner}: config names are strings, not {name!r}")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, int, float)):
        return str(value)
    raise TypeError(f"{owner}: config {name!r} must be a string, not {type(value).__name__}")


def _assignment(owner: str, assignment: Any) -> list[list[int]]:
    if not isinstance(assignment, list) or not all(isinstance(replicas, list) for replicas in assignment):
        raise TypeError(f"{owner}: replica_assignment is a list (one per partition) of lists of broker ids")
    for replicas in assignment:
        if not replicas:
            raise ValueError(f"{owner}: replica_assignment has a partition with no replicas")
        for broker in replicas:
            _int(f"{owner}: replica_assignment broker id", broker)
    return assignment


def _check_group_partitions(request: Any, what: str, offsets: str) -> ConsumerGroupTopicPartitions:
    """The one ConsumerGroupTopicPartitions of a group offsets request (confluent's checks and messages).

    ``offsets``: "none" (offsets must be unset), "set" (offsets >= 0 required), "any".
    """
    if request is None:
        raise TypeError("request cannot be None")
    if not isinstance(request, list):
        raise TypeError("request must be a list")
    if len(request) != 1:
        raise ValueError(f"Currently we support {what} for a single consumer group only")
    req = request[0]
    if not isinstance(req, ConsumerGroupTopicPartitions):
        raise TypeError("Expected list of 'ConsumerGroupTopicPartitions'")
    if req.group_id is None:
        raise TypeError("'group_id' cannot be None")
    if not isinstance(req.group_id, str):
        raise TypeError("'group_id' must be a string")
    if not req.group_id:
        raise ValueError("'group_id' cannot be empty")
    if req.topic_partitions is None:
        if offsets == "none":
            return req
        raise ValueError("'topic_partitions' cannot be null")
    if not isinstance(req.topic_partitions, list):
        raise TypeError("'topic_partitions' must be a list or None")
    if not req.topic_partitions:
        raise ValueError("'topic_partitions' cannot be empty")
    for tp in req.topic_partitions:
        if tp is None:
            raise ValueError("Element of 'topic_partitions' cannot be None")
        if not isinstance(tp, TopicPartition):
            raise TypeError("Element of 'topic_partitions' must be of type TopicPartition")
        if tp.topic is None:
            raise TypeError("Element of 'topic_partitions' must not have 'topic' attribute as None")
        if not tp.topic:
            raise ValueError("Element of 'topic_partitions' must not have 'topic' attribute as Empty")
        if tp.partition < 0:
            raise ValueError("Element of 'topic_partitions' must not have negative 'partition' value")
        if offsets == "none" and tp.offset != OFFSET_INVALID:
            raise ValueError("Element of 'topic_partitions' must not have 'offset' value")
        if offsets == "set" and tp.offset < 0:
            raise ValueError("Element of 'topic_partitions' must not have negative value for 'offset' field")
    _no_duplicates("partition", ((tp.topic, tp.partition) for tp in req.topic_partitions))
    return req


def _by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[TopicPartition]]:
    out: dict[str, list[TopicPartition]] = {}
    for tp in partitions:
        out.setdefault(tp.topic, []).append(tp)
    return out


# -- futures -------------------------------------------------------------------------------------


def _future() -> Future[Any]:
    """A future already running, as confluent's: the application cannot cancel it."""
    future: Future[Any] = Future()
    future.set_running_or_notify_cancel()
    return future


def _error(code: int, message: str | None) -> KafkaError:
    return KafkaError(int(code), message or None)


def _settle(futures: Mapping[Any, Future[Any]], outcomes: Mapping[Any, Any]) -> None:
    """Settle each future with its outcome: a KafkaError fails it, anything else is its result."""
    for key, future in futures.items():
        if future.done():
            continue
        if key not in outcomes:
            future.set_exception(KafkaException(local("_BAD_MSG", f"the broker's answer left out {key!r}")))
            continue
        outcome = outcomes[key]
        if isinstance(outcome, KafkaError):
            future.set_exception(KafkaException(outcome))
        else:
            future.set_result(outcome)


class AdminClient:
    """Kafka's admin operations over :class:`~logstore.client.cluster.Cluster` (see the module docstring).

    Invariants: every future a method returns settles (a result, a KafkaError from the
    broker, ``_TIMED_OUT`` at its ``request_timeout``, ``_DESTROY`` at :meth:`close`);
    arguments are checked before any request; a call's requests run on one worker thread
    (at most :data:`WORKERS` calls run at once, later ones queue).
    """

    def __init__(self, conf: dict[str, Any], **kwargs: Any) -> None:
        self._config = ClientConfig.parse(conf, "admin", **kwargs)
        self._cluster = Cluster(self._config)
        self._default_timeout = self._config.seconds("socket.timeout.ms")
        self._executor = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="logstore-admin")
        self._lock = threading.Lock()
        self._closed = False

    # -- lifecycle -----------------------------------------------------------

    def close(self) -> None:
        """Close connections; calls not yet started fail with ``_DESTROY``, running ones fail or finish."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._executor.shutdown(wait=False, cancel_futures=True)
        self._cluster.close()

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def poll(self, timeout: float = -1) -> int:
        """Serve callbacks: there are none here (futures settle on their own); returns 0."""
        return 0

    def __len__(self) -> int:
        return 0

    def _submit(self, futures: Iterable[Future[Any]], work: Callable[[], None]) -> None:
        """Run ``work`` on a worker; any future it leaves unsettled fails (with its exception, if it raised)."""
        owned = list(futures)

        def run() -> None:
            try:
                work()
            except BaseException as e:
                failure = e
            else:
                failure = KafkaException(local("_FAIL", "internal error: the admin call settled no result"))
            for future in owned:
                if not future.done():
                    future.set_exception(failure)

        def cancelled(job: Future[None]) -> None:
            if job.cancelled():
                for future in owned:
                    if not future.done():
                        future.set_exception(KafkaException(local("_DESTROY", "the admin client was closed")))

        with self._lock:
            if self._closed:
                raise RuntimeError("AdminClient has been closed")
            self._executor.submit(run).add_done_callback(cancelled)

    # -- requests ------------------------------------------------------------

    def _wait(self, future: Future[Any], deadline: float, what: str) -> Any:
        remaining = deadline - time.monotonic()
        try:
            return future.result(max(remaining, 0.0))
        except concurrent.futures.TimeoutError:
            raise KafkaException(local("_TIMED_OUT", f"{what}: no answer within request_timeout")) from None

    def _ensure_metadata(self, refresh: bool = False) -> None:
        if refresh or self._cluster.updated == 0 or self._cluster.stale():
            self._cluster.refresh([], auto_create=False)

    def _controller(self) -> int | None:
        """The controller metadata names, or None (any broker) when it names none we know."""
        controller = self._cluster.controller_id
        return controller if controller in self._cluster.brokers else None

    def _node(self, node_id: int) -> Node:
        broker = self._cluster.brokers.get(node_id)
        if broker is None:
            return Node(node_id, "", -1)
        return _node_of(broker)

    def _routed(
        self,
        api_key: int,
        items: Sequence[K],
        route: Callable[[K], int | KafkaError | None],
        build: Callable[[list[K]], dict[str, Any]],
        parse: Callable[[Any, list[K]], Mapping[K, Any]],
        retry_codes: frozenset[int],
        before_retry: Callable[[list[K]], None],
        deadline: float,
    ) -> dict[K, Any]:
        """Send ``items`` batched by the node ``route`` gives each; the outcome of each item.

        An item whose outcome (route error, request failure, or parsed KafkaError) has a
        code in ``retry_codes`` is sent once more, after ``before_retry`` (a metadata or
        coordinator lookup). Outcomes are results or KafkaErrors; each item gets one.
        Cost: one request per distinct node per attempt.
        """
        outcomes: dict[K, Any] = {}
        pending = list(items)
        for attempt in range(2):
            answers: list[tuple[K, Any]] = []
            batches: dict[int | None, list[K]] = {}
            for item in pending:
                try:
                    node = route(item)
                except KafkaException as e:
                    node = e.error
                if isinstance(node, KafkaError):
                    answers.append((item, node))
                else:
                    batches.setdefault(node, []).append(item)
            sent = [
                (batch, self._cluster.send(node, api_key, build(batch))) for node, batch in batches.items()
            ]
            for batch, future in sent:
                try:
                    parsed = parse(self._wait(future, deadline, f"API {api_key}"), batch)
                except KafkaException as e:
                    answers.extend((item, e.error) for item in batch)
                    continue
                missing = local("_BAD_MSG", f"API {api_key}: the broker's answer left out a resource")
                answers.extend((item, parsed.get(item, missing)) for item in batch)
            retry = []
            for item, outcome in answers:
                if attempt == 0 and isinstance(outcome, KafkaError) and outcome.code() in retry_codes:
                    retry.append(item)
                else:
                    outcomes[item] = outcome
            if not retry:
                break
            before_retry(retry)
            pending = retry
        assert len(outcomes) == len(set(items)), "every item has one outcome"
        return outcomes

    def _to_controller(
        self,
        api_key: int,
        items: Sequence[K],
        build: Callable[[list[K]], dict[str, Any]],
        parse: Callable[[Any, list[K]], Mapping[K, Any]],
        deadline: float,
        route: Callable[[K], int | KafkaError | None] | None = None,
    ) -> dict[K, Any]:
        self._ensure_metadata()
        return self._routed(api_key, items, route or (lambda _: self._controller()), build, parse,
                            _CONTROLLER_RETRY, lambda _: self._ensure_metadata(refresh=True), deadline)  # fmt: skip

    def _to_coordinators(
        self,
        api_key: int,
        groups: Sequence[str],
        build: Callable[[list[str]], dict[str, Any]],
        parse: Callable[[Any, list[str]], Mapping[str, Any]],
        deadline: float,
    ) -> dict[str, Any]:
        def forget(retry: list[str]) -> None:
            for group in retry:
                self._cluster.forget_coordinator(group)
            time.sleep(self._config.seconds("retry.backoff.ms"))

        return self._routed(api_key, groups, self._cluster.coordinator, build, parse, _COORDINATOR_RETRY,
                            forget, deadline)  # fmt: skip

    def _to_leaders(
        self,
        api_key: int,
        partitions: Sequence[tuple[str, int]],
        build: Callable[[list[tuple[str, int]]], dict[str, Any]],
        parse: Callable[[Any, list[tuple[str, int]]], Mapping[tuple[str, int], Any]],
        deadline: float,
    ) -> dict[tuple[str, int], Any]:
        def refresh(which: list[tuple[str, int]]) -> None:
            self._cluster.refresh({topic for topic, _ in which}, auto_create=False)

        def leader(tp: tuple[str, int]) -> int | KafkaError:
            topic = self._cluster.topics.get(tp[0])
            if topic is None or topic.error:
                code = topic.error if topic is not None else UNKNOWN_TOPIC_OR_PARTITION
                return from_code(code, f"topic {tp[0]!r}")
            partition = topic.partitions.get(tp[1])
            if partition is None:
                return _error(UNKNOWN_TOPIC_OR_PARTITION, f"topic {tp[0]!r} has no partition {tp[1]}")
            if partition.leader < 0:
                return _error(LEADER_NOT_AVAILABLE, f"{tp[0]} [{tp[1]}] has no leader")
            return partition.leader

        refresh(list(partitions))
        return self._routed(api_key, partitions, leader, build, parse, _LEADER_RETRY, refresh, deadline)

    # -- topics --------------------------------------------------------------

    def create_topics(
        self,
        new_topics: list[NewTopic],
        *,
        operation_timeout: float = 0,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, Future[None]]:
        """Create topics (CreateTopics); ``{topic: Future[None]}``.

        ``operation_timeout`` (seconds) is how long the controller may wait for the topics to
        be created everywhere (0: answer at once); ``validate_only`` checks without creating.
        """
        _nonempty_list("new_topics", new_topics, NewTopic, "NewTopic objects")
        _no_duplicates("topic", (t.topic for t in new_topics))
        timeout_ms = int(_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        _bool("validate_only", validate_only)
        specs = {t.topic: self._topic_spec(t) for t in new_topics}
        futures = {t.topic: _future() for t in new_topics}

        def build(names: list[str]) -> dict[str, Any]:
            return {
                "topics": [specs[n] for n in names],
                "timeout": timeout_ms,
                "validate_only": validate_only,
            }

        def work() -> None:
            outcomes = self._to_controller(
                CREATE_TOPICS, list(specs), build, _topic_results("topics"), deadline
            )
            _settle(futures, outcomes)

        self._submit(futures.values(), work)
        return futures

    @staticmethod
    def _topic_spec(topic: NewTopic) -> dict[str, Any]:
        owner = f"NewTopic({topic.topic!r})"
        if not topic.topic:
            raise ValueError(f"{owner}: the topic name is empty")
        if topic.config is not None and not isinstance(topic.config, dict):
            raise TypeError(f"{owner}: config must be a dict of str: str")
        configs = [
            {"name": name, "value": _config_text(owner, name, value)}
            for name, value in (topic.config or {}).items()
        ]
        assignments = []
        partitions, factor = topic.num_partitions, topic.replication_factor
        if topic.replica_assignment is not None:
            assignment = _assignment(owner, topic.replica_assignment)
            if factor != -1:
                raise ValueError(f"{owner}: replication_factor must be -1 when replica_assignment is set")
            if partitions not in (-1, len(assignment)):
                raise ValueError(
                    f"{owner}: num_partitions={partitions} but replica_assignment has {len(assignment)} partitions"
                )
            assignments = [{"partition_index": i, "broker_ids": list(r)} for i, r in enumerate(assignment)]
            partitions = -1
        else:
            if partitions == 0 or partitions < -1:
                raise ValueError(f"{owner}: num_partitions must be >= 1 (or -1 for the broker's default)")
            if factor == 0 or factor < -1:
                raise ValueError(f"{owner}: replication_factor must be >= 1 (or -1 for the broker's default)")
        return {"name": topic.topic, "num_partitions": partitions, "replication_factor": factor,
                "assignments": assignments, "configs": configs}  # fmt: skip

    def delete_topics(
        self, topics: list[str], *, operation_timeout: float = 0, request_timeout: float | None = None
    ) -> dict[str, Future[None]]:
        """Delete topics (DeleteTopics); ``{topic: Future[None]}``."""
        _nonempty_list("topics", topics, str, "topic strings")
        _no_duplicates("topic", topics)
        timeout_ms = int(_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        futures = {t: _future() for t in topics}

        def build(names: list[str]) -> dict[str, Any]:
            return {"topic_names": names, "topics": [{"name": n, "topic_id": _ZERO_UUID} for n in names],
                    "timeout": timeout_ms}  # fmt: skip

        def work() -> None:
            _settle(
                futures,
                self._to_controller(DELETE_TOPICS, topics, build, _topic_results("responses"), deadline),
            )

        self._submit(futures.values(), work)
        return futures

    def create_partitions(
        self,
        new_partitions: list[NewPartitions],
        *,
        operation_timeout: float = 0,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[str, Future[None]]:
        """Add partitions to topics (CreatePartitions); ``{topic: Future[None]}``."""
        _nonempty_list("new_partitions", new_partitions, NewPartitions, "NewPartitions objects")
        _no_duplicates("topic", (p.topic for p in new_partitions))
        timeout_ms = int(_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        _bool("validate_only", validate_only)
        specs = {}
        for p in new_partitions:
            owner = f"NewPartitions({p.topic!r})"
            if p.new_total_count < 1:
                raise ValueError(f"{owner}: new_total_count must be >= 1")
            assignments = None
            if p.replica_assignment is not None:
                assignments = [{"broker_ids": list(r)} for r in _assignment(owner, p.replica_assignment)]
            specs[p.topic] = {"name": p.topic, "count": p.new_total_count, "assignments": assignments}
        futures = {p.topic: _future() for p in new_partitions}

        def build(names: list[str]) -> dict[str, Any]:
            return {
                "topics": [specs[n] for n in names],
                "timeout": timeout_ms,
                "validate_only": validate_only,
            }

        def work() -> None:
            _settle(futures, self._to_controller(CREATE_PARTITIONS, list(specs), build, _topic_results("results"),
                                                 deadline))  # fmt: skip

        self._submit(futures.values(), work)
        return futures

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (all, or ``topic``), synchronously (as confluent's).

        An unknown ``topic`` is listed with ``error`` UNKNOWN_TOPIC_OR_PARTITION (never created).
        """
        if topic is not None and not isinstance(topic, str):
            raise TypeError(f"topic must be a str or None, not {type(topic).__name__}")
        response, origin = self._metadata(None if topic is None else [topic], timeout)
        return cluster_metadata(response, origin)

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The cluster id metadata gives (a Metadata request for no topics)."""
        response, _ = self._metadata([], timeout)
        cluster_id: str | None = response.cluster_id
        return cluster_id

    def _metadata(self, topics: list[str] | None, timeout: Any) -> tuple[Any, int]:
        """A Metadata answer (never creating topics) within ``timeout`` seconds (< 0: the default), and who gave it."""
        limit = self._default_timeout if timeout is None or timeout < 0 else _seconds("timeout", timeout, 0)
        if self._closed:
            raise RuntimeError("AdminClient has been closed")
        conn = self._cluster.any_connection()
        response = self._wait(
            conn.send(METADATA, _metadata_fields(topics)), time.monotonic() + limit, "Metadata"
        )
        return response, conn.node_id

    def describe_topics(
        self, topics: TopicCollection, *, request_timeout: float | None = None,
        include_authorized_operations: bool = False,
    ) -> dict[str, Future[TopicDescription]]:  # fmt: skip
        """Describe topics (Metadata); ``{topic: Future[TopicDescription]}``."""
        if not isinstance(topics, TopicCollection):
            raise TypeError("Expected input to be instance of TopicCollection")
        names = topics.topic_names
        if not isinstance(names, list):
            raise TypeError("Expected list of topic names to be described")
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"topic names are strings, not {name!r}")
            if not name:
                raise ValueError("Empty topic name")
        _no_duplicates("topic", names)
        _bool("include_authorized_operations", include_authorized_operations)
        deadline = self._deadline(request_timeout)
        futures = {name: _future() for name in names}
        if not names:
            return futures

        def work() -> None:
            fields = _metadata_fields(names, include_topic_operations=include_authorized_operations)
            response = self._wait(self._cluster.send(None, METADATA, fields), deadline, "Metadata")
            nodes = {
                int(b.node_id): Node(int(b.node_id), b.host, int(b.port), b.rack) for b in response.brokers
            }

            def node(node_id: int) -> Node:
                return nodes.get(node_id) or Node(node_id, "", -1)

            outcomes: dict[str, Any] = {}
            for t in response.topics:
                if t.error_code:
                    outcomes[t.name] = from_code(t.error_code, f"topic {t.name!r}")
                    continue
                partitions = [
                    TopicPartitionInfo(int(p.partition_index), node(int(p.leader_id)) if p.leader_id >= 0 else None,
                                       [node(int(r)) for r in p.replica_nodes], [node(int(r)) for r in p.isr_nodes])
                    for p in sorted(t.partitions, key=lambda p: p.partition_index)
                ]  # fmt: skip
                topic_id = getattr(t, "topic_id", None)
                outcomes[t.name] = TopicDescription(
                    t.name, topic_id, bool(getattr(t, "is_internal", False)), partitions,
                    _operations(int(getattr(t, "topic_authorized_operations", _NO_OPERATIONS))),
                )  # fmt: skip
            _settle(futures, outcomes)

        self._submit(futures.values(), work)
        return futures

    # -- configs -------------------------------------------------------------

    def _config_route(self, resource: ConfigResource) -> int | KafkaError | None:
        """BROKER resources go to that broker ("" to any), others to the controller."""
        if resource.restype is not ResourceType.BROKER:
            return self._controller()
        if resource.name == "":
            return None
        return int(resource.name)

    @staticmethod
    def _check_resources(resources: Any, method: str) -> list[ConfigResource]:
        if not isinstance(resources, list):
            raise TypeError(f"Expected list of ConfigResource, not {type(resources).__name__}")
        if not resources:
            raise ValueError("Expected non-empty list of ConfigResource objects")
        for r in resources:
            if not isinstance(r, ConfigResource):
                raise ValueError(f"Expected list of {ConfigResource!r}")
            if r.restype not in _CONFIG_WIRE_TYPE:
                raise ValueError(
                    f"{r!r}: {method} takes TOPIC, BROKER and GROUP resources, not {r.restype.name}"
                )
            if not isinstance(r.name, str):
                raise TypeError(f"{r!r}: the resource name must be a str")
            if r.restype is ResourceType.BROKER and r.name != "" and not r.name.isdigit():
                raise ValueError(f"{r!r}: a BROKER resource is named by the broker id, e.g. '0'")
        _no_duplicates("resource", resources)
        return resources

    def _configs_call(
        self,
        api_key: int,
        resources: list[ConfigResource],
        build_resource: Callable[[ConfigResource], dict[str, Any]],
        extra: dict[str, Any],
        results_field: str,
        value_of: Callable[[Any], Any],
        deadline: float,
    ) -> dict[ConfigResource, Future[Any]]:
        futures = {r: _future() for r in resources}
        by_key = {(_CONFIG_WIRE_TYPE[r.restype], r.name): r for r in resources}

        def build(batch: list[ConfigResource]) -> dict[str, Any]:
            return {"resources": [build_resource(r) for r in batch], **extra}

        def parse(response: Any, batch: list[ConfigResource]) -> dict[ConfigResource, Any]:
            out: dict[ConfigResource, Any] = {}
            for result in getattr(response, results_field):
                resource = by_key.get((int(result.resource_type), result.resource_name))
                if resource is None:
                    continue
                if result.error_code:
                    out[resource] = _error(result.error_code, result.error_message)
                else:
                    out[resource] = value_of(result)
            return out

        def work() -> None:
            _settle(
                futures, self._to_controller(api_key, resources, build, parse, deadline, self._config_route)
            )

        self._submit(futures.values(), work)
        return futures

    def describe_configs(
        self, resources: list[ConfigResource], *, request_timeout: float | None = None
    ) -> dict[ConfigResource, Future[dict[str, ConfigEntry]]]:
        """Every config of each resource (DescribeConfigs, with synonyms); ``{resource: Future[{name: ConfigEntry}]}``."""
        self._check_resources(resources, "describe_configs")
        deadline = self._deadline(request_timeout)

        def resource_fields(r: ConfigResource) -> dict[str, Any]:
            return {
                "resource_type": _CONFIG_WIRE_TYPE[r.restype],
                "resource_name": r.name,
                "configuration_keys": None,
            }

        return self._configs_call(DESCRIBE_CONFIGS, resources, resource_fields,
                                  {"include_synonyms": True, "include_documentation": False}, "results",
                                  _described_configs, deadline)  # fmt: skip

    def alter_configs(
        self,
        resources: list[ConfigResource],
        *,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[ConfigResource, Future[None]]:
        """Replace each resource's configs with its ``set_config`` (AlterConfigs); deprecated as in confluent.

        Every key not in ``set_config`` reverts to its default. ``{resource: Future[None]}``.
        """
        warnings.warn("alter_configs has been deprecated. Use incremental_alter_configs instead.",
                      category=DeprecationWarning, stacklevel=2)  # fmt: skip
        self._check_resources(resources, "alter_configs")
        _bool("validate_only", validate_only)
        deadline = self._deadline(request_timeout)
        for r in resources:
            for name, value in r.set_config_dict.items():
                _config_text(repr(r), name, value)

        def resource_fields(r: ConfigResource) -> dict[str, Any]:
            configs = [
                {"name": n, "value": _config_text(repr(r), n, v)} for n, v in r.set_config_dict.items()
            ]
            return {
                "resource_type": _CONFIG_WIRE_TYPE[r.restype],
                "resource_name": r.name,
                "configs": configs,
            }

        return self._configs_call(ALTER_CONFIGS, resources, resource_fields, {"validate_only": validate_only},
                                  "responses", lambda _: None, deadline)  # fmt: skip

    def incremental_alter_configs(
        self,
        resources: list[ConfigResource],
        *,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[ConfigResource, Future[None]]:
        """Apply each resource's ``incremental_configs`` (IncrementalAlterConfigs); ``{resource: Future[None]}``.

        Each ConfigEntry needs an ``incremental_operation``; SET/APPEND/SUBTRACT need a value.
        """
        self._check_resources(resources, "incremental_alter_configs")
        _bool("validate_only", validate_only)
        deadline = self._deadline(request_timeout)
        for r in resources:
            if not r.incremental_configs:
                raise ValueError(
                    "expected non-empty list of ConfigEntry to alter incrementally in incremental_configs field"
                )
            for entry in r.incremental_configs:
                if not isinstance(entry, ConfigEntry):
                    raise TypeError(f"{r!r}: incremental_configs holds ConfigEntry objects, not {entry!r}")
                if not isinstance(entry.incremental_operation, AlterConfigOpType):
                    raise TypeError(f"{r!r}: {entry!r} needs incremental_operation (an AlterConfigOpType)")
                if entry.incremental_operation is not AlterConfigOpType.DELETE and entry.value is None:
                    raise ValueError(f"{r!r}: {entry!r} {entry.incremental_operation.name} needs a value")
                _config_text(repr(r), entry.name, "" if entry.value is None else entry.value)
            _no_duplicates("config", (e.name for e in r.incremental_configs))

        def resource_fields(r: ConfigResource) -> dict[str, Any]:
            configs = [
                {"name": e.name, "config_operation": e.incremental_operation.value,  # type: ignore[union-attr]
                 "value": None if e.incremental_operation is AlterConfigOpType.DELETE
                 else _config_text(repr(r), e.name, e.value)}
                for e in r.incremental_configs
            ]  # fmt: skip
            return {
                "resource_type": _CONFIG_WIRE_TYPE[r.restype],
                "resource_name": r.name,
                "configs": configs,
            }

        return self._configs_call(INCREMENTAL_ALTER_CONFIGS, resources, resource_fields,
                                  {"validate_only": validate_only}, "responses", lambda _: None, deadline)  # fmt: skip

    # -- cluster -------------------------------------------------------------

    def describe_cluster(
        self, *, request_timeout: float | None = None, include_authorized_operations: bool = False
    ) -> Future[DescribeClusterResult]:
        """The cluster id, controller and brokers (DescribeCluster)."""
        _bool("include_authorized_operations", include_authorized_operations)
        deadline = self._deadline(request_timeout)
        future = _future()

        def work() -> None:
            fields = {
                "include_cluster_authorized_operations": include_authorized_operations,
                "endpoint_type": 1,
            }
            response = self._routed(DESCRIBE_CLUSTER, ["cluster"], lambda _: None, lambda _: fields,
                                    lambda r, _: {"cluster": r}, _ANY_RETRY, lambda _: None, deadline)["cluster"]  # fmt: skip
            if isinstance(response, KafkaError):
                raise KafkaException(response)
            if response.error_code:
                raise KafkaException(_error(response.error_code, response.error_message))
            nodes = [Node(int(b.broker_id), b.host, int(b.port), b.rack) for b in response.brokers]
            controller = next((n for n in nodes if n.id == response.controller_id), None)
            future.set_result(
                DescribeClusterResult(controller, nodes, response.cluster_id,
                                      _operations(int(response.cluster_authorized_operations)))
            )  # fmt: skip

        self._submit([future], work)
        return future

    def describe_log_dirs(
        self, brokers: list[int] | None = None, *, request_timeout: float | None = None
    ) -> Future[dict[int, dict[str, dict[str, Any]]]]:
        """The log directories of ``brokers`` (every broker when None) and the partitions in them.

        Not in confluent-kafka (Java's ``describeLogDirs``). The future's result is
        ``{broker_id: {path: {"error": KafkaError | None, "partitions": {TopicPartition: size_bytes},
        "total_bytes": int, "usable_bytes": int}}}`` (-1 where the broker does not say, before
        DescribeLogDirs v4). It fails if any broker cannot answer.
        """
        if brokers is not None:
            if not isinstance(brokers, list):
                raise TypeError(f"brokers must be a list of broker ids or None, not {type(brokers).__name__}")
            for b in brokers:
                _int("broker id", b)
            _no_duplicates("broker", brokers)
        deadline = self._deadline(request_timeout)
        future = _future()

        def work() -> None:
            self._ensure_metadata(refresh=brokers is None)
            targets = sorted(self._cluster.brokers) if brokers is None else brokers
            sent = {b: self._cluster.send(b, DESCRIBE_LOG_DIRS, {"topics": None}) for b in targets}
            out: dict[int, dict[str, dict[str, Any]]] = {}
            for broker, request in sent.items():
                response = self._wait(request, deadline, f"DescribeLogDirs to broker {broker}")
                if getattr(response, "error_code", 0):
                    raise KafkaException(_error(response.error_code, f"DescribeLogDirs of broker {broker}"))
                dirs: dict[str, dict[str, Any]] = {}
                for result in response.results:
                    partitions = {
                        TopicPartition(t.name, int(p.partition_index)): int(p.partition_size)
                        for t in result.topics for p in t.partitions
                    }  # fmt: skip
                    dirs[result.log_dir] = {
                        "error": _error(result.error_code, None) if result.error_code else None,
                        "partitions": partitions,
                        "total_bytes": int(getattr(result, "total_bytes", -1)),
                        "usable_bytes": int(getattr(result, "usable_bytes", -1)),
                    }
                out[broker] = dirs
            future.set_result(out)

        self._submit([future], work)
        return future

    # -- groups --------------------------------------------------------------

    def list_consumer_groups(
        self,
        *,
        request_timeout: float | None = None,
        states: set[ConsumerGroupState] | None = None,
        types: set[ConsumerGroupType] | None = None,
    ) -> Future[ListConsumerGroupsResult]:
        """The groups of every broker (ListGroups to each), filtered by ``states`` and ``types`` (sets)."""
        for name, values, kind in (
            ("states", states, ConsumerGroupState),
            ("types", types, ConsumerGroupType),
        ):
            if values is None:
                continue
            if not isinstance(values, set):
                raise TypeError(f"'{name}' must be a set")
            for value in values:
                if not isinstance(value, kind):
                    raise TypeError(f"All elements of {name} must be of type {kind.__name__}")
        deadline = self._deadline(request_timeout)
        future = _future()
        state_names = sorted(_STATE_NAMES[s] for s in states or ())
        type_names = sorted(t.name.lower() for t in types or () if t is not ConsumerGroupType.UNKNOWN)
        fields = {"states_filter": state_names, "types_filter": type_names}

        def work() -> None:
            self._ensure_metadata(refresh=True)
            sent = {b: self._cluster.send(b, LIST_GROUPS, fields) for b in sorted(self._cluster.brokers)}
            valid: dict[str, ConsumerGroupListing] = {}
            errors: list[KafkaException] = []
            for broker, request in sent.items():
                try:
                    response = self._wait(request, deadline, f"ListGroups to broker {broker}")
                except KafkaException as e:
                    errors.append(e)
                    continue
                if response.error_code:
                    errors.append(
                        KafkaException(_error(response.error_code, f"ListGroups of broker {broker}"))
                    )
                    continue
                for g in response.groups:
                    state = _STATE_OF_NAME.get(
                        str(getattr(g, "group_state", "")).lower(), ConsumerGroupState.UNKNOWN
                    )
                    kind = _TYPE_OF_NAME.get(
                        str(getattr(g, "group_type", "")).lower(), ConsumerGroupType.UNKNOWN
                    )
                    if states and state not in states:  # a broker before ListGroups v4 filters nothing
                        continue
                    if types and kind not in types:
                        continue
                    valid[g.group_id] = ConsumerGroupListing(g.group_id, g.protocol_type == "", state, kind)
            future.set_result(ListConsumerGroupsResult(list(valid.values()), errors))

        self._submit([future], work)
        return future

    @staticmethod
    def _check_group_ids(group_ids: Any, verb: str) -> list[str]:
        if not isinstance(group_ids, list):
            raise TypeError(f"Expected input to be list of group ids to be {verb}")
        if not group_ids:
            raise ValueError(f"Expected at least one group to be {verb}")
        for g in group_ids:
            if not isinstance(g, str):
                raise TypeError(f"Expected list of str group ids, found {g!r}")
            if not g:
                raise ValueError("group ids cannot be empty")
        _no_duplicates("group", group_ids)
        return group_ids

    def describe_consumer_groups(
        self, group_ids: list[str], *, request_timeout: float | None = None,
        include_authorized_operations: bool = False,
    ) -> dict[str, Future[ConsumerGroupDescription]]:  # fmt: skip
        """Describe groups (DescribeGroups to each coordinator); ``{group: Future[ConsumerGroupDescription]}``.

        Members' assignments are decoded as the "consumer" protocol's; a group the
        coordinator does not know is DEAD with no members (Kafka's answer).
        """
        self._check_group_ids(group_ids, "described")
        _bool("include_authorized_operations", include_authorized_operations)
        deadline = self._deadline(request_timeout)
        futures = {g: _future() for g in group_ids}

        def build(groups: list[str]) -> dict[str, Any]:
            return {"groups": groups, "include_authorized_operations": include_authorized_operations}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            out: dict[str, Any] = {}
            for g in response.groups:
                if g.error_code:
                    out[g.group_id] = from_code(g.error_code, f"group {g.group_id!r}")
                    continue
                coordinator = self._cluster.coordinator(g.group_id)
                out[g.group_id] = ConsumerGroupDescription(
                    g.group_id,
                    g.protocol_type == "",
                    [_member(m, g.protocol_type) for m in g.members],
                    g.protocol_data,
                    _STATE_OF_NAME.get(g.group_state.lower(), ConsumerGroupState.UNKNOWN),
                    self._node(coordinator),
                    _operations(int(getattr(g, "authorized_operations", _NO_OPERATIONS))),
                    ConsumerGroupType.CLASSIC,
                )
            return out

        def work() -> None:
            _settle(futures, self._to_coordinators(DESCRIBE_GROUPS, group_ids, build, parse, deadline))

        self._submit(futures.values(), work)
        return futures

    def delete_consumer_groups(
        self, group_ids: list[str], *, request_timeout: float | None = None
    ) -> dict[str, Future[None]]:
        """Delete groups with no members (DeleteGroups); ``{group: Future[None]}``."""
        self._check_group_ids(group_ids, "deleted")
        deadline = self._deadline(request_timeout)
        futures = {g: _future() for g in group_ids}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            return {
                r.group_id: from_code(r.error_code, f"group {r.group_id!r}")
                if r.error_code else None
                for r in response.results
            }  # fmt: skip

        def work() -> None:
            _settle(futures, self._to_coordinators(DELETE_GROUPS, group_ids, lambda gs: {"groups_names": gs}, parse,
                                                   deadline))  # fmt: skip

        self._submit(futures.values(), work)
        return futures

    def list_consumer_group_offsets(
        self,
        list_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        *,
        require_stable: bool = False,
        request_timeout: float | None = None,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """A group's committed offsets (OffsetFetch): of the partitions given, or all when None.

        One group per call (as confluent). A partition with no committed offset has offset
        OFFSET_INVALID (-1001). ``{group: Future[ConsumerGroupTopicPartitions]}``.
        """
        req = _check_group_partitions(list_consumer_group_offsets_request, "listing offsets", "none")
        _bool("require_stable", require_stable)
        deadline = self._deadline(request_timeout)
        group = req.group_id
        topics = None
        if req.topic_partitions is not None:
            topics = [{"name": t, "partition_indexes": [tp.partition for tp in tps]}
                      for t, tps in _by_topic(req.topic_partitions).items()]  # fmt: skip
        fields = {"group_id": group, "topics": topics, "groups": [{"group_id": group, "topics": topics}],
                  "require_stable": require_stable}  # fmt: skip
        futures = {group: _future()}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            answer = response.groups[0] if getattr(response, "groups", None) else response
            if answer.error_code:
                return {group: from_code(answer.error_code, f"group {group!r}")}
            partitions = []
            for t in answer.topics:
                for p in t.partitions:
                    if p.error_code in _COORDINATOR_RETRY:
                        return {group: _error(p.error_code, None)}
                    offset = int(p.committed_offset)
                    tp = TopicPartition(t.name, int(p.partition_index), offset if offset >= 0 else OFFSET_INVALID,
                                        p.metadata or None,
                                        int(getattr(p, "committed_leader_epoch", -1)))  # fmt: skip
                    if tp.leader_epoch is not None and tp.leader_epoch < 0:
                        tp.leader_epoch = None
                    if p.error_code:
                        tp.error = _error(p.error_code, None)
                    partitions.append(tp)
            return {group: ConsumerGroupTopicPartitions(group, sorted(partitions))}

        def work() -> None:
            _settle(futures, self._to_coordinators(OFFSET_FETCH, [group], lambda _: fields, parse, deadline))

        self._submit(futures.values(), work)
        return futures

    def alter_consumer_group_offsets(
        self,
        alter_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """Commit offsets for a group with no active members (OffsetCommit as an admin: generation -1).

        One group per call (as confluent). A partition's error is on its TopicPartition's
        ``error``; a group-level error fails the future. ``{group: Future[ConsumerGroupTopicPartitions]}``.
        """
        req = _check_group_partitions(alter_consumer_group_offsets_request, "altering offsets", "set")
        deadline = self._deadline(request_timeout)
        group = req.group_id
        assert req.topic_partitions is not None
        topics = [
            {"name": t, "partitions": [
                {"partition_index": tp.partition, "committed_offset": tp.offset,
                 "committed_leader_epoch": -1 if tp.leader_epoch is None else tp.leader_epoch,
                 "committed_metadata": tp.metadata}
                for tp in tps]}
            for t, tps in _by_topic(req.topic_partitions).items()
        ]  # fmt: skip
        fields = {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "", "group_instance_id": None,
                  "retention_time": -1, "topics": topics}  # fmt: skip
        futures = {group: _future()}
        requested = {(tp.topic, tp.partition): tp for tp in req.topic_partitions}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            return {group: _partition_results(group, response, requested, offsets=True)}

        def work() -> None:
            _settle(futures, self._to_coordinators(OFFSET_COMMIT, [group], lambda _: fields, parse, deadline))

        self._submit(futures.values(), work)
        return futures

    def delete_consumer_group_offsets(
        self,
        delete_consumer_group_offsets_request: list[ConsumerGroupTopicPartitions],
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Future[ConsumerGroupTopicPartitions]]:
        """Delete a group's committed offsets of some partitions (OffsetDelete); not in confluent-kafka.

        Takes one ConsumerGroupTopicPartitions (offsets unset), as ``list_consumer_group_offsets``.
        A group error (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, ...) fails the future; a partition's
        (GROUP_SUBSCRIBED_TO_TOPIC) is on its TopicPartition's ``error``.
        ``{group: Future[ConsumerGroupTopicPartitions]}``.
        """
        req = _check_group_partitions(delete_consumer_group_offsets_request, "deleting offsets", "none")
        if req.topic_partitions is None:
            raise ValueError("'topic_partitions' cannot be null")
        deadline = self._deadline(request_timeout)
        group = req.group_id
        topics = [{"name": t, "partitions": [{"partition_index": tp.partition} for tp in tps]}
                  for t, tps in _by_topic(req.topic_partitions).items()]  # fmt: skip
        fields = {"group_id": group, "topics": topics}
        futures = {group: _future()}
        requested = {(tp.topic, tp.partition): tp for tp in req.topic_partitions}

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            if response.error_code:
                return {group: from_code(response.error_code, f"group {group!r}")}  # fmt: skip
            return {group: _partition_results(group, response, requested, offsets=False)}

        def work() -> None:
            _settle(futures, self._to_coordinators(OFFSET_DELETE, [group], lambda _: fields, parse, deadline))

        self._submit(futures.values(), work)
        return futures

    # -- offsets and records -------------------------------------------------

    def list_offsets(
        self,
        topic_partition_offsets: dict[TopicPartition, OffsetSpec],
        *,
        isolation_level: IsolationLevel | None = None,
        request_timeout: float | None = None,
    ) -> dict[TopicPartition, Future[ListOffsetsResultInfo]]:
        """Offsets by spec (ListOffsets to each partition's leader); ``{TopicPartition: Future[ListOffsetsResultInfo]}``.

        The keys are new TopicPartitions whose ``offset`` is the spec's value (as confluent's),
        equal to (hashed as) the caller's.
        """
        if not isinstance(topic_partition_offsets, dict):
            raise TypeError(
                "Expected topic_partition_offsets to be dict of [TopicPartitions,OffsetSpec] for list offsets request"
            )
        for tp, spec in topic_partition_offsets.items():
            _check_partition(tp)
            if spec is None:
                raise TypeError("OffsetSpec cannot be None")
            if not isinstance(spec, OffsetSpec):
                raise TypeError("Value must be a OffsetSpec")
        if isolation_level is not None and not isinstance(isolation_level, IsolationLevel):
            raise TypeError("isolation_level argument should be an IsolationLevel")
        level = 0 if isolation_level is None else isolation_level.value
        deadline = self._deadline(request_timeout)
        specs = {(tp.topic, tp.partition): int(spec._value) for tp, spec in topic_partition_offsets.items()}
        futures = {TopicPartition(t, p, spec): _future() for (t, p), spec in specs.items()}

        def build(batch: list[tuple[str, int]]) -> dict[str, Any]:
            topics: dict[str, list[dict[str, Any]]] = {}
            for t, p in batch:
                topics.setdefault(t, []).append(
                    {"partition_index": p, "current_leader_epoch": -1, "timestamp": specs[(t, p)]}
                )
            return {"replica_id": -1, "isolation_level": level,
                    "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}  # fmt: skip

        def parse(response: Any, _: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
            out: dict[tuple[str, int], Any] = {}
            for t in response.topics:
                for p in t.partitions:
                    key = (t.name, int(p.partition_index))
                    if p.error_code:
                        out[key] = from_code(p.error_code, f"{t.name} [{p.partition_index}]")
                    else:
                        out[key] = ListOffsetsResultInfo(int(p.offset), int(p.timestamp),
                                                         int(getattr(p, "leader_epoch", -1)))  # fmt: skip
            return out

        def work() -> None:
            outcomes = self._to_leaders(LIST_OFFSETS, list(specs), build, parse, deadline)
            _settle(futures, {TopicPartition(t, p): outcome for (t, p), outcome in outcomes.items()})

        self._submit(futures.values(), work)
        return futures

    def delete_records(
        self,
        topic_partition_offsets: list[TopicPartition],
        *,
        request_timeout: float | None = None,
        operation_timeout: float = 60,
    ) -> dict[TopicPartition, Future[DeletedRecords]]:
        """Delete the records before each ``offset`` (OFFSET_END: all) (DeleteRecords to the leaders).

        ``{TopicPartition: Future[DeletedRecords]}``; the new log start offset is ``low_watermark``.
        """
        if not isinstance(topic_partition_offsets, list):
            raise TypeError(f"Expected Request to be a list, got '{type(topic_partition_offsets).__name__}' ")
        for tp in topic_partition_offsets:
            if not isinstance(tp, TopicPartition):
                raise TypeError(
                    f"Element of the request list must be of type 'TopicPartition' got '{type(tp).__name__}' "
                )
            _check_partition(tp)
            if tp.offset < 0 and tp.offset != -1:
                raise ValueError(f"{tp!r}: offset must be >= 0, or OFFSET_END (-1) to delete every record")
        _no_duplicates("partition", ((tp.topic, tp.partition) for tp in topic_partition_offsets))
        timeout_ms = int(_seconds("operation_timeout", operation_timeout, 60) * 1000)
        deadline = self._deadline(request_timeout)
        offsets = {(tp.topic, tp.partition): tp.offset for tp in topic_partition_offsets}
        futures = {tp: _future() for tp in topic_partition_offsets}

        def build(batch: list[tuple[str, int]]) -> dict[str, Any]:
            topics: dict[str, list[dict[str, Any]]] = {}
            for t, p in batch:
                topics.setdefault(t, []).append({"partition_index": p, "offset": offsets[(t, p)]})
            return {
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
                "timeout": timeout_ms,
            }

        def parse(response: Any, _: list[tuple[str, int]]) -> dict[tuple[str, int], Any]:
            out: dict[tuple[str, int], Any] = {}
            for t in response.topics:
                for p in t.partitions:
                    key = (t.name, int(p.partition_index))
                    if p.error_code:
                        out[key] = from_code(p.error_code, f"{t.name} [{p.partition_index}]")
                    else:
                        out[key] = DeletedRecords(int(p.low_watermark))
            return out

        def work() -> None:
            outcomes = self._to_leaders(DELETE_RECORDS, list(offsets), build, parse, deadline)
            _settle(futures, {TopicPartition(t, p): outcome for (t, p), outcome in outcomes.items()})

        self._submit(futures.values(), work)
        return futures

    # -- leaders and replicas (the controller's) ---------------------------------

    def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: list[TopicPartition] | None = None,
        *,
        request_timeout: float | None = None,
        operation_timeout: float = 60.0,
    ) -> Future[dict[TopicPartition, KafkaError | None]]:
        """A preferred or unclean leader election (ElectLeaders, sent to the controller) for
        ``partitions`` or, with None, every partition. The future's result: each partition's
        KafkaError (ELECTION_NOT_NEEDED when its leader is already the one asked for) or None."""
        election = ElectionType(election_type)
        if partitions is not None:
            _nonempty_list("partitions", partitions, TopicPartition, "TopicPartition objects")
        timeout_ms = int(_seconds("operation_timeout", operation_timeout, 0) * 1000)
        deadline = self._deadline(request_timeout)
        future = _future()
        topics: dict[str, list[int]] = {}
        for tp in partitions or ():
            topics.setdefault(tp.topic, []).append(tp.partition)
        fields = {
            "election_type": int(election),
            "topic_partitions": None if partitions is None else [
                {"topic": t, "partitions": ps} for t, ps in topics.items()
            ],
            "timeout": timeout_ms,
        }  # fmt: skip

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            if getattr(response, "error_code", 0):
                return {"elect": _error(response.error_code, None)}
            return {"elect": response}

        def work() -> None:
            response = self._to_controller(ELECT_LEADERS, ["elect"], lambda _: fields, parse, deadline)[
                "elect"
            ]
            if isinstance(response, KafkaError):
                raise KafkaException(response)
            result: dict[TopicPartition, KafkaError | None] = {}
            for topic in response.replica_election_results:
                for p in topic.partition_result:
                    error = _error(p.error_code, p.error_message) if p.error_code else None
                    result[TopicPartition(topic.topic, p.partition_id)] = error
            future.set_result(result)

        self._submit([future], work)
        return future

    def alter_partition_reassignments(
        self,
        reassignments: Mapping[TopicPartition, list[int] | None],
        *,
        request_timeout: float | None = None,
    ) -> dict[TopicPartition, Future[None]]:
        """Move partitions to new replicas, or cancel a move with None (AlterPartitionReassignments,
        sent to the controller; Java's ``alterPartitionReassignments``). One future per partition;
        it settles when the controller has started the move (ListPartitionReassignments shows it
        until the new replicas are in sync and the old ones gone)."""
        if not isinstance(reassignments, Mapping) or not reassignments:
            raise ValueError(
                "reassignments must be a non-empty dict of TopicPartition to a list of broker ids or None"
            )
        topics: dict[str, list[dict[str, Any]]] = {}
        for tp, replicas in reassignments.items():
            if not isinstance(tp, TopicPartition):
                raise TypeError(
                    f"reassignments' keys must be TopicPartition objects, not {type(tp).__name__}"
                )
            if replicas is not None and (
                not isinstance(replicas, list) or not all(isinstance(b, int) for b in replicas)
            ):
                raise TypeError(f"{tp}: replicas must be a list of broker ids (int) or None to cancel")
            topics.setdefault(tp.topic, []).append({"partition_index": tp.partition, "replicas": replicas})
        deadline = self._deadline(request_timeout)
        futures = {tp: _future() for tp in reassignments}
        fields = {
            "timeout": int(max(deadline - time.monotonic(), 0) * 1000),
            "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            "allow_replication_factor_change": True,
        }

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            if response.error_code:
                return {"alter": _error(response.error_code, response.error_message)}
            return {"alter": response}

        def work() -> None:
            response = self._to_controller(ALTER_PARTITION_REASSIGNMENTS, ["alter"], lambda _: fields, parse,
                                           deadline)["alter"]  # fmt: skip
            if isinstance(response, KafkaError):
                raise KafkaException(response)
            outcomes: dict[TopicPartition, Any] = {}
            for topic in response.responses:
                for p in topic.partitions:
                    error = _error(p.error_code, p.error_message) if p.error_code else None
                    outcomes[TopicPartition(topic.name, p.partition_index)] = error
            _settle(futures, outcomes)

        self._submit(futures.values(), work)
        return futures

    def list_partition_reassignments(
        self, partitions: list[TopicPartition] | None = None, *, request_timeout: float | None = None
    ) -> Future[dict[TopicPartition, PartitionReassignment]]:
        """The reassignments in progress, among ``partitions`` or all (ListPartitionReassignments,
        sent to the controller)."""
        if partitions is not None:
            _nonempty_list("partitions", partitions, TopicPartition, "TopicPartition objects")
        deadline = self._deadline(request_timeout)
        topics: dict[str, list[int]] = {}
        for tp in partitions or ():
            topics.setdefault(tp.topic, []).append(tp.partition)
        fields = {
            "timeout": int(max(deadline - time.monotonic(), 0) * 1000),
            "topics": None if partitions is None else [
                {"name": t, "partition_indexes": ps} for t, ps in topics.items()
            ],
        }  # fmt: skip
        future = _future()

        def parse(response: Any, _: list[str]) -> dict[str, Any]:
            if response.error_code:
                return {"list": _error(response.error_code, response.error_message)}
            return {"list": response}

        def work() -> None:
            response = self._to_controller(LIST_PARTITION_REASSIGNMENTS, ["list"], lambda _: fields, parse,
                                           deadline)["list"]  # fmt: skip
            if isinstance(response, KafkaError):
                raise KafkaException(response)
            future.set_result({
                TopicPartition(topic.name, p.partition_index): PartitionReassignment(
                    list(p.replicas), list(p.adding_replicas), list(p.removing_replicas)
                )
                for topic in response.topics
                for p in topic.partitions
            })  # fmt: skip

        self._submit([future], work)
        return future

    # -- ACLs (DescribeAcls, CreateAcls, DeleteAcls; any broker answers) ------------------------

    def _acl_request(self, api_key: int, fields: dict[str, Any], deadline: float) -> Any:
        response = self._routed(api_key, ["acls"], lambda _: None, lambda _: fields,
                                lambda r, _: {"acls": r}, _ANY_RETRY, lambda _: None, deadline)["acls"]  # fmt: skip
        if isinstance(response, KafkaError):
            raise KafkaException(response)
        return response

    @staticmethod
    def _binding_of(item: Any, name_field: str = "resource_name") -> AclBinding:
        pattern = getattr(item, "pattern_type", None)
        if pattern is None:
            pattern = item.resource_pattern_type
        return AclBinding(
            _enum_or_unknown(ResourceType, item.resource_type), getattr(item, name_field),
            _enum_or_unknown(ResourcePatternType, pattern), item.principal, item.host,
            _enum_or_unknown(AclOperation, item.operation), _enum_or_unknown(AclPermissionType, item.permission_type),
        )  # fmt: skip

    def create_acls(
        self, acls: list[AclBinding], *, request_timeout: float | None = None
    ) -> dict[AclBinding, Future[None]]:
        """Add ACLs (CreateAcls): a future per binding, None or a KafkaException."""
        bindings = _nonempty_list("acls", acls, AclBinding, "AclBinding")
        _no_duplicates("acls", bindings)
        deadline = self._deadline(request_timeout)
        futures = {b: _future() for b in bindings}

        def work() -> None:
            response = self._acl_request(CREATE_ACLS, {"creations": [b.wire() for b in bindings]}, deadline)
            results = list(response.results)
            if len(results) != len(bindings):
                raise KafkaException(local("_BAD_MSG", "CreateAcls: one result per ACL expected"))
            _settle(futures, {
                b: (_error(r.error_code, r.error_message) if r.error_code else None)
                for b, r in zip(bindings, results, strict=True)
            })  # fmt: skip

        self._submit(futures.values(), work)
        return futures

    def describe_acls(
        self, acl_binding_filter: AclBindingFilter, *, request_timeout: float | None = None
    ) -> Future[list[AclBinding]]:
        """The ACLs the filter matches (DescribeAcls)."""
        if not isinstance(acl_binding_filter, AclBindingFilter):
            raise TypeError("describe_acls expects an AclBindingFilter")
        deadline = self._deadline(request_timeout)
        future = _future()

        def work() -> None:
            response = self._acl_request(DESCRIBE_ACLS, acl_binding_filter.wire_filter(), deadline)
            if response.error_code:
                raise KafkaException(_error(response.error_code, response.error_message))
            future.set_result([
                AclBinding(
                    _enum_or_unknown(ResourceType, r.resource_type), r.resource_name,
                    _enum_or_unknown(ResourcePatternType, r.pattern_type), a.principal, a.host,
                    _enum_or_unknown(AclOperation, a.operation), _enum_or_unknown(AclPermissionType, a.permission_type),
                )
                for r in response.resources
                for a in r.acls
            ])  # fmt: skip

        self._submit([future], work)
        return future

    def delete_acls(
        self, acl_binding_filters: list[AclBindingFilter], *, request_timeout: float | None = None
    ) -> dict[AclBindingFilter, Future[list[AclBinding]]]:
        """Remove the ACLs each filter matches (DeleteAcls): per filter, the ACLs removed."""
        filters = _nonempty_list("acl_binding_filters", acl_binding_filters, AclBindingFilter, "AclBindingFilter")
        _no_duplicates("acl_binding_filters", filters)
        deadline = self._deadline(request_timeout)
        futures = {f: _future() for f in filters}

        def work() -> None:
            response = self._acl_request(DELETE_ACLS, {"filters": [f.wire_filter() for f in filters]}, deadline)
            results = list(response.filter_results)
            if len(results) != len(filters):
                raise KafkaException(local("_BAD_MSG", "DeleteAcls: one result per filter expected"))
            _settle(futures, {
                f: (_error(r.error_code, r.error_message) if r.error_code
                    else [self._binding_of(m) for m in r.matching_acls])
                for f, r in zip(filters, results, strict=True)
            })  # fmt: skip

        self._submit(futures.values(), work)
        return futures

    def describe_client_quotas(
        self,
        components: Sequence[tuple[str, str | None]] = (),
        *,
        strict: bool = False,
        request_timeout: float | None = None,
    ) -> Future[dict[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """Quotas of the entities matching a filter (DescribeClientQuotas; Java's describeClientQuotas).

        ``components``: (entity type, match) pairs, entity type ``user``, ``client-id`` or ``ip``;
        match a name (EXACT), None (the ``<default>`` entity: DEFAULT) or ``"*"`` (any entity of
        that type: SPECIFIED). ``strict``: only entities with no other type. The result maps
        each entity, a sorted tuple of (type, name or None for the default), to its quotas.
        """
        fields = {
            "components": [
                {"entity_type": t, "match_type": 2 if m == "*" else 1 if m is None else 0,
                 "match": None if m is None or m == "*" else m}
                for t, m in components
            ],
            "strict": bool(strict),
        }  # fmt: skip
        deadline = self._deadline(request_timeout)
        future = _future()

        def work() -> None:
            response = self._routed(DESCRIBE_CLIENT_QUOTAS, ["quotas"], lambda _: None, lambda _: fields,
                                    lambda r, _: {"quotas": r}, _ANY_RETRY, lambda _: None, deadline)["quotas"]  # fmt: skip
            if isinstance(response, KafkaError):
                raise KafkaException(response)
            if response.error_code:
                raise KafkaException(_error(response.error_code, response.error_message))
            future.set_result({
                tuple(sorted((e.entity_type, e.entity_name) for e in entry.entity)):
                    {v.key: float(v.value) for v in entry.values}
                for entry in response.entries
            })  # fmt: skip

        self._submit([future], work)
        return future

    def alter_client_quotas(
        self,
        alterations: Sequence[tuple[Mapping[str, str | None], Mapping[str, float | None]]],
        *,
        validate_only: bool = False,
        request_timeout: float | None = None,
    ) -> list[Future[None]]:
        """Set (a value) or remove (None) quotas of entities (AlterClientQuotas; Java's alterClientQuotas).

        Each alteration: ({entity type: name or None for ``<default>``}, {quota key: value or
        None}). One future per alteration, failed with the broker's error (INVALID_REQUEST
        and its message for a bad key, value or entity)."""
        entries = [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity.items()],
             "ops": [{"key": k, "value": 0.0 if v is None else float(v), "remove": v is None} for k, v in ops.items()]}
            for entity, ops in alterations
        ]  # fmt: skip
        fields = {"entries": entries, "validate_only": bool(validate_only)}
        deadline = self._deadline(request_timeout)
        futures = [_future() for _ in entries]

        def work() -> None:
            response = self._routed(ALTER_CLIENT_QUOTAS, ["quotas"], lambda _: None, lambda _: fields,
                                    lambda r, _: {"quotas": r}, _ANY_RETRY, lambda _: None, deadline)["quotas"]  # fmt: skip
            if isinstance(response, KafkaError):
                raise KafkaException(response)
            for future, entry in zip(futures, response.entries, strict=True):
                if entry.error_code:
                    future.set_exception(KafkaException(_error(entry.error_code, entry.error_message)))
                else:
                    future.set_result(None)

        self._submit(futures, work)
        return futures

    def _deadline(self, request_timeout: Any) -> float:
        return time.monotonic() + _seconds("request_timeout", request_timeout, self._default_timeout)


# -- response helpers ----------------------------------------------------------------------------


def _enum_or_unknown(kind: Any, code: int) -> Any:
    try:
        return kind(int(code))
    except ValueError:
        return kind(0)


def _topic_results(field: str) -> Callable[[Any, list[str]], dict[str, Any]]:
    """A parser of per-topic results (name, error_code, error_message) in ``field``: None or a KafkaError."""

    def parse(response: Any, _: list[str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for result in getattr(response, field):
            if result.error_code:
                out[result.name] = _error(result.error_code, getattr(result, "error_message", None))
            else:
                out[result.name] = None
        return out

    return parse


def _described_configs(result: Any) -> dict[str, ConfigEntry]:
    out = {}
    for c in result.configs:
        source = _source(int(c.config_source))
        synonyms = {
            s.name: ConfigEntry(s.name, s.value, _source(int(s.source)), is_synonym=True)
            for s in getattr(c, "synonyms", ())
        }
        out[c.name] = ConfigEntry(c.name, c.value, source, bool(c.read_only), source is ConfigSource.DEFAULT_CONFIG,
                                  bool(c.is_sensitive), False, synonyms)  # fmt: skip
    return out


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN_CONFIG


def _metadata_fields(topics: list[str] | None, include_topic_operations: bool = False) -> dict[str, Any]:
    return {
        "topics": None if topics is None else [{"name": n, "topic_id": _ZERO_UUID} for n in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": include_topic_operations,
    }


def _node_of(broker: BrokerMeta) -> Node:
    return Node(broker.node_id, broker.host, broker.port, broker.rack)


def _member(member: Any, protocol_type: str) -> MemberDescription:
    partitions: list[TopicPartition] = []
    if protocol_type == "consumer" and member.member_assignment:
        try:
            assignment = decode_assignment(member.member_assignment)
        except ConsumerProtocolError:
            assignment = None
        if assignment is not None:
            partitions = [TopicPartition(t, p) for t, p in assignment.partitions]
    return MemberDescription(member.member_id, member.client_id, member.client_host, MemberAssignment(partitions),
                             getattr(member, "group_instance_id", None))  # fmt: skip


def _partition_results(
    group: str, response: Any, requested: dict[tuple[str, int], TopicPartition], *, offsets: bool
) -> ConsumerGroupTopicPartitions | KafkaError:
    """The partitions of an OffsetCommit/OffsetDelete answer, each with its error (a coordinator error: retry)."""
    partitions = []
    for t in response.topics:
        for p in t.partitions:
            if p.error_code in _COORDINATOR_RETRY:
                return from_code(p.error_code, f"group {group!r}")
            key = (t.name, int(p.partition_index))
            asked = requested.get(key)
            tp = TopicPartition(
                t.name, key[1], asked.offset if asked is not None and offsets else OFFSET_INVALID
            )
            if asked is not None and offsets:
                tp.metadata, tp.leader_epoch = asked.metadata, asked.leader_epoch
            if p.error_code:
                tp.error = _error(p.error_code, None)
            partitions.append(tp)
    return ConsumerGroupTopicPartitions(group, sorted(partitions))


def _check_partition(tp: Any) -> None:
    if tp is None:
        raise TypeError("partition cannot be None")
    if not isinstance(tp, TopicPartition):
        raise TypeError("partition must be a TopicPartition")
    if tp.topic is None:
        raise TypeError("partition topic name cannot be None")
    if not isinstance(tp.topic, str):
        raise TypeError("partition topic name must be string")
    if not tp.topic:
        raise ValueError("partition topic name cannot be empty")
    if tp.partition < 0:
        raise ValueError("partition index must be non-negative")


__all__ = [
    "CONFIG_SOURCE_DEFAULT_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG",
    "CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG",
    "CONFIG_SOURCE_GROUP_CONFIG",
    "CONFIG_SOURCE_STATIC_BROKER_CONFIG",
    "CONFIG_SOURCE_UNKNOWN_CONFIG",
    "RESOURCE_ANY",
    "RESOURCE_BROKER",
    "RESOURCE_GROUP",
    "RESOURCE_TOPIC",
    "RESOURCE_TRANSACTIONAL_ID",
    "RESOURCE_UNKNOWN",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AdminClient",
    "AlterConfigOpType",
    "BrokerMetadata",
    "ClusterMetadata",
    "ConfigEntry",
    "ConfigResource",
    "ConfigSource",
    "ConsumerGroupDescription",
    "ConsumerGroupListing",
    "ConsumerGroupState",
    "ConsumerGroupTopicPartitions",
    "ConsumerGroupType",
    "DeletedRecords",
    "DescribeClusterResult",
    "ElectionType",
    "IsolationLevel",
    "ListConsumerGroupsResult",
    "ListOffsetsResultInfo",
    "MemberAssignment",
    "MemberDescription",
    "NewPartitions",
    "NewTopic",
    "Node",
    "OffsetSpec",
    "PartitionMetadata",
    "PartitionReassignment",
    "ResourcePatternType",
    "ResourceType",
    "TopicCollection",
    "TopicDescription",
    "TopicMetadata",
    "TopicPartitionInfo",
]


def cluster_metadata(response: Any, origin: int = -1) -> ClusterMetadata:
    """A Metadata answer as confluent's ``ClusterMetadata`` (``list_topics`` of every client)."""
    md = ClusterMetadata()
    md.cluster_id = response.cluster_id
    md.controller_id = int(response.controller_id)
    for b in response.brokers:
        broker = BrokerMetadata()
        broker.id, broker.host, broker.port = int(b.node_id), b.host, int(b.port)
        md.brokers[broker.id] = broker
    if origin < 0 and len(md.brokers) == 1:  # a bootstrap connection to a one-broker cluster
        origin = next(iter(md.brokers))
    md.orig_broker_id = origin
    if origin in md.brokers:
        md.orig_broker_name = str(md.brokers[origin])
    for t in response.topics:
        tm = TopicMetadata()
        tm.topic = t.name
        tm.error = _error(t.error_code, None) if t.error_code else None
        for p in t.partitions:
            pm = PartitionMetadata()
            pm.id, pm.leader = int(p.partition_index), int(p.leader_id)
            pm.replicas = [int(r) for r in p.replica_nodes]
            pm.isrs = [int(r) for r in p.isr_nodes]
            pm.error = _error(p.error_code, None) if p.error_code else None
            tm.partitions[pm.id] = pm
        md.topics[t.name] = tm
    return md
